//! Where a replayed stream goes. A regular file takes a hole's zeros as a hole of its own
//! ([`SparseFile`]: its length moves on, nothing is written, reads give zeros), so that a
//! recording that lost most of a fast source replays with `--gaps zero` into the space of
//! what it kept; anything else (a pipe, the terminal, a device) is given the zeros.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

/// A replay's writer.
pub trait StreamOut: Write {
    /// Moves `len_bytes` of zeros on without writing them, when this output can; false
    /// when they must be written.
    fn skip_zeros(&mut self, _len_bytes: u64) -> std::io::Result<bool> {
        Ok(false)
    }
}

/// Any buffered writer: zeros are written.
impl<W: Write> StreamOut for BufWriter<W> {}

/// A regular file, written from its start (it was created empty), whose zeros are holes.
pub struct SparseFile {
    out: BufWriter<File>,
}

impl SparseFile {
    /// `file`: a regular file, empty (just created). A file of another kind is refused,
    /// given back, with the reason.
    pub fn new(file: File) -> Result<SparseFile, (File, std::io::Error)> {
        match file.metadata() {
            Ok(metadata) if metadata.is_file() => Ok(SparseFile {
                out: BufWriter::with_capacity(64 << 10, file),
            }),
            Ok(_) => Err((file, std::io::Error::other("not a regular file"))),
            Err(error) => Err((file, error)),
        }
    }
}

impl Write for SparseFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.out.write(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

impl StreamOut for SparseFile {
    /// The buffer out, then the file's length moved on past the zeros (a hole where the
    /// file system has them; zeros to every reader either way).
    fn skip_zeros(&mut self, len_bytes: u64) -> std::io::Result<bool> {
        self.out.flush()?;
        let file = self.out.get_mut();
        let end = file.stream_position()? + len_bytes;
        file.set_len(end)?;
        file.seek(SeekFrom::Start(end))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "nvrec-app-stream-out-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("out.bin")
    }

    #[test]
    fn zeros_skipped_in_a_file_read_back_as_zeros_at_every_offset_and_take_no_space() {
        let path = scratch("holes");
        let mut out = SparseFile::new(File::create(&path).unwrap())
            .map_err(|e| e.1)
            .unwrap();
        out.write_all(b"head").unwrap();
        assert!(out.skip_zeros(64 << 20).unwrap());
        out.write_all(b"middle").unwrap();
        assert!(out.skip_zeros(32 << 20).unwrap(), "a hole at the end too");
        out.flush().unwrap();
        drop(out);

        let metadata = std::fs::metadata(&path).unwrap();
        let len = 4 + (64 << 20) + 6 + (32 << 20);
        assert_eq!(
            metadata.len(),
            len,
            "the trailing hole counts in the length"
        );
        let data = std::fs::read(&path).unwrap();
        assert_eq!(&data[..4], b"head");
        assert!(data[4..4 + (64 << 20)].iter().all(|&b| b == 0));
        assert_eq!(&data[4 + (64 << 20)..10 + (64 << 20)], b"middle");
        assert!(data[10 + (64 << 20)..].iter().all(|&b| b == 0));
        // 96 MiB of zeros written would take 96 MiB; holes take (almost) none.
        assert!(
            metadata.blocks() * 512 < 8 << 20,
            "{} bytes allocated for {len} bytes of mostly holes",
            metadata.blocks() * 512
        );
        std::fs::remove_dir_all(path.parent().unwrap()).unwrap();
    }

    #[test]
    fn other_writers_are_given_their_zeros() {
        let mut out = BufWriter::new(Vec::new());
        assert!(!out.skip_zeros(10).unwrap());
        let (_, refused) = SparseFile::new(File::open("/dev/null").unwrap())
            .err()
            .expect("a device is not a regular file");
        assert!(refused.to_string().contains("not a regular file"));
    }
}
