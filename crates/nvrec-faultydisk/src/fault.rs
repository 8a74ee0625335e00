//! Faults as values, and the text protocol of the control file that names them.
//!
//! A [`Fault`] is a condition the disk keeps until it is cleared: failing the requests that
//! touch a byte range, failing flushes (FSYNC), dying (every write and flush failing at
//! once), stalling every request, or limiting throughput. A [`Command`] is one
//! line of the control file: a fault to add, or an action (resume, power cut, clear).
//! Parsing and printing are pure; applying a command is `control`'s job, and the Rust API
//! builds the same values, so the file and the API cannot drift apart.
//!
//! Sizes follow dd's conventions, as nvrec's own options do: `K`, `M`, `G`, `T` (and `KiB`
//! ...) are powers of 1024, `KB`, `MB`, `GB`, `TB` powers of 1000, `0x...` is hexadecimal.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;
use std::time::Duration;

use crate::Error;

/// Which requests a failure applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Reads only.
    Read,
    /// Writes (and discards, which change data) only.
    Write,
    /// Reads and writes.
    Any,
}

impl Op {
    /// Whether a failure for `self` applies to a request of kind `access` (`Read` or `Write`).
    pub fn covers(self, access: Op) -> bool {
        self == Op::Any || self == access
    }

    fn word(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Write => "write",
            Op::Any => "any",
        }
    }
}

/// The error a failed request returns to the kernel, and so, through the loop device, to the
/// program doing the I/O.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Errno {
    /// `EIO`: the device failed (the default).
    #[default]
    Eio,
    /// `ENOSPC`: no space left.
    Enospc,
}

impl Errno {
    /// The raw errno value.
    pub fn code(self) -> i32 {
        match self {
            Errno::Eio => libc::EIO,
            Errno::Enospc => libc::ENOSPC,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Errno::Eio => "eio",
            Errno::Enospc => "enospc",
        }
    }
}

/// A condition the disk keeps until it is cleared (or, for a stall, resumed or timed out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Requests of kind `op` whose byte range intersects `range` fail with `errno`. Several
    /// can be active; the first added that matches decides the errno.
    Fail {
        /// Which requests fail.
        op: Op,
        /// The bytes whose touching fails a request.
        range: Range<u64>,
        /// What they fail with.
        errno: Errno,
    },
    /// Every request (read, write, discard, fsync) blocks until resumed, or for `duration`
    /// from when the stall starts.
    Stall {
        /// How long; `None` is until resumed.
        duration: Option<Duration>,
    },
    /// Reads and writes together move at most `rate_bytes_per_s`: each request waits for its
    /// turn on one timeline and then for its size over the rate.
    Slow {
        /// The limit, at least 1.
        rate_bytes_per_s: u64,
    },
    /// Flushes (FSYNC, which is what the loop device sends for a block-layer flush: `fsync`
    /// or `fdatasync` of the device, an O_DSYNC or FUA write) fail with EIO once `after`
    /// more have succeeded; `after: 0` fails the next one. A failed flush commits nothing
    /// (with tracking, its unflushed writes stay unflushed). Reads and writes are not
    /// touched. A new rule replaces the one before. (Only EIO: the loop device answers EIO
    /// for whatever error its backing file's fsync returns.)
    FailFlush {
        /// Flushes still let through before every later one fails.
        after: u64,
    },
    /// A dying drive: every write and discard fails with EIO, and so does every flush;
    /// reads keep working unless `fail_reads`. Decided before the failing ranges (a dying
    /// disk answers EIO whatever range matches). A new one replaces the one before.
    Dying {
        /// Reads fail with EIO too.
        fail_reads: bool,
    },
}

impl fmt::Display for Fault {
    /// Prints the fault as the control line that makes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Fail { op, range, errno } => write!(
                f,
                "fail {} {} {} {}",
                op.word(),
                range.start,
                range.end - range.start,
                errno.word()
            ),
            Fault::Stall { duration: None } => write!(f, "stall"),
            Fault::Stall {
                duration: Some(duration),
            } => write!(f, "stall {}ms", duration.as_millis()),
            Fault::Slow { rate_bytes_per_s } => write!(f, "slow {rate_bytes_per_s}"),
            Fault::FailFlush { after: 0 } => write!(f, "fail flush"),
            Fault::FailFlush { after } => write!(f, "fail flush after={after}"),
            Fault::Dying { fail_reads: false } => write!(f, "dying"),
            Fault::Dying { fail_reads: true } => write!(f, "dying reads=eio"),
        }
    }
}

/// One line of the control file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Add a fault (`fail ...`, `fail flush [after=N]`, `dying [reads=eio]`, `stall
    /// [DURATION]`, `slow RATE`). A stall, a rate, a flush rule or dying replaces the one
    /// before; failing ranges add up.
    Inject(Fault),
    /// End a stall: every request it holds goes on (`resume`).
    Resume,
    /// Drop every write not yet flushed, or with a seed keep a seeded subset of its sectors
    /// (`power-cut`, `power-cut seed=7`).
    PowerCut {
        /// Tear instead of dropping: the seed of the sectors kept.
        seed: Option<u64>,
    },
    /// Remove every fault and release stalled requests (`clear`).
    Clear,
}

impl FromStr for Command {
    type Err = Error;

    fn from_str(line: &str) -> Result<Command, Error> {
        let words: Vec<&str> = line.split_whitespace().collect();
        parse_words(&words).map_err(|reason| Error::Command {
            line: line.trim().to_string(),
            reason,
        })
    }
}

/// Parses every line of a control-file write. Blank lines and lines starting with `#` are
/// skipped; one bad line rejects them all, so that a write is applied whole or not at all.
pub fn parse_commands(text: &str) -> Result<Vec<Command>, Error> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::parse)
        .collect()
}

fn parse_words(words: &[&str]) -> Result<Command, String> {
    match words {
        ["fail", "flush", rest @ ..] => parse_fail_flush(rest).map(Command::Inject),
        ["fail", rest @ ..] => parse_fail(rest).map(Command::Inject),
        ["dying", rest @ ..] => parse_dying(rest).map(Command::Inject),
        ["stall"] => Ok(Command::Inject(Fault::Stall { duration: None })),
        ["stall", duration] => Ok(Command::Inject(Fault::Stall {
            duration: Some(parse_duration(duration)?),
        })),
        ["slow", rate] => parse_rate(rate).map(Command::Inject),
        ["resume"] => Ok(Command::Resume),
        ["clear"] => Ok(Command::Clear),
        ["power-cut"] => Ok(Command::PowerCut { seed: None }),
        ["power-cut", seed] => parse_seed(seed),
        _ => Err(
            "expected fail read|write|any START LEN [eio|enospc], fail flush [after=N], \
             dying [reads=eio|reads=ok], stall [DURATION], slow RATE, resume, \
             power-cut [seed=N] or clear"
                .to_string(),
        ),
    }
}

fn parse_fail(words: &[&str]) -> Result<Fault, String> {
    let (op, start, len, errno) = match words {
        [op, start, len] => (op, start, len, None),
        [op, start, len, errno] => (op, start, len, Some(errno)),
        _ => {
            return Err(
                "expected fail read|write|any START LEN [eio|enospc] or fail flush [after=N]"
                    .to_string(),
            )
        }
    };
    let op = match *op {
        "read" => Op::Read,
        "write" => Op::Write,
        "any" => Op::Any,
        other => return Err(format!("'{other}' is not read, write or any")),
    };
    let start = parse_size(start)?;
    let len = parse_size(len)?;
    if len == 0 {
        return Err("an empty range fails nothing".to_string());
    }
    let end = start
        .checked_add(len)
        .ok_or_else(|| "START + LEN overflows".to_string())?;
    let errno = match errno.copied() {
        None | Some("eio") | Some("EIO") => Errno::Eio,
        Some("enospc") | Some("ENOSPC") => Errno::Enospc,
        Some(other) => return Err(format!("'{other}' is not eio or enospc")),
    };
    Ok(Fault::Fail {
        op,
        range: start..end,
        errno,
    })
}

/// `fail flush [after=N] [eio]`: the words after `fail flush`.
fn parse_fail_flush(words: &[&str]) -> Result<Fault, String> {
    let mut after = None;
    let mut errno_seen = false;
    for word in words {
        if let Some(value) = word.strip_prefix("after=") {
            if after.is_some() {
                return Err("after=N given twice".to_string());
            }
            let n = value
                .parse()
                .map_err(|_| format!("'{value}' is not a count of flushes"))?;
            after = Some(n);
        } else if matches!(*word, "eio" | "EIO") && !errno_seen {
            errno_seen = true;
        } else if matches!(*word, "enospc" | "ENOSPC") {
            return Err(
                "a flush fails with EIO only: the loop device answers EIO for any \
                        error of its backing file's fsync"
                    .to_string(),
            );
        } else {
            return Err(format!(
                "'{word}' is not after=N or eio (expected fail flush [after=N] [eio])"
            ));
        }
    }
    Ok(Fault::FailFlush {
        after: after.unwrap_or(0),
    })
}

/// `dying [reads=eio|reads=ok]`: the words after `dying`.
fn parse_dying(words: &[&str]) -> Result<Fault, String> {
    let fail_reads = match words {
        [] | ["reads=ok"] => false,
        ["reads=eio"] | ["reads=EIO"] => true,
        _ => return Err("expected dying [reads=eio|reads=ok]".to_string()),
    };
    Ok(Fault::Dying { fail_reads })
}

fn parse_rate(text: &str) -> Result<Fault, String> {
    let rate_bytes_per_s = parse_size(text.trim_end_matches("/s"))?;
    if rate_bytes_per_s == 0 {
        return Err("a rate of 0 would stall forever; use stall".to_string());
    }
    Ok(Fault::Slow { rate_bytes_per_s })
}

fn parse_seed(text: &str) -> Result<Command, String> {
    let value = text
        .strip_prefix("seed=")
        .ok_or_else(|| format!("'{text}' is not seed=N"))?;
    let seed = value
        .parse()
        .map_err(|_| format!("'{value}' is not a 64-bit seed"))?;
    Ok(Command::PowerCut { seed: Some(seed) })
}

/// Parses a byte count: `65536`, `64K`, `1M`, `10MB`, `0x10000`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    if let Some(hex) = text.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).map_err(|_| format!("'{text}' is not a size"));
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let multiplier: u64 = match suffix {
        "" | "B" => 1,
        "K" | "k" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return Err(format!("'{text}' has an unknown size suffix")),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(|| format!("'{text}' is not a size"))
}

/// Parses a duration with a unit: `3000ms`, `3s`, `500us`, `2m`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration"))?;
    match unit {
        "us" => Ok(Duration::from_micros(n)),
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n.saturating_mul(60))),
        _ => Err(format!("'{text}' needs a unit: us, ms, s or m")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Command {
        line.parse().unwrap()
    }

    #[test]
    fn every_command_parses() {
        let cases = [
            (
                "fail write 1048576 65536 eio",
                Command::Inject(Fault::Fail {
                    op: Op::Write,
                    range: 1048576..1114112,
                    errno: Errno::Eio,
                }),
            ),
            (
                "fail read 1M 64K",
                Command::Inject(Fault::Fail {
                    op: Op::Read,
                    range: 1 << 20..(1 << 20) + (64 << 10),
                    errno: Errno::Eio,
                }),
            ),
            (
                "fail any 0x1000 4K enospc",
                Command::Inject(Fault::Fail {
                    op: Op::Any,
                    range: 4096..8192,
                    errno: Errno::Enospc,
                }),
            ),
            ("stall", Command::Inject(Fault::Stall { duration: None })),
            (
                "  stall 3000ms ",
                Command::Inject(Fault::Stall {
                    duration: Some(Duration::from_secs(3)),
                }),
            ),
            (
                "slow 10M",
                Command::Inject(Fault::Slow {
                    rate_bytes_per_s: 10 << 20,
                }),
            ),
            (
                "slow 5MB/s",
                Command::Inject(Fault::Slow {
                    rate_bytes_per_s: 5_000_000,
                }),
            ),
            ("fail flush", Command::Inject(Fault::FailFlush { after: 0 })),
            (
                "fail flush eio",
                Command::Inject(Fault::FailFlush { after: 0 }),
            ),
            (
                "fail flush after=3",
                Command::Inject(Fault::FailFlush { after: 3 }),
            ),
            (
                "fail flush after=3 EIO",
                Command::Inject(Fault::FailFlush { after: 3 }),
            ),
            (
                "fail flush eio after=0",
                Command::Inject(Fault::FailFlush { after: 0 }),
            ),
            ("dying", Command::Inject(Fault::Dying { fail_reads: false })),
            (
                "dying reads=ok",
                Command::Inject(Fault::Dying { fail_reads: false }),
            ),
            (
                "dying reads=eio",
                Command::Inject(Fault::Dying { fail_reads: true }),
            ),
            ("resume", Command::Resume),
            ("clear", Command::Clear),
            ("power-cut", Command::PowerCut { seed: None }),
            ("power-cut seed=7", Command::PowerCut { seed: Some(7) }),
        ];
        for (line, want) in cases {
            assert_eq!(parse(line), want, "{line}");
        }
    }

    #[test]
    fn bad_lines_are_rejected_with_a_reason() {
        let cases = [
            "",
            "explode",
            "fail",
            "fail write 0",
            "fail sideways 0 4K",
            "fail write 0 0",
            "fail write 0 4K eperm",
            "fail write 18446744073709551615 2",
            "stall 3",
            "stall soon",
            "slow 0",
            "slow fast",
            "power-cut 7",
            "power-cut seed=x",
            "resume now",
            "fail flush 0 4K",
            "fail flush after=",
            "fail flush after=-1",
            "fail flush after=x",
            "fail flush after=1 after=2",
            "fail flush enospc",
            "fail flush eio eio",
            "dying now",
            "dying reads",
            "dying reads=enospc",
            "dying reads=eio reads=ok",
        ];
        for line in cases {
            let err = line.parse::<Command>().unwrap_err();
            assert!(matches!(err, Error::Command { .. }), "{line}: {err}");
        }
    }

    #[test]
    fn a_write_is_applied_whole_or_not_at_all() {
        let text = "# comment\nstall 1s\n\nclear\n";
        assert_eq!(parse_commands(text).unwrap().len(), 2);
        assert!(parse_commands("stall\nbogus\n").is_err());
    }

    #[test]
    fn faults_print_as_the_lines_that_make_them() {
        for line in [
            "fail write 1048576 65536 eio",
            "fail any 0 4096 enospc",
            "stall",
            "stall 3000ms",
            "slow 10485760",
            "fail flush",
            "fail flush after=2",
            "dying",
            "dying reads=eio",
        ] {
            let Command::Inject(fault) = parse(line) else {
                panic!("{line} is not a fault");
            };
            assert_eq!(fault.to_string(), line);
        }
    }

    #[test]
    fn sizes_follow_dd() {
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4KB"), Ok(4000));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("0x20000"), Ok(0x20000));
        assert!(parse_size("4X").is_err());
        assert!(parse_size("99999999999T").is_err());
    }
}
