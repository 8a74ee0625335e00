//! A moment of a recording as `--from` and `--to` take it: an offset from the recording's
//! start (`500ms`, `2m`) or a time in UTC (RFC 3339: `2026-11-27T08:00:00Z`, fractions of
//! a second allowed). Either becomes nanoseconds since the Unix epoch, the unit of chunk
//! timestamps, once the recording is known; the reader then finds the window by search.

use crate::outcome::UsageError;
use std::time::{Duration, UNIX_EPOCH};

/// `--from` or `--to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    /// This long after the recording's start.
    After(Duration),
    /// This time, in nanoseconds since the Unix epoch.
    At { unix_ns: u64 },
}

impl TimeArg {
    /// Nanoseconds since the Unix epoch, for a recording that started at `start_ns`.
    pub fn unix_ns(self, start_ns: u64) -> u64 {
        match self {
            TimeArg::After(offset) => start_ns.saturating_add(offset.as_nanos() as u64),
            TimeArg::At { unix_ns } => unix_ns,
        }
    }
}

impl std::fmt::Display for TimeArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TimeArg::After(offset) => write!(f, "{}s", offset.as_secs_f64()),
            TimeArg::At { unix_ns } => {
                let at = UNIX_EPOCH + Duration::from_nanos(*unix_ns);
                write!(f, "{}", humantime::format_rfc3339_nanos(at))
            }
        }
    }
}

/// Parses `--from`/`--to` (clap's value parser).
pub fn time_arg(text: &str) -> Result<TimeArg, String> {
    let text = text.trim();
    if text.contains('T') || text.contains(':') {
        let at = humantime::parse_rfc3339_weak(text).map_err(|error| {
            format!(
                "{text:?} is not a time in RFC 3339 ({error}); give UTC as \
                 2026-11-27T08:00:00Z, or an offset from the recording's start as 500ms or 2m"
            )
        })?;
        let unix_ns = at
            .duration_since(UNIX_EPOCH)
            .map_err(|_| format!("{text:?} is before 1970"))?
            .as_nanos() as u64;
        return Ok(TimeArg::At { unix_ns });
    }
    nvrec::unit::parse_duration(text)
        .map(TimeArg::After)
        .map_err(|error| error.to_string())
}

/// The window `[from, to)` in nanoseconds since the epoch for a recording that started at
/// `start_ns`; refused when it holds no time at all.
/// Where offsets of a window count from in `entry`: its start, or for a mark (format 1.7)
/// the start of its window.
pub fn origin_ns(entry: &nvrec::layout::RecordingEntry) -> u64 {
    entry.mark_of.map_or(entry.start_ns, |of| of.from_ns)
}

pub fn window_ns(
    from: Option<TimeArg>,
    to: Option<TimeArg>,
    start_ns: u64,
) -> Result<(Option<u64>, Option<u64>), UsageError> {
    let from_ns = from.map(|from| from.unix_ns(start_ns));
    let to_ns = to.map(|to| to.unix_ns(start_ns));
    if let (Some(from_ns), Some(to_ns)) = (from_ns, to_ns) {
        if from_ns >= to_ns {
            return Err(UsageError(format!(
                "--from {} is not before --to {}: the window holds nothing; give a --from \
                 earlier than --to",
                from.expect("from"),
                to.expect("to"),
            )));
        }
    }
    Ok((from_ns, to_ns))
}

/// The window refused before anything is read, where the two ends can be compared without
/// the recording (both offsets, or both times).
pub fn check_window(from: Option<TimeArg>, to: Option<TimeArg>) -> Result<(), UsageError> {
    match (from, to) {
        (Some(TimeArg::After(_)), Some(TimeArg::After(_)))
        | (Some(TimeArg::At { .. }), Some(TimeArg::At { .. })) => {
            window_ns(from, to, 0).map(|_| ())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_utc_times_both_parse() {
        assert_eq!(
            time_arg("500ms"),
            Ok(TimeArg::After(Duration::from_millis(500)))
        );
        assert_eq!(
            time_arg("2026-11-27T08:00:00Z"),
            Ok(TimeArg::At {
                unix_ns: 1_795_766_400_000_000_000
            })
        );
        assert_eq!(
            time_arg("2026-11-27T08:00:00.25Z"),
            Ok(TimeArg::At {
                unix_ns: 1_795_766_400_250_000_000
            })
        );
        assert!(time_arg("2026-13-27T08:00:00Z").is_err());
        assert!(time_arg("soon").is_err());
        let at = time_arg("2026-11-27T08:00:00.25Z").unwrap();
        assert_eq!(time_arg(&at.to_string()), Ok(at), "{at}");
    }

    #[test]
    fn a_window_is_in_unix_time_and_must_hold_time() {
        let start = 1_000_000_000;
        let from = time_arg("1s").unwrap();
        let to = TimeArg::At {
            unix_ns: 2_500_000_000,
        };
        assert_eq!(
            window_ns(Some(from), Some(to), start).ok(),
            Some((Some(2_000_000_000), Some(2_500_000_000)))
        );
        assert!(window_ns(Some(from), Some(to), 2_000_000_000).is_err());
        assert!(check_window(Some(from), Some(to)).is_ok(), "compared later");
        let late = time_arg("2s").unwrap();
        assert!(check_window(Some(late), Some(from)).is_err());
    }
}
