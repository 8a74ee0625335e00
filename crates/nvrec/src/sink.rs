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
    /// Takes the consecutive chunks of `chunk_bytes` each that one I/O read at
    /// `offset_bytes` (`data` holds a whole number of them): by default one at a time.
    fn consume_chunks(
        &mut self,
        offset_bytes: u64,
        data: &[u8],
        chunk_bytes: usize,
    ) -> io::Result<()> {
        for (index, chunk) in data.chunks(chunk_bytes).enumerate() {
            self.consume(offset_bytes + (index * chunk_bytes) as u64, chunk)?;
        }
        Ok(())
    }
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

    /// An I/O's chunks in one write: a buffered writer passes a write as large as its
    /// buffer straight through, where chunk by chunk it copied each into its buffer first.
    fn consume_chunks(
        &mut self,
        _offset_bytes: u64,
        data: &[u8],
        _chunk_bytes: usize,
    ) -> io::Result<()> {
        self.0.write_all(data)
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

    /// Counts the writes it is given, and keeps their bytes.
    #[derive(Default)]
    struct Writes {
        count: usize,
        bytes: Vec<u8>,
    }

    impl Write for Writes {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            self.count += 1;
            self.bytes.extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn an_ios_chunks_reach_a_writer_in_one_write_and_a_checker_one_by_one() {
        let data: Vec<u8> = (0..8 * 512).map(|i| (i % 251) as u8).collect();
        let mut sink = WriterSink(Writes::default());
        sink.consume_chunks(4096, &data, 512).unwrap();
        assert_eq!((sink.0.count, &sink.0.bytes), (1, &data));
        let pattern = Pattern::new(7);
        let mut good = vec![0u8; 4 * 512];
        pattern.fill(1 << 20, &mut good);
        let mut checker = CheckSink::new(pattern);
        checker.consume_chunks(1 << 20, &good, 512).unwrap();
        good[512 * 2 + 3] ^= 1;
        checker.consume_chunks(1 << 20, &good, 512).unwrap();
        let report = checker.check_report().unwrap();
        assert_eq!((report.checked_chunk_count, report.bad_chunk_count), (8, 1));
    }

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
