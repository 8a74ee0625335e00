//! A file written by a thread of its own, so that an export's writes overlap the reads that
//! feed it: the reader's thread only copies bytes into a buffer and hands full buffers over.
//! Written on the reader's thread, an export ran at read time plus write time (a 4 GB
//! recording read at 1.1 GB/s exported at 0.8-0.9 GB/s to tmpfs); behind it, at the read rate.
//!
//! [`WRITE_BEHIND_BUFFERS`] buffers of [`WRITE_BEHIND_BUFFER_BYTES`], allocated at the start,
//! go round between the two threads over bounded channels; nothing is allocated after. A
//! write that fails on the thread is returned by the next write, flush or
//! [`WriteBehind::finish`]. `flush` returns once every byte handed over is in the file.

use std::fs::File;
use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

/// Bytes of one buffer, and buffers in all (one filling, the others written or waiting).
pub const WRITE_BEHIND_BUFFER_BYTES: usize = 4 << 20;
pub const WRITE_BEHIND_BUFFERS: usize = 4;

pub struct WriteBehind {
    to_writer: Option<SyncSender<Vec<u8>>>,
    from_writer: Receiver<Vec<u8>>,
    /// Empty buffers on this side.
    pool: Vec<Vec<u8>>,
    current: Vec<u8>,
    /// Buffers handed over and not back yet.
    in_flight: usize,
    writer: Option<JoinHandle<io::Result<File>>>,
}

impl WriteBehind {
    /// Starts the thread that writes `file`.
    pub fn new(mut file: File) -> io::Result<WriteBehind> {
        let (to_writer, full) = sync_channel::<Vec<u8>>(WRITE_BEHIND_BUFFERS);
        let (back, from_writer) = sync_channel::<Vec<u8>>(WRITE_BEHIND_BUFFERS);
        let writer = std::thread::Builder::new()
            .name("nvrec-export-write".into())
            .spawn(move || {
                for mut buffer in full {
                    file.write_all(&buffer)?;
                    buffer.clear();
                    if back.send(buffer).is_err() {
                        break;
                    }
                }
                Ok(file)
            })?;
        let buffer = || Vec::with_capacity(WRITE_BEHIND_BUFFER_BYTES);
        Ok(WriteBehind {
            to_writer: Some(to_writer),
            from_writer,
            pool: (1..WRITE_BEHIND_BUFFERS).map(|_| buffer()).collect(),
            current: buffer(),
            in_flight: 0,
            writer: Some(writer),
        })
    }

    /// Hands the current buffer over and takes an empty one (waiting for one to come back
    /// when none is at hand).
    fn hand_over(&mut self) -> io::Result<()> {
        let next = match self.pool.pop() {
            Some(buffer) => buffer,
            None => self.take_back()?,
        };
        let full = std::mem::replace(&mut self.current, next);
        let sent = self.to_writer.as_ref().map(|to| to.send(full));
        if !matches!(sent, Some(Ok(()))) {
            return Err(self.writer_error());
        }
        self.in_flight += 1;
        Ok(())
    }

    /// Waits for a buffer the thread has written.
    fn take_back(&mut self) -> io::Result<Vec<u8>> {
        match self.from_writer.recv() {
            Ok(buffer) => {
                self.in_flight -= 1;
                Ok(buffer)
            }
            Err(_) => Err(self.writer_error()),
        }
    }

    /// Why the thread stopped: its write's error.
    fn writer_error(&mut self) -> io::Error {
        self.to_writer = None;
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(Err(error))) => error,
            _ => io::Error::other("the export's writer thread ended"),
        }
    }

    /// Writes what is left, ends the thread and gives the file back.
    pub fn finish(mut self) -> io::Result<File> {
        self.flush()?;
        self.to_writer = None;
        match self.writer.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            _ => Err(io::Error::other("the export's writer thread panicked")),
        }
    }
}

impl Write for WriteBehind {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let room = WRITE_BEHIND_BUFFER_BYTES - self.current.len();
        let taken = room.min(bytes.len());
        self.current.extend_from_slice(&bytes[..taken]);
        if self.current.len() == WRITE_BEHIND_BUFFER_BYTES {
            self.hand_over()?;
        }
        Ok(taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.current.is_empty() {
            self.hand_over()?;
        }
        while self.in_flight > 0 {
            let buffer = self.take_back()?;
            self.pool.push(buffer);
        }
        Ok(())
    }
}

impl Drop for WriteBehind {
    fn drop(&mut self) {
        self.to_writer = None;
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_arrives_in_order_and_a_failed_write_is_returned() {
        let path = std::env::temp_dir().join(format!("nvrec-write-behind-{}", std::process::id()));
        let mut out = WriteBehind::new(File::create(&path).unwrap()).unwrap();
        let mut expected = Vec::new();
        for index in 0..3000u32 {
            let piece: Vec<u8> = (0..(index % 7919) as usize)
                .map(|i| (i as u32 ^ index) as u8)
                .collect();
            out.write_all(&piece).unwrap();
            expected.extend_from_slice(&piece);
        }
        out.flush().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            expected,
            "flush: all written"
        );
        out.write_all(b"tail").unwrap();
        out.finish().unwrap();
        expected.extend_from_slice(b"tail");
        assert_eq!(std::fs::read(&path).unwrap(), expected);

        // A file opened read-only: the thread's first write fails, and the writer says so.
        let read_only = File::open(&path).unwrap();
        let mut out = WriteBehind::new(read_only).unwrap();
        let result = (0..4 * WRITE_BEHIND_BUFFERS)
            .try_for_each(|_| out.write_all(&[0; WRITE_BEHIND_BUFFER_BYTES]))
            .and_then(|()| out.flush());
        assert!(result.is_err());
        std::fs::remove_file(&path).unwrap();
    }
}
