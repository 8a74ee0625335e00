//! Frames sent back onto an interface: `nvrec replay --to iface:IFACE` of a capture.
//!
//! An AF_PACKET raw socket bound to the interface; frames are queued and handed to the
//! kernel [`BATCH`] at a time with sendmmsg (one system call per batch), whole as recorded
//! (the Ethernet header included). A frame longer than the interface takes (a GSO packet
//! captured whole on a virtual interface, larger than its MTU) is refused by the kernel
//! (EMSGSIZE): it is counted as too large, and the others go on. A full transmit queue
//! (ENOBUFS) is waited out.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

/// Frames per sendmmsg call, at most.
pub const BATCH: usize = 64;

/// What a [`FrameSender`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct InjectReport {
    pub frames: u64,
    pub bytes: u64,
    /// Longer than the interface sends (EMSGSIZE): not sent.
    pub too_large: u64,
}

pub struct FrameSender {
    socket: OwnedFd,
    queued: Vec<u8>,
    /// (start, len) of each queued frame in `queued`.
    frames: Vec<(usize, usize)>,
    report: InjectReport,
}

impl FrameSender {
    /// Opens a raw socket on `interface` (root or CAP_NET_RAW).
    pub fn open(interface: &str) -> io::Result<FrameSender> {
        let named =
            |error: io::Error| io::Error::new(error.kind(), format!("iface:{interface}: {error}"));
        // Bound for protocol 0: the socket only sends, it receives nothing.
        let (socket, ifindex) = super::packet_socket(interface, named)?;
        super::bind_packet_socket(&socket, ifindex, 0).map_err(named)?;
        Ok(FrameSender {
            socket,
            queued: Vec::with_capacity(BATCH * 2048),
            frames: Vec::with_capacity(BATCH),
            report: InjectReport::default(),
        })
    }

    /// Queues a frame; sends the queue when it holds `BATCH` frames.
    pub fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.frames.push((self.queued.len(), frame.len()));
        self.queued.extend_from_slice(frame);
        if self.frames.len() == BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Sends what is queued.
    pub fn flush(&mut self) -> io::Result<()> {
        let mut iovecs: Vec<libc::iovec> = self
            .frames
            .iter()
            .map(|&(start, len)| libc::iovec {
                iov_base: self.queued[start..].as_ptr().cast_mut().cast(),
                iov_len: len,
            })
            .collect();
        let mut headers: Vec<libc::mmsghdr> = iovecs
            .iter_mut()
            .map(|iovec| {
                // SAFETY: mmsghdr is plain data; the iovec pointer is set below.
                let mut header: libc::mmsghdr = unsafe { std::mem::zeroed() };
                header.msg_hdr.msg_iov = iovec;
                header.msg_hdr.msg_iovlen = 1;
                header
            })
            .collect();
        let mut done = 0;
        while done < headers.len() {
            // SAFETY: the headers name iovecs and frames of ours that outlive the call.
            let sent = unsafe {
                libc::sendmmsg(
                    self.socket.as_raw_fd(),
                    headers[done..].as_mut_ptr(),
                    (headers.len() - done) as u32,
                    0,
                )
            };
            if sent < 0 {
                let error = io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) => {
                        std::thread::sleep(Duration::from_micros(50))
                    }
                    Some(libc::EINTR) => {}
                    // The frame at `done` is longer than the interface takes: skip it.
                    Some(libc::EMSGSIZE) => {
                        self.report.too_large += 1;
                        done += 1;
                    }
                    _ => return Err(error),
                }
                continue;
            }
            for &(_, len) in &self.frames[done..done + sent as usize] {
                self.report.frames += 1;
                self.report.bytes += len as u64;
            }
            done += sent as usize;
        }
        self.frames.clear();
        self.queued.clear();
        Ok(())
    }

    pub fn report(&self) -> InjectReport {
        self.report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames sent on the namespace's loopback are there, byte for byte, for a capture on
    /// it; one longer than the loopback takes is counted, not sent.
    #[test]
    fn frames_sent_on_an_interface_are_on_the_wire() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        use crate::layout::{records, Record};
        use crate::source::Source;
        let options = crate::net::CaptureOptions {
            block_count: 8,
            ..crate::net::CaptureOptions::default()
        };
        let mut capture =
            crate::net::CaptureSource::open_with(&["lo".to_string()], &options).unwrap();
        capture.set_payload_capacity(1 << 20);
        let mut sender = FrameSender::open("lo").unwrap();
        let frames: Vec<Vec<u8>> = (0..100u8)
            .map(|index| udp_frame(9, &[index; 200]))
            .collect();
        for frame in &frames {
            sender.send(frame).unwrap();
        }
        sender.send(&vec![0u8; 70_000]).unwrap();
        sender.flush().unwrap();
        let report = sender.report();
        assert_eq!((report.frames, report.too_large), (100, 1));
        assert_eq!(report.bytes, 100 * frames[0].len() as u64);
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 1 << 20];
        while capture.wait_readable(Duration::from_millis(300)).unwrap() {
            let Ok(filled) = capture.read_at(0, &mut buf) else {
                continue;
            };
            for record in records(&buf[..filled]) {
                if let Record::Packet(packet) = record.unwrap().record {
                    seen.push(packet.data.to_vec());
                }
            }
        }
        seen.dedup();
        assert_eq!(seen, frames);
    }

    /// An Ethernet frame (zero MACs, as the loopback has) holding a UDP datagram from
    /// 127.0.0.1 to 127.0.0.1:`port`, without a UDP checksum (0: none, allowed in IPv4).
    fn udp_frame(port: u16, payload: &[u8]) -> Vec<u8> {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&0x0800u16.to_be_bytes());
        let total = 20 + 8 + payload.len();
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
        ];
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        let sum = ip
            .chunks(2)
            .map(|pair| u32::from(u16::from_be_bytes([pair[0], pair[1]])))
            .sum::<u32>();
        let sum = (sum & 0xffff) + (sum >> 16);
        let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&9u16.to_be_bytes());
        frame.extend_from_slice(&port.to_be_bytes());
        frame.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(payload);
        frame
    }
}
