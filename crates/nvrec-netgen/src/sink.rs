//! The reference receiver of the UDP bench (`bench/net`, row `udp-cpu`): recvmmsg into
//! O_DIRECT writes and nothing else, so that what nvrec costs per GiB of UDP ingest can be
//! set against the least a program that keeps every datagram on a drive must pay.
//!
//! Datagrams are taken in batches into a staging area, their data copied back to back into
//! a write buffer (no headers, no timestamps, no addresses: what nvrec records beside the
//! data is its own cost), and each full buffer written with one synchronous `pwrite` at the
//! next offset of the target, opened with O_DIRECT (back at 0 after its last whole buffer,
//! as a ring: a bench runs for longer than its target holds). The kernel's drops for a full receive
//! buffer are read once at the end (SO_MEMINFO). Deliberately absent: checking, framing,
//! a second thread, io_uring.

use crate::send::set_option;
use std::fs::OpenOptions;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Messages per recvmmsg call.
const BATCH: usize = 64;
/// Room per message: the largest UDP payload.
const MESSAGE_BYTES: usize = 65536;
/// Bytes per write: a multiple of any logical block size.
const WRITE_BYTES: usize = 4 << 20;
/// O_DIRECT buffers are aligned to this.
const ALIGN_BYTES: usize = 4096;
/// How often a blocked receive looks at the clock.
const WAKE: Duration = Duration::from_millis(50);

#[derive(Debug, Clone)]
pub struct SinkOptions {
    pub bind: SocketAddr,
    /// The target written (a block device or a file), from offset 0.
    pub output: PathBuf,
    /// Stop when nothing arrived for this long after the first datagram.
    pub idle: Duration,
    pub receive_buffer_bytes: usize,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SinkReport {
    pub datagrams: u64,
    pub bytes: u64,
    /// Bytes written to the target (whole buffers; the last one padded).
    pub written_bytes: u64,
    /// Dropped by the kernel for a full receive buffer.
    pub dropped_socket: u64,
    /// From the first datagram to the last.
    pub elapsed_s: f64,
    pub rate_bits_per_s: f64,
}

/// An aligned buffer for O_DIRECT writes.
struct Aligned {
    bytes: Vec<u8>,
    start: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let bytes = vec![0u8; len + ALIGN_BYTES];
        let start = bytes.as_ptr().align_offset(ALIGN_BYTES);
        Aligned { bytes, start }
    }

    fn slice(&mut self) -> &mut [u8] {
        let start = self.start;
        &mut self.bytes[start..start + WRITE_BYTES]
    }
}

/// Receives until idle, writing what came; the report.
pub fn sink(options: &SinkOptions) -> io::Result<SinkReport> {
    let socket = UdpSocket::bind(options.bind)?;
    let room = options.receive_buffer_bytes.min(i32::MAX as usize) as libc::c_int;
    if set_option(
        socket.as_raw_fd(),
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        room,
    )
    .is_err()
    {
        set_option(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, room)?;
    }
    socket.set_read_timeout(Some(WAKE))?;
    let mut target = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&options.output)?;
    let size_bytes = std::io::Seek::seek(&mut target, std::io::SeekFrom::End(0))?;
    let ring_bytes = size_bytes / WRITE_BYTES as u64 * WRITE_BYTES as u64;
    if ring_bytes == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: smaller than one write of {WRITE_BYTES} bytes",
                options.output.display()
            ),
        ));
    }
    let mut staging = vec![0u8; BATCH * MESSAGE_BYTES];
    let mut buffer = Aligned::new(WRITE_BYTES);
    let mut filled = 0;
    let mut report = SinkReport::default();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        let lengths = receive(&socket, &mut staging)?;
        if lengths.is_empty() {
            if first.is_some_and(|_| last.elapsed() >= options.idle) {
                break;
            }
            continue;
        }
        last = Instant::now();
        first.get_or_insert(last);
        for (slot, &len) in lengths.iter().enumerate() {
            let data = &staging[slot * MESSAGE_BYTES..slot * MESSAGE_BYTES + len];
            let mut taken = 0;
            while taken < len {
                let part = (len - taken).min(WRITE_BYTES - filled);
                buffer.slice()[filled..filled + part].copy_from_slice(&data[taken..taken + part]);
                filled += part;
                taken += part;
                if filled == WRITE_BYTES {
                    target.write_all_at(buffer.slice(), report.written_bytes % ring_bytes)?;
                    report.written_bytes += WRITE_BYTES as u64;
                    filled = 0;
                }
            }
            report.datagrams += 1;
            report.bytes += len as u64;
        }
    }
    if filled > 0 {
        buffer.slice()[filled..].fill(0);
        target.write_all_at(buffer.slice(), report.written_bytes % ring_bytes)?;
        report.written_bytes += WRITE_BYTES as u64;
    }
    report.dropped_socket = socket_drops(&socket)?;
    report.elapsed_s = first.map_or(0.0, |first| (last - first).as_secs_f64());
    if report.elapsed_s > 0.0 {
        report.rate_bits_per_s = report.bytes as f64 * 8.0 / report.elapsed_s;
    }
    Ok(report)
}

/// One recvmmsg into the staging area: the length of each datagram taken (none after a
/// timeout).
fn receive(socket: &UdpSocket, staging: &mut [u8]) -> io::Result<Vec<usize>> {
    let base = staging.as_mut_ptr();
    let mut iovecs: [libc::iovec; BATCH] = std::array::from_fn(|slot| libc::iovec {
        // SAFETY: slot < BATCH, and the staging area holds BATCH messages.
        iov_base: unsafe { base.add(slot * MESSAGE_BYTES) }.cast(),
        iov_len: MESSAGE_BYTES,
    });
    // SAFETY: mmsghdr is plain data; the iovec pointers are set below.
    let mut headers: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    for (header, iovec) in headers.iter_mut().zip(iovecs.iter_mut()) {
        header.msg_hdr.msg_iov = iovec;
        header.msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: BATCH headers, each naming a part of `staging`, which outlives the call.
    let count = unsafe {
        libc::recvmmsg(
            socket.as_raw_fd(),
            headers.as_mut_ptr(),
            BATCH as u32,
            libc::MSG_WAITFORONE,
            std::ptr::null_mut(),
        )
    };
    if count < 0 {
        let error = io::Error::last_os_error();
        return match error.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted | io::ErrorKind::TimedOut => {
                Ok(Vec::new())
            }
            _ => Err(error),
        };
    }
    Ok(headers[..count as usize]
        .iter()
        .map(|header| header.msg_len as usize)
        .collect())
}

/// The socket's drop count (SO_MEMINFO, `SK_MEMINFO_DROPS`).
fn socket_drops(socket: &UdpSocket) -> io::Result<u64> {
    // linux/sock_diag.h: SK_MEMINFO_DROPS is the 9th of the u32 values.
    const SK_MEMINFO_DROPS: usize = 8;
    let mut values = [0u32; 16];
    let mut len = std::mem::size_of_val(&values) as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `values`, which holds them.
    let got = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            values.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if got != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(values[SK_MEMINFO_DROPS] as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams sent on a namespace's loopback land on the target back to back.
    #[test]
    fn datagrams_are_written_back_to_back() {
        if let Some(reason) = crate::TestNet::unavailable() {
            nvrec_testkit::skip(nvrec_testkit::NET_NAMESPACE, reason);
            return;
        }
        // SAFETY: unshare moves only this thread into a new network namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            nvrec_testkit::skip(nvrec_testkit::NET_NAMESPACE, "unshare(CLONE_NEWNET)");
            return;
        }
        let up = std::process::Command::new("ip")
            .args(["link", "set", "lo", "up"])
            .status();
        if !up.is_ok_and(|status| status.success()) {
            nvrec_testkit::skip(nvrec_testkit::NET_NAMESPACE, "ip link set lo up");
            return;
        }
        let dir = std::env::temp_dir().join(format!("nvrec-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let output = dir.join("sink.img");
        std::fs::write(&output, vec![0u8; 8 << 20]).unwrap();
        let bind: SocketAddr = "127.0.0.1:5901".parse().unwrap();
        let options = SinkOptions {
            bind,
            output: output.clone(),
            idle: Duration::from_millis(300),
            receive_buffer_bytes: 64 << 20,
        };
        let receiving = std::thread::spawn(move || sink(&options).unwrap());
        std::thread::sleep(Duration::from_millis(200));
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        for index in 0..3000u32 {
            sender.send_to(&[index as u8; 1000], bind).unwrap();
        }
        let report = receiving.join().unwrap();
        assert_eq!((report.datagrams, report.dropped_socket), (3000, 0));
        assert_eq!(report.bytes, 3_000_000);
        let written = std::fs::read(&output).unwrap();
        for index in 0..3000usize {
            assert!(written[index * 1000..(index + 1) * 1000]
                .iter()
                .all(|&b| b == index as u8));
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
