//! Where written bytes come from.
//!
//! Pull model, like `std::io::Read`: the stream asks a [`Source`] for the bytes that belong at a
//! target offset, chunk by chunk and in address order. A source may return fewer bytes than
//! asked (call again for the rest); zero means the stream has ended. A signal that interrupts
//! a blocking read surfaces as `ErrorKind::Interrupted`, so the stream can look at its stop
//! and abort flags before asking again. Sources never allocate per call.

use crate::control::{Control, ControlState};
use crate::pattern::Pattern;
use std::fs::File;
use std::io::{self, Read};
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

/// What the user chose with `--source`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceSpec {
    Pattern {
        seed: u64,
    },
    Zero,
    Stdin,
    Path(std::path::PathBuf),
    /// UDP datagrams received on these local addresses, one stream each (records).
    Udp(Vec<std::net::SocketAddr>),
    /// Frames captured on these network interfaces, one stream each (records).
    Capture(Vec<String>),
    /// TCP connections accepted on these local addresses, one stream each (records).
    Tcp(Vec<std::net::SocketAddr>),
}

impl SourceSpec {
    pub fn describe(&self) -> String {
        match self {
            SourceSpec::Pattern { seed } => format!("pattern (seed {seed:#x})"),
            SourceSpec::Zero => "zero".to_string(),
            SourceSpec::Stdin => "stdin".to_string(),
            SourceSpec::Path(path) => path.display().to_string(),
            SourceSpec::Udp(addresses) => addresses
                .iter()
                .map(|address| format!("udp://{address}"))
                .collect::<Vec<_>>()
                .join(", "),
            SourceSpec::Tcp(addresses) => addresses
                .iter()
                .map(|address| format!("tcp://{address}"))
                .collect::<Vec<_>>()
                .join(", "),
            SourceSpec::Capture(names) => names
                .iter()
                .map(|name| format!("capture:{name}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Whether the source can run out before the range is full.
    pub fn is_finite(&self) -> bool {
        matches!(self, SourceSpec::Stdin | SourceSpec::Path(_))
    }

    /// Whether the source gives records (datagrams, packets) rather than bytes.
    pub fn is_records(&self) -> bool {
        matches!(
            self,
            SourceSpec::Udp(_) | SourceSpec::Tcp(_) | SourceSpec::Capture(_)
        )
    }
}

pub trait Source {
    /// Puts the bytes that belong at `offset_bytes` into `buf`; returns how many (0 = ended).
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// Whether every read gives the same bytes whatever the offset, and never ends (zeros):
    /// a buffer it filled once holds what it would fill again, so callers may skip the
    /// refill, as fio reuses its buffers.
    fn is_constant(&self) -> bool {
        false
    }
    /// Whether a read may wait for someone else (a pipe, a file being written): a caller
    /// must hand over what it has queued before reading. Generators never wait.
    fn may_block(&self) -> bool {
        true
    }
    /// Waits until a read would return something (data or the end), at most `timeout`;
    /// false if the time ran out. Sources that never wait are always readable.
    fn wait_readable(&mut self, _timeout: Duration) -> io::Result<bool> {
        Ok(true)
    }
    /// Whether the source gives records (datagrams, packets; `layout::records`) rather than
    /// bytes. A packet that does not fit in the room left spans into the next payload (its
    /// first fragment fills `buf`, and the next read starts with the rest), so for such a
    /// source `read_at` returning 0 means that `buf` is as full as records make it, not the
    /// end: that is [`Source::ended`].
    fn packs_records(&self) -> bool {
        false
    }
    /// A record source: whether it has ended (its input closed, or it was stopped).
    fn ended(&self) -> bool {
        false
    }
    /// A record source: the most one payload holds (sources that stage records in buffers
    /// of their own size them by it).
    fn set_payload_capacity(&mut self, _bytes: usize) {}
}

/// The seekable test pattern.
pub struct PatternSource(pub Pattern);

impl Source for PatternSource {
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        // The buffer goes to a device next: streaming stores where the CPU allows.
        self.0.fill_for_device(offset_bytes, buf);
        Ok(buf.len())
    }

    fn may_block(&self) -> bool {
        false
    }
}

/// Zeros, for clearing a range.
pub struct ZeroSource;

impl Source for ZeroSource {
    fn read_at(&mut self, _offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        buf.fill(0);
        Ok(buf.len())
    }

    fn may_block(&self) -> bool {
        false
    }

    fn is_constant(&self) -> bool {
        true
    }
}

/// The pipe buffer a stream source asks for.
const PIPE_BYTES_WANTED: libc::c_int = 1 << 20;

/// A byte stream: standard input or a file, read in order (the offset is not used).
pub struct StreamSource {
    file: ManuallyDrop<File>,
    owned: bool,
}

impl StreamSource {
    /// Standard input, read directly (no intermediate buffer) and left open afterwards.
    pub fn stdin() -> StreamSource {
        // SAFETY: descriptor 0 stays open for the life of the process; ManuallyDrop keeps us
        // from closing it.
        let source = StreamSource {
            file: ManuallyDrop::new(unsafe { File::from_raw_fd(0) }),
            owned: false,
        };
        source.widen_pipe();
        source
    }

    /// A pipe's buffer is 64 KiB by default: a chunk's payload then takes two or more reads
    /// (and as many wake-ups of the writer). Ask for 1 MiB, the unprivileged limit; on
    /// anything but a pipe, or if refused, nothing changes.
    fn widen_pipe(&self) {
        // SAFETY: F_SETPIPE_SZ on a descriptor this source holds; it fails harmlessly with
        // EBADF/EINVAL where it does not apply.
        unsafe { libc::fcntl(self.file.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_BYTES_WANTED) };
    }

    pub fn file(file: File) -> StreamSource {
        let source = StreamSource {
            file: ManuallyDrop::new(file),
            owned: true,
        };
        source.widen_pipe();
        source
    }
}

impl Drop for StreamSource {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: dropped exactly once, here; we own this descriptor.
            unsafe { ManuallyDrop::drop(&mut self.file) };
        }
    }
}

impl Source for StreamSource {
    fn read_at(&mut self, _offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf)
    }

    fn wait_readable(&mut self, timeout: Duration) -> io::Result<bool> {
        // A regular file is always readable; a pipe, socket or terminal may be quiet.
        let mut poll_fd = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let timeout_ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd, for a descriptor this source holds open.
        let ready = unsafe { libc::poll(&mut poll_fd, 1, timeout_ms) };
        if ready < 0 {
            return Err(io::Error::last_os_error());
        }
        // POLLHUP or POLLERR count as readable: the read that follows reports them.
        Ok(ready > 0)
    }
}

/// Fills one chunk from the source: loops over short reads, returns fewer bytes only at the
/// end of the source or when a stop or abort interrupts a blocking read.
pub(crate) fn fill_from_source(
    source: &mut dyn Source,
    offset_bytes: u64,
    buf: &mut [u8],
    control: &Control,
) -> io::Result<usize> {
    fill_until_quiet(source, offset_bytes, buf, control, None).map(|filled| filled.bytes)
}

/// What `fill_until_quiet` put into a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Filled {
    pub bytes: usize,
    /// The source had nothing for `quiet_after` (and has not ended): `bytes` is what came.
    pub quiet: bool,
    /// A record source's next record does not fit in the rest of the buffer: `bytes` is
    /// as full as whole records make it, and the source goes on.
    pub packed: bool,
}

/// Fills `buf` from the source until it is full or the source ends; with `quiet_after`, also
/// stops when the source has had nothing to give for that long, so that what arrived before
/// a pause does not wait in memory for the next byte.
pub(crate) fn fill_until_quiet(
    source: &mut dyn Source,
    offset_bytes: u64,
    buf: &mut [u8],
    control: &Control,
    quiet_after: Option<Duration>,
) -> io::Result<Filled> {
    let mut filled = 0;
    while filled < buf.len() {
        if let Some(quiet_after) = quiet_after {
            match source.wait_readable(quiet_after) {
                Ok(true) => {}
                Ok(false) => {
                    return Ok(Filled {
                        bytes: filled,
                        quiet: true,
                        packed: false,
                    })
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {
                    if control.state() != ControlState::Run {
                        break;
                    }
                    continue;
                }
                Err(error) => return Err(error),
            }
        }
        match source.read_at(offset_bytes + filled as u64, &mut buf[filled..]) {
            Ok(0) if source.packs_records() && !source.ended() => {
                return Ok(Filled {
                    bytes: filled,
                    quiet: false,
                    packed: true,
                })
            }
            Ok(0) => break,
            Ok(count) => filled += count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {
                if control.state() != ControlState::Run {
                    break;
                }
            }
            Err(error) => return Err(error),
        }
    }
    Ok(Filled {
        bytes: filled,
        quiet: false,
        packed: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::Control;
    use crate::source::{fill_until_quiet, Filled};
    use std::io::Write;
    use std::os::fd::OwnedFd;

    #[test]
    fn a_quiet_pipe_gives_what_came_and_its_end_is_told_apart() {
        let (reader, mut writer) = std::io::pipe().unwrap();
        let mut source = StreamSource::file(File::from(OwnedFd::from(reader)));
        let control = Control::new();
        let quiet = Some(Duration::from_millis(50));
        let mut buf = vec![0u8; 4096];
        writer.write_all(&[7u8; 1000]).unwrap();
        let filled = fill_until_quiet(&mut source, 0, &mut buf, &control, quiet).unwrap();
        assert_eq!(
            filled,
            Filled {
                bytes: 1000,
                quiet: true,
                packed: false
            }
        );
        assert!(buf[..1000].iter().all(|&b| b == 7));
        // Nothing at all: quiet, with nothing.
        let filled = fill_until_quiet(&mut source, 1000, &mut buf, &control, quiet).unwrap();
        assert_eq!(
            filled,
            Filled {
                bytes: 0,
                quiet: true,
                packed: false
            }
        );
        // The writer goes away: the end, not a pause.
        writer.write_all(&[9u8; 10]).unwrap();
        drop(writer);
        let filled = fill_until_quiet(&mut source, 1000, &mut buf, &control, quiet).unwrap();
        assert_eq!(
            filled,
            Filled {
                bytes: 10,
                quiet: false,
                packed: false
            }
        );
        // Without a quiet limit a full buffer is waited for (here the end comes first).
        let filled = fill_until_quiet(&mut source, 1010, &mut buf, &control, None).unwrap();
        assert_eq!(
            filled,
            Filled {
                bytes: 0,
                quiet: false,
                packed: false
            }
        );
    }

    #[test]
    fn generators_are_always_readable() {
        assert!(ZeroSource.wait_readable(Duration::ZERO).unwrap());
    }
}
