//! Where read bytes go: nowhere (speed only), the pattern checker, or a file or stdout.
//!
//! Push model: the stream hands a [`Sink`] each chunk it read, in address order (it reorders
//! out-of-order completions first). A checking sink never stops the read on a mismatch: it
//! keeps the first one and counts the chunks that failed, as the streamer's checker does.

use crate::pattern::{Mismatch, Pattern};
use std::io::{self, Write};

pub trait Sink {
    /// Takes the bytes read at `offset_bytes`, one chunk at a time, in address order.
    fn consume(&mut self, offset_bytes: u64, chunk: &[u8]) -> io::Result<()>;
    /// Called once after the last chunk (flushes buffered output).
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// What checking found, if this sink checks.
    fn check_report(&self) -> Option<CheckReport> {
        None
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    pub seed: u64,
    pub checked_chunk_count: u64,
    pub bad_chunk_count: u64,
    pub first_mismatch: Option<Mismatch>,
}

/// Reads for speed alone.
pub struct DiscardSink;

impl Sink for DiscardSink {
    fn consume(&mut self, _offset_bytes: u64, _chunk: &[u8]) -> io::Result<()> {
        Ok(())
    }
}

/// Checks every chunk against the pattern.
pub struct CheckSink {
    pattern: Pattern,
    report: CheckReport,
}

impl CheckSink {
    pub fn new(pattern: Pattern) -> CheckSink {
        CheckSink {
            pattern,
            report: CheckReport {
                seed: pattern.seed(),
                ..CheckReport::default()
            },
        }
    }
}

impl Sink for CheckSink {
    fn consume(&mut self, offset_bytes: u64, chunk: &[u8]) -> io::Result<()> {
        self.report.checked_chunk_count += 1;
        if let Err(mismatch) = self.pattern.check(offset_bytes, chunk, chunk.len() as u64) {
            self.report.bad_chunk_count += 1;
            self.report.first_mismatch.get_or_insert(mismatch);
        }
        Ok(())
    }

    fn check_report(&self) -> Option<CheckReport> {
        Some(self.report)
    }
}

/// Copies what was read to a writer (a file, or stdout for `--output -`).
pub struct WriterSink<W: Write>(pub W);

impl<W: Write> Sink for WriterSink<W> {
    fn consume(&mut self, _offset_bytes: u64, chunk: &[u8]) -> io::Result<()> {
        self.0.write_all(chunk)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// What `replay --gaps zero` writes in place of the holes of a recorded stream: zeros from
/// where the last payload ended to where the next one begins, never past the stream's
/// length as the recording's entry gives it. A chunk's stream offset is data read back: a
/// damaged or forged one must not make a replay write terabytes of zeros.
#[derive(Debug, Clone, Copy)]
pub struct GapFill {
    stream_len_bytes: u64,
    /// The stream offset the next byte written stands for; `None` before the first payload
    /// (what comes before it is not filled).
    next_offset_bytes: Option<u64>,
}

/// The hole before one payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Hole {
    /// Zeros to write before the payload.
    pub zero_bytes: u64,
    /// Bytes of the hole past the stream's length: not filled, and an inconsistency between
    /// the chunk and the entry to report.
    pub beyond_end_bytes: u64,
}

impl GapFill {
    pub fn new(stream_len_bytes: u64) -> GapFill {
        GapFill {
            stream_len_bytes,
            next_offset_bytes: None,
        }
    }

    /// The hole before a payload of `payload_len_bytes` at `stream_offset_bytes`, which is
    /// then taken as written.
    pub fn before(&mut self, stream_offset_bytes: u64, payload_len_bytes: u64) -> Hole {
        let hole = match self.next_offset_bytes {
            None => Hole::default(),
            Some(next) => {
                let wanted = stream_offset_bytes.saturating_sub(next);
                let zero_bytes = wanted.min(self.stream_len_bytes.saturating_sub(next));
                Hole {
                    zero_bytes,
                    beyond_end_bytes: wanted - zero_bytes,
                }
            }
        };
        self.next_offset_bytes = Some(stream_offset_bytes.saturating_add(payload_len_bytes));
        hole
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_are_filled_up_to_the_stream_length_and_no_further() {
        let mut fill = GapFill::new(1000);
        assert_eq!(fill.before(0, 100), Hole::default());
        // A hole inside the stream: filled.
        assert_eq!(
            fill.before(300, 100),
            Hole {
                zero_bytes: 200,
                beyond_end_bytes: 0
            }
        );
        // A chunk that says it lies far past the stream's end: only up to the end.
        assert_eq!(
            fill.before(u64::MAX - 10, 100),
            Hole {
                zero_bytes: 600,
                beyond_end_bytes: u64::MAX - 10 - 400 - 600
            }
        );
        // After it, nothing more is filled (the next byte stands past the end).
        assert_eq!(
            fill.before(u64::MAX - 1, 1),
            Hole {
                zero_bytes: 0,
                beyond_end_bytes: 0
            }
        );
        // The first payload's offset is not a hole, however large.
        assert_eq!(GapFill::new(10).before(1 << 40, 5), Hole::default());
    }
}
