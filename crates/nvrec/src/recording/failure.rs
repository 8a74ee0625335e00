//! Why a recording failed: one typed value from the writer up to the report, the JSON and
//! the service, never flattened to text on its way. The first failure wins (the writer
//! keeps it and drains what is in flight); its message is what `record` prints, and the
//! JSON carries both the message (`error`) and its parts (`failure`: kind, member, cause,
//! errno) for a program to act on.

use super::RecordingError;
use crate::engine::IoError;
use crate::layout::RetirementCause;
use serde::ser::SerializeMap;
use std::sync::Arc;
use std::time::Duration;

/// Why a recording failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RecordingFailure {
    /// A member failed (a write, a flush, a metadata write, a timeout) where it could not be
    /// retired: no other member could take its writes, or `--on-member-failure stop`.
    #[error("{path}: {fault}")]
    Member {
        member: u16,
        /// The member's device or file.
        path: String,
        cause: RetirementCause,
        fault: MemberFault,
    },
    /// The source could not be read.
    #[error("reading the source: {0}")]
    Source(Arc<std::io::Error>),
    /// A step of the writer failed with an error of its own.
    #[error("{step}: {cause}")]
    Step {
        step: Step,
        cause: Arc<RecordingError>,
    },
    /// Nothing in flight, yet no member takes the next write: each has gone as far past the
    /// last durable checkpoint as recovery searches, and checkpoints made no room.
    #[error("no member takes the rest of the recording")]
    NoMemberTakesTheRest,
    /// The closed entry reached no member: the open one stays, and recovery finds the end.
    #[error("the closed entry could not be written to any member")]
    EntryUnwritten,
    /// A retired member's writes failed again where they were sent.
    #[error("a retired member's writes could not be written elsewhere")]
    RedirectsUnplaced,
    /// The member that takes a retired member's writes has no room for them before a
    /// checkpoint that waits for them.
    #[error(
        "{path}: no room for a retired member's writes until a checkpoint that waits for them"
    )]
    NoRoomForRedirects { member: u16, path: String },
    /// Reclaiming an older recording's space failed (not refused: failed).
    #[error("reclaiming recording {recording_id}: {cause}")]
    Reclaim {
        recording_id: u32,
        cause: Arc<RecordingError>,
    },
}

/// What went wrong on a failed member.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MemberFault {
    /// A write came back failed.
    #[error(transparent)]
    Write(IoError),
    /// A write did not complete within the member timeout.
    #[error("a write did not complete within {:.3} s (--member-timeout)", .0.as_secs_f64())]
    Timeout(Duration),
    /// A flush, a metadata write or a discard failed.
    #[error(transparent)]
    Other(Arc<RecordingError>),
}

/// The writer's steps whose own errors end a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Making or writing a checkpoint.
    Checkpoint,
    /// Submitting writes or waiting for their completions.
    Io,
    /// Submitting a write to this member (index).
    Submit(u16),
    /// Rewriting what a member with a failed flush completed, onto this member (index).
    Rewrite(u16),
    ClosingMark,
    WideningMark,
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Step::Checkpoint => f.write_str("writing a checkpoint"),
            Step::Io => f.write_str("submitting or completing writes"),
            Step::Submit(member) => write!(f, "submitting a write to member {member}"),
            Step::Rewrite(member) => write!(f, "rewriting unflushed chunks onto member {member}"),
            Step::ClosingMark => f.write_str("closing a mark"),
            Step::WideningMark => f.write_str("widening a mark"),
        }
    }
}

impl RecordingFailure {
    /// A failure of the writer's `step`, caused by `error`.
    pub fn step(step: Step, error: impl Into<RecordingError>) -> RecordingFailure {
        RecordingFailure::Step {
            step,
            cause: Arc::new(error.into()),
        }
    }

    /// Its kind, as the JSON names it.
    pub fn kind(&self) -> &'static str {
        match self {
            RecordingFailure::Member { .. } => "member",
            RecordingFailure::Source(_) => "source",
            RecordingFailure::Step { .. } => "step",
            RecordingFailure::NoMemberTakesTheRest => "no_member_takes_the_rest",
            RecordingFailure::EntryUnwritten => "entry_unwritten",
            RecordingFailure::RedirectsUnplaced => "redirects_unplaced",
            RecordingFailure::NoRoomForRedirects { .. } => "no_room_for_redirects",
            RecordingFailure::Reclaim { .. } => "reclaim",
        }
    }

    /// The member to blame, where there is one.
    pub fn member(&self) -> Option<u16> {
        match self {
            RecordingFailure::Member { member, .. }
            | RecordingFailure::NoRoomForRedirects { member, .. } => Some(*member),
            RecordingFailure::Step {
                step: Step::Submit(member) | Step::Rewrite(member),
                ..
            } => Some(*member),
            _ => None,
        }
    }

    /// The OS error number behind it, where there is one.
    pub fn errno(&self) -> Option<i32> {
        let errno = match self {
            RecordingFailure::Member { fault, .. } => match fault {
                MemberFault::Write(error) => error.errno,
                MemberFault::Timeout(_) => 0,
                MemberFault::Other(error) => error.raw_os_error().unwrap_or(0),
            },
            RecordingFailure::Source(error) => error.raw_os_error().unwrap_or(0),
            RecordingFailure::Step { cause, .. } | RecordingFailure::Reclaim { cause, .. } => {
                cause.raw_os_error().unwrap_or(0)
            }
            _ => 0,
        };
        (errno != 0).then_some(errno)
    }
}

impl RecordingError {
    /// The OS error number behind it, where there is one.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            RecordingError::Io { source, .. } | RecordingError::Flush { source, .. } => {
                source.raw_os_error()
            }
            RecordingError::Failed(failure) => failure.errno(),
            _ => None,
        }
    }
}

/// The JSON of a recording's failure (flattened into its report): `error`, the message, as
/// every report writes it, and `failure`, its parts; both null when it did not fail.
pub(crate) fn serialize_failure<S: serde::Serializer>(
    failure: &Option<RecordingFailure>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut map = serializer.serialize_map(Some(2))?;
    map.serialize_entry("error", &failure.as_ref().map(|f| f.to_string()))?;
    map.serialize_entry("failure", &failure.as_ref().map(Parts::of))?;
    map.end()
}

/// A failure's parts, as the JSON gives them (`failure` beside `error`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Parts {
    pub kind: &'static str,
    pub member: Option<u16>,
    pub cause: Option<RetirementCause>,
    pub step: Option<Step>,
    pub recording_id: Option<u32>,
    pub errno: Option<i32>,
}

impl Parts {
    pub fn of(failure: &RecordingFailure) -> Parts {
        Parts {
            kind: failure.kind(),
            member: failure.member(),
            cause: match failure {
                RecordingFailure::Member { cause, .. } => Some(*cause),
                _ => None,
            },
            step: match failure {
                RecordingFailure::Step { step, .. } => Some(*step),
                _ => None,
            },
            recording_id: match failure {
                RecordingFailure::Reclaim { recording_id, .. } => Some(*recording_id),
                _ => None,
            },
            errno: failure.errno(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{IoErrorKind, IoOp};

    #[derive(serde::Serialize)]
    struct Report {
        outcome: &'static str,
        #[serde(flatten, serialize_with = "serialize_failure")]
        error: Option<RecordingFailure>,
    }

    fn json(error: Option<RecordingFailure>) -> serde_json::Value {
        serde_json::to_value(Report {
            outcome: "x",
            error,
        })
        .unwrap()
    }

    fn eio_write() -> IoError {
        IoError {
            op: IoOp::Write,
            offset_bytes: 0x10000,
            len_bytes: 4096,
            kind: IoErrorKind::DeviceFailed,
            errno: libc::EIO,
        }
    }

    #[test]
    fn a_member_failure_names_the_member_its_cause_and_errno_in_text_and_in_parts() {
        let failure = RecordingFailure::Member {
            member: 1,
            path: "/dev/loop7".into(),
            cause: RetirementCause::WriteFailed,
            fault: MemberFault::Write(eio_write()),
        };
        let value = json(Some(failure));
        let error = value["error"].as_str().unwrap();
        assert!(
            error.starts_with("/dev/loop7: write of 4096 bytes"),
            "{error}"
        );
        assert!(
            error.contains(&format!("os error {}", libc::EIO)),
            "{error}"
        );
        let parts = &value["failure"];
        assert_eq!(parts["kind"], "member");
        assert_eq!(parts["member"], 1);
        assert_eq!(parts["cause"], "write_failed");
        assert_eq!(parts["errno"], libc::EIO);
        assert!(parts["step"].is_null() && parts["recording_id"].is_null());
    }

    #[test]
    fn no_failure_is_two_nulls_beside_the_rest_of_the_report() {
        let value = json(None);
        assert_eq!(value["outcome"], "x");
        assert!(
            value["error"].is_null() && value["failure"].is_null(),
            "{value}"
        );
        assert_eq!(value.as_object().unwrap().len(), 3);
    }

    #[test]
    fn a_steps_failure_keeps_its_cause_typed_and_its_errno() {
        let cause = RecordingError::Io {
            what: "writing the checkpoint".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        };
        let failure = RecordingFailure::step(Step::Checkpoint, cause);
        let RecordingFailure::Step { cause, .. } = &failure else {
            unreachable!()
        };
        assert!(matches!(**cause, RecordingError::Io { .. }));
        assert_eq!(failure.errno(), Some(libc::ENOSPC));
        assert_eq!(failure.member(), None);
        let text = failure.to_string();
        assert!(
            text.starts_with("writing a checkpoint: writing the checkpoint: "),
            "{text}"
        );
        let submit = RecordingFailure::step(Step::Submit(2), RecordingError::Usage("no".into()));
        assert_eq!(submit.member(), Some(2));
        assert_eq!(
            json(Some(submit))["failure"]["step"],
            serde_json::json!({"submit": 2})
        );
    }

    #[test]
    fn failures_without_a_member_or_errno_say_so() {
        for failure in [
            RecordingFailure::NoMemberTakesTheRest,
            RecordingFailure::EntryUnwritten,
            RecordingFailure::RedirectsUnplaced,
        ] {
            assert_eq!(
                (failure.member(), failure.errno()),
                (None, None),
                "{failure}"
            );
            let value = json(Some(failure.clone()));
            assert_eq!(value["failure"]["kind"], failure.kind());
            assert_eq!(value["error"], failure.to_string());
        }
        let timeout = RecordingFailure::Member {
            member: 0,
            path: "a".into(),
            cause: RetirementCause::Timeout,
            fault: MemberFault::Timeout(Duration::from_millis(1500)),
        };
        assert_eq!(timeout.errno(), None);
        assert_eq!(
            timeout.to_string(),
            "a: a write did not complete within 1.500 s (--member-timeout)"
        );
    }

    #[test]
    fn a_failure_that_ends_a_recording_early_is_a_recording_error_with_its_errno() {
        let failure =
            RecordingFailure::Source(Arc::new(std::io::Error::from_raw_os_error(libc::EPIPE)));
        let error = RecordingError::from(failure);
        assert_eq!(error.raw_os_error(), Some(libc::EPIPE));
        assert!(
            error.to_string().starts_with("reading the source: "),
            "{error}"
        );
    }
}
