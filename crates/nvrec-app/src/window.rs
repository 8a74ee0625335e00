//! A moment of a recording as `--from` and `--to` take it: an offset from the recording's
//! start (`500ms`, `2m`) or a time in UTC (RFC 3339: `2026-11-27T08:00:00Z`, fractions of
//! a second allowed). Either becomes nanoseconds since the Unix epoch, the unit of chunk
//! timestamps, once the recording is known; the reader then finds the window by search.

use crate::outcome::UsageError;
use nvrec::layout::RecordingEntry;
use nvrec::unit::format_utc_ns;
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

/// Why a `--from`/`--to` was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TimeArgError {
    #[error(
        "{text:?} is not a time in RFC 3339 ({cause}); give UTC as 2026-11-27T08:00:00Z, or an \
         offset from the recording's start as 500ms or 2m"
    )]
    NotRfc3339 {
        text: String,
        cause: humantime::TimestampError,
    },
    #[error("{0:?} is before 1970")]
    Before1970(String),
    #[error(transparent)]
    NotAnOffset(#[from] nvrec::unit::ParseError),
}

/// Parses `--from`/`--to` (clap's value parser).
pub fn time_arg(text: &str) -> Result<TimeArg, TimeArgError> {
    let text = text.trim();
    if text.contains('T') || text.contains(':') {
        let at = humantime::parse_rfc3339_weak(text).map_err(|cause| TimeArgError::NotRfc3339 {
            text: text.to_string(),
            cause,
        })?;
        let unix_ns = at
            .duration_since(UNIX_EPOCH)
            .map_err(|_| TimeArgError::Before1970(text.to_string()))?
            .as_nanos() as u64;
        return Ok(TimeArg::At { unix_ns });
    }
    Ok(TimeArg::After(nvrec::unit::parse_duration(text)?))
}

/// Where offsets of a window count from in `entry`: its start, or for a mark (format 1.7)
/// the start of its window.
pub fn origin_ns(entry: &RecordingEntry) -> u64 {
    entry.mark_of.map_or(entry.start_ns, |of| of.from_ns)
}

/// Where `entry`'s time ends: its end, or none while it is still open (a recording another
/// program is writing, a mark whose after-window runs), whose end is not known yet.
fn end_ns(entry: &RecordingEntry) -> Option<u64> {
    (entry.end_ns != 0).then(|| entry.end_ns.max(origin_ns(entry)))
}

/// Whether the window `[from_ns, to_ns)` holds any of `entry`'s time: it ends after the
/// entry began, and begins no later than the entry ended.
pub fn meets(entry: &RecordingEntry, (from_ns, to_ns): (Option<u64>, Option<u64>)) -> bool {
    let start_ns = origin_ns(entry);
    to_ns.is_none_or(|to| to > start_ns)
        && from_ns.is_none_or(|from| end_ns(entry).is_none_or(|end| from <= end))
}

/// What `entry` is, as a message names it.
fn kind(entry: &RecordingEntry) -> &'static str {
    match entry.mark_of {
        Some(_) => "mark",
        None => "recording",
    }
}

/// The time `entry` spans, as a refusal names it: `recording 1 spans 2026-11-27
/// 10:08:16.461 to 2026-11-27 10:08:16.648 UTC (0.187 s)`.
pub fn span_text(entry: &RecordingEntry) -> String {
    let what = kind(entry);
    let start_ns = origin_ns(entry);
    match end_ns(entry) {
        Some(end) => format!(
            "{what} {} spans {} to {} UTC ({:.3} s)",
            entry.recording_id,
            format_utc_ns(start_ns),
            format_utc_ns(end),
            end.saturating_sub(start_ns) as f64 / 1e9
        ),
        None => format!(
            "{what} {} began at {} UTC and has not ended",
            entry.recording_id,
            format_utc_ns(start_ns)
        ),
    }
}

/// `--from X --to Y` as the user gave them, for a message.
fn window_text(from: Option<TimeArg>, to: Option<TimeArg>) -> String {
    let ends: Vec<String> = [("--from", from), ("--to", to)]
        .into_iter()
        .filter_map(|(name, end)| end.map(|end| format!("{name} {end}")))
        .collect();
    ends.join(" ")
}

/// The window `[from, to)` of `entry` in nanoseconds since the epoch, each end resolved
/// against the entry's start ([`origin_ns`]); refused when it holds no time at all, or none
/// of the entry's (before its start or after its end), naming the time the entry spans.
/// Nothing is read and nothing written before this answers.
pub fn window_of(
    entry: &RecordingEntry,
    from: Option<TimeArg>,
    to: Option<TimeArg>,
) -> Result<(Option<u64>, Option<u64>), UsageError> {
    let window = window_ns(from, to, origin_ns(entry))?;
    if meets(entry, window) {
        return Ok(window);
    }
    let name = format!("{} {}", kind(entry), entry.recording_id);
    let side = if window.1.is_some_and(|to| to <= origin_ns(entry)) {
        format!("ends before {name} began")
    } else {
        format!("begins after {name} ended")
    };
    Err(UsageError(format!(
        "the window {} {side}: {}; give a window within it (--from and --to as offsets from \
         its start, or times in UTC)",
        window_text(from, to),
        span_text(entry)
    )))
}

/// The entries of `entries` that the window meets, each end resolved against its own start;
/// refused when it meets none of them, naming what each spans.
pub fn entries_met(
    entries: Vec<RecordingEntry>,
    from: Option<TimeArg>,
    to: Option<TimeArg>,
) -> Result<Vec<RecordingEntry>, UsageError> {
    if from.is_none() && to.is_none() {
        return Ok(entries);
    }
    if let [entry] = entries.as_slice() {
        window_of(entry, from, to)?;
        return Ok(entries);
    }
    let mut met = Vec::new();
    let mut spans = Vec::new();
    for entry in entries {
        let window = window_ns(from, to, origin_ns(&entry))?;
        if meets(&entry, window) {
            met.push(entry);
        } else {
            spans.push(span_text(&entry));
        }
    }
    if met.is_empty() && !spans.is_empty() {
        return Err(UsageError(format!(
            "the window {} holds none of the set's recordings: {}; give a window within one \
             of them (--recording N picks one)",
            window_text(from, to),
            spans.join("; ")
        )));
    }
    Ok(met)
}

/// The window `[from, to)` in nanoseconds since the epoch for a recording that started at
/// `start_ns`; refused when it holds no time at all.
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
        assert!(matches!(
            time_arg("2026-13-27T08:00:00Z"),
            Err(TimeArgError::NotRfc3339 { .. })
        ));
        // humantime takes no year before 1970: refused as not RFC 3339 already.
        assert!(matches!(
            time_arg("1969-12-31T23:59:59Z"),
            Err(TimeArgError::NotRfc3339 { .. } | TimeArgError::Before1970(_))
        ));
        assert!(matches!(
            time_arg("soon"),
            Err(TimeArgError::NotAnOffset(_))
        ));
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

    /// Recording `id` from `start_ns` to `end_ns` (0: still open).
    fn entry(id: u32, start_ns: u64, end_ns: u64) -> RecordingEntry {
        use nvrec::layout::{Label, MemberSpan, RecordingFlags, RecordingState, Uuid};
        RecordingEntry {
            set_uuid: Uuid::from_random_bytes([1; 16]),
            recording_id: id,
            revision: 1,
            state: if end_ns == 0 {
                RecordingState::Open
            } else {
                RecordingState::Closed
            },
            flags: RecordingFlags::empty(),
            first_sequence: 0,
            end_sequence: 10,
            start_ns,
            end_ns,
            stream_len_bytes: 10 << 17,
            lost_bytes: 0,
            name: Label::new("").unwrap(),
            members: vec![MemberSpan::default()],
            retirements: Vec::new(),
            start_laps: Vec::new(),
            overwrote: Vec::new(),
            signal: None,
            reclaimed: None,
            mark_of: None,
        }
    }

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn a_window_outside_the_recording_is_refused_with_its_span() {
        // 2026-11-27 08:00:00 UTC to 0.187 s later.
        let start = 1_795_766_400 * SECOND;
        let recording = entry(1, start, start + 187_000_000);
        let offset = |text: &str| Some(time_arg(text).unwrap());
        let inside = [
            (offset("100ms"), offset("200ms")),
            (None, offset("50ms")),
            (offset("0s"), None),
            (offset("187ms"), offset("1s")),
            (offset("2026-11-27T07:59:00Z"), offset("100ms")),
        ];
        for (from, to) in inside {
            assert!(window_of(&recording, from, to).is_ok(), "{from:?} {to:?}");
        }
        let outside = [
            (
                offset("200ms"),
                offset("300ms"),
                "begins after recording 1 ended",
            ),
            (
                offset("1s"),
                None,
                "--from 1s begins after recording 1 ended",
            ),
            (
                None,
                offset("2026-11-27T08:00:00Z"),
                "ends before recording 1 began",
            ),
            (
                offset("2026-11-27T07:00:00Z"),
                offset("2026-11-27T07:59:59Z"),
                "ends before recording 1 began",
            ),
        ];
        for (from, to, side) in outside {
            let error = window_of(&recording, from, to).unwrap_err().0;
            assert!(error.contains(side), "{error}");
            assert!(
                error.contains(
                    "recording 1 spans 2026-11-27 08:00:00.000 to 2026-11-27 08:00:00.187 UTC \
                     (0.187 s)"
                ),
                "{error}"
            );
        }
        let empty = window_of(&recording, offset("100ms"), offset("100ms"));
        assert!(empty.unwrap_err().0.contains("holds nothing"));
        // A recording still open has no end yet: only its start bounds a window.
        let open = entry(2, start, 0);
        assert!(window_of(&open, offset("1h"), None).is_ok());
        let error = window_of(&open, None, offset("2026-11-27T07:00:00Z"))
            .unwrap_err()
            .0;
        assert!(error.contains("has not ended"), "{error}");
    }

    #[test]
    fn a_window_over_several_recordings_keeps_those_it_meets() {
        let first = entry(1, 10 * SECOND, 20 * SECOND);
        let second = entry(2, 30 * SECOND, 35 * SECOND);
        let offset = |text: &str| Some(time_arg(text).unwrap());
        let kept = entries_met(vec![first.clone(), second.clone()], offset("8s"), None).unwrap();
        assert_eq!(kept, std::slice::from_ref(&first));
        let error = entries_met(vec![first.clone(), second.clone()], offset("15s"), None)
            .unwrap_err()
            .0;
        assert!(error.contains("recording 1 spans"), "{error}");
        assert!(error.contains("recording 2 spans"), "{error}");
        assert!(error.contains("(5.000 s)"), "{error}");
        let all = entries_met(vec![first.clone(), second.clone()], None, None).unwrap();
        assert_eq!(all.len(), 2);
        let one = entries_met(vec![second], offset("6s"), None).unwrap_err().0;
        assert!(one.contains("begins after recording 2 ended"), "{one}");
    }
}
