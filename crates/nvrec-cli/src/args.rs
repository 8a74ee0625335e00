//! Option types and value parsers the commands share: sizes, durations, rates, the I/O
//! engine, an address range, I/O settings, and what replay and export do at a hole.

use clap::{Args, ValueEnum};
use nvrec::engine::{EngineChoice, EngineKind};
use nvrec::stream::{self, FlushMode, RangeEnd, RangeSpec, StopTrigger, StopWhen, StreamConfig};
use nvrec::unit::{parse_duration, parse_rate_bytes_per_s, parse_size_bytes};
use std::time::Duration;

pub fn size_arg(text: &str) -> Result<u64, String> {
    parse_size_bytes(text).map_err(|error| error.to_string())
}

pub fn duration_arg(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|error| error.to_string())
}

pub fn rate_arg(text: &str) -> Result<f64, String> {
    parse_rate_bytes_per_s(text).map_err(|error| error.to_string())
}

/// What replay and export write where the stream has a hole (input lost while recording,
/// chunks missing or damaged).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GapsArg {
    /// Nothing: the stream as it was kept, the holes reported.
    Skip,
    /// Zeros of the hole's length, so that every byte sits at its original stream offset
    /// (sample-aligned data stays aligned); the holes are still reported. Into a file
    /// (--output) they are holes in it, which take no space.
    Zero,
}

impl GapsArg {
    pub fn gaps(self) -> nvrec_app::replay::Gaps {
        match self {
            GapsArg::Skip => nvrec_app::replay::Gaps::Skip,
            GapsArg::Zero => nvrec_app::replay::Gaps::Zero,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct RangeArgs {
    /// Address of the first chunk (multiple of the chunk size).
    #[arg(long, default_value = "0", value_parser = size_arg)]
    offset: u64,
    /// Address of the last chunk, inclusive (multiple of the chunk size).
    #[arg(long, value_parser = size_arg, group = "range_end")]
    last_offset: Option<u64>,
    /// Number of chunks.
    #[arg(long, group = "range_end")]
    chunks: Option<u64>,
    /// Bytes to transfer (a whole number of chunks). Default: up to the end of the target.
    #[arg(long, value_parser = size_arg, group = "range_end")]
    size: Option<u64>,
}

impl RangeArgs {
    pub fn spec(&self) -> RangeSpec {
        let end = match (self.last_offset, self.chunks, self.size) {
            (Some(last), _, _) => RangeEnd::LastOffset(last),
            (_, Some(count), _) => RangeEnd::ChunkCount(count),
            (_, _, Some(size)) => RangeEnd::SizeBytes(size),
            _ => RangeEnd::TargetEnd,
        };
        RangeSpec {
            first_offset_bytes: self.offset,
            end,
        }
    }

    /// Where the range ends, if that is known without looking at the target.
    pub fn end_bytes(&self, chunk_size_bytes: u64) -> Option<u64> {
        match self.spec().end {
            RangeEnd::LastOffset(last) => last.checked_add(chunk_size_bytes),
            RangeEnd::ChunkCount(count) => count
                .checked_mul(chunk_size_bytes)?
                .checked_add(self.offset),
            RangeEnd::SizeBytes(size) => size.checked_add(self.offset),
            RangeEnd::TargetEnd => None,
        }
    }
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineArg {
    /// io_uring when the kernel allows it, else threads.
    Auto,
    #[value(name = "io_uring", alias = "io-uring", alias = "uring")]
    IoUring,
    /// Worker threads with pread/pwrite.
    Threads,
}

impl EngineArg {
    pub fn choice(self) -> EngineChoice {
        match self {
            EngineArg::Auto => EngineChoice::Auto,
            EngineArg::IoUring => EngineChoice::Only(EngineKind::IoUring),
            EngineArg::Threads => EngineChoice::Only(EngineKind::Threads),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct IoArgs {
    /// Chunk size: the unit of addressing and checking (power of two, multiple of the
    /// target's logical block size).
    #[arg(long, default_value = "128K", value_parser = size_arg)]
    chunk_size: u64,
    /// Largest I/O: adjacent chunks are coalesced up to this size (a whole number of
    /// chunks; any other size is refused). Default: 1M, or one chunk where chunks are larger.
    #[arg(long, value_parser = size_arg)]
    io_size: Option<u64>,
    /// I/Os kept in flight.
    #[arg(long, default_value_t = stream::QUEUE_DEPTH_DEFAULT)]
    queue_depth: u32,
    /// I/O engine.
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
    /// Let a kernel thread poll the io_uring submission queue (costs a core).
    #[arg(long)]
    sqpoll: bool,
}

/// `--stop-after`, for the runs that may end at any chunk (`write`, `read`). `selftest` does
/// not take it: each of its tests checks a whole run.
#[derive(Args, Debug)]
pub struct StopArgs {
    /// Stop by itself after this long (as Ctrl-C would), e.g. 500ms, 10s, 2m.
    #[arg(long, value_parser = duration_arg)]
    stop_after: Option<Duration>,
}

impl StopArgs {
    /// The stop the run triggers itself, if one was asked for.
    pub fn trigger(&self) -> Option<StopTrigger> {
        self.stop_after.map(|duration| StopTrigger {
            when: StopWhen::After(duration),
            action: nvrec::control::ControlState::Stop,
        })
    }
}

impl IoArgs {
    pub fn config(&self, flush: FlushMode) -> StreamConfig {
        StreamConfig {
            chunk_size_bytes: self.chunk_size,
            io_size_bytes: self
                .io_size
                .unwrap_or_else(|| stream::io_size_bytes_default(self.chunk_size)),
            queue_depth: self.queue_depth,
            engine: self.engine.choice(),
            sqpoll: self.sqpoll,
            flush,
            trigger: None,
        }
    }
}
