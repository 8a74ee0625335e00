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
