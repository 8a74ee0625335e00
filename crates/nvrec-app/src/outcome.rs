//! How a use case ended, as one [`Class`] that both front ends read: the CLI turns it into
//! its exit status ([`Class::exit_status`], the one place that does), the service into an
//! HTTP status (`serve::api::http_status`).
//!
//! A run that ends returns its own typed outcome (a recording's report, a replay's, a
//! verify's), each with a `class()`. A run that cannot start or breaks off returns an error;
//! [`Class::of_error`] reads its chain for the typed errors of the library and of this crate
//! ([`UsageError`]), so that "refused for safety" and "bad arguments" stay what they are
//! however much context was added on the way up.

/// What kind of end a use case came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Complete, or the source ended.
    Done,
    /// Stopped on request (SIGINT, the API's stop): what was taken is kept.
    Stopped,
    /// Bad arguments or addresses: nothing was read or written.
    Usage,
    /// Refused for safety: the target is in use or holds data.
    Refused,
    /// An I/O error, a mismatch, a damaged recording, a failed check.
    Failed,
    /// Aborted (SIGTERM, a second SIGINT, the API's abort).
    Aborted,
    /// Ended as asked, but a member failed on the way: every byte is on the others.
    Degraded,
    /// A linear recording filled its targets and stopped cleanly.
    Full,
}

impl Class {
    /// The exit status of a command that ended so (docs/GUIDE.md, "Exit statuses").
    pub fn exit_status(self) -> u8 {
        match self {
            Class::Done | Class::Stopped => 0,
            Class::Failed => 1,
            Class::Usage => 2,
            Class::Refused => 3,
            Class::Aborted => 4,
            Class::Full => 5,
            Class::Degraded => 6,
        }
    }

    /// A check that passed or failed.
    pub fn passed(good: bool) -> Class {
        if good {
            Class::Done
        } else {
            Class::Failed
        }
    }

    /// The class of a refused mark: what was asked does not fit (usage), the mark is being
    /// read or the recording ended (refused: in use, or gone), or its metadata failed or the
    /// recorder did not answer (failed).
    pub fn of_mark_refusal(refusal: &nvrec::recording::marks::MarkRefusal) -> Class {
        use nvrec::recording::marks::MarkRefusal as R;
        match refusal {
            R::NotARing
            | R::TooLarge { .. }
            | R::TableFull { .. }
            | R::SlotKept { .. }
            | R::Label(_)
            | R::NotUnderstood(_)
            | R::Said(_) => Class::Usage,
            R::BeingRead(_) | R::RecordingEnded => Class::Refused,
            R::Failed { .. } | R::NoAnswer(_) => Class::Failed,
        }
    }

    /// The class of a run that ended in `error`: the first typed error of its chain that
    /// says usage or refusal decides; anything else failed.
    pub fn of_error(error: &anyhow::Error) -> Class {
        error
            .chain()
            .find_map(class_of_cause)
            .unwrap_or(Class::Failed)
    }
}

/// The class one error of a chain stands for, if it is one that says.
fn class_of_cause(cause: &(dyn std::error::Error + 'static)) -> Option<Class> {
    use nvrec::stream::{AddressError, ConfigError, StreamError};
    if let Some(error) = cause.downcast_ref::<StreamError>() {
        return Some(match error {
            StreamError::Config(_) | StreamError::Address(_) => Class::Usage,
            _ => Class::Failed,
        });
    }
    if cause.is::<AddressError>()
        || cause.is::<ConfigError>()
        || cause.is::<UsageError>()
        || cause.is::<nvrec::selftest::SizeError>()
    {
        return Some(Class::Usage);
    }
    if let Some(error) = cause.downcast_ref::<nvrec::device::DeviceError>() {
        return Some(refused_or_failed(error));
    }
    if let Some(error) = cause.downcast_ref::<nvrec::bench::BenchError>() {
        use nvrec::bench::BenchError;
        return match error {
            BenchError::Settings(_) | BenchError::TargetTooSmall(_) => Some(Class::Usage),
            BenchError::Device(error) if error.is_safety_refusal() => Some(Class::Refused),
            _ => None,
        };
    }
    if let Some(error) = cause.downcast_ref::<nvrec_archive::ArchiveError>() {
        return error.is_usage().then_some(Class::Usage);
    }
    cause
        .downcast_ref::<nvrec::recording::RecordingError>()
        .and_then(class_of_recording_error)
}

fn class_of_recording_error(error: &nvrec::recording::RecordingError) -> Option<Class> {
    if error.is_usage() {
        return Some(Class::Usage);
    }
    if error.is_refusal() {
        return Some(Class::Refused);
    }
    match error {
        nvrec::recording::RecordingError::Device(error) => Some(refused_or_failed(error)),
        _ => None,
    }
}

fn refused_or_failed(error: &nvrec::device::DeviceError) -> Class {
    if error.is_safety_refusal() {
        Class::Refused
    } else {
        Class::Failed
    }
}

/// The recording's failure that `error` carries, typed, where its chain holds one (a
/// recording that failed before its first chunk: a member that failed where none could take
/// its place), so that its JSON gives the member, cause and errno as a report's does.
pub fn recording_failure(error: &anyhow::Error) -> Option<&nvrec::recording::RecordingFailure> {
    use nvrec::recording::{RecordingError, RecordingFailure};
    error.chain().find_map(|cause| {
        cause
            .downcast_ref::<RecordingFailure>()
            .or(match cause.downcast_ref::<RecordingError>() {
                Some(RecordingError::Failed(failure)) => Some(failure),
                _ => None,
            })
    })
}

/// A mistake in what was asked that the argument parser cannot see: nothing was done.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The error and its causes, joined by ": " as anyhow's `{:#}` does, but leaving out a
/// cause whose text the message before it already quotes: many errors name their OS error
/// in their own message and also give it as their source, which printed it twice.
pub fn error_text(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_errors_keep_their_class_under_context() {
        let usage = anyhow::Error::new(UsageError("bad".into())).context("planning");
        assert_eq!(Class::of_error(&usage), Class::Usage);
        let other = anyhow::anyhow!("disk on fire").context("recording");
        assert_eq!(Class::of_error(&other), Class::Failed);
        assert_eq!(error_text(&usage), "planning: bad");
    }

    #[test]
    fn every_class_has_its_documented_exit_status() {
        let statuses: Vec<u8> = [
            Class::Done,
            Class::Stopped,
            Class::Failed,
            Class::Usage,
            Class::Refused,
            Class::Aborted,
            Class::Full,
            Class::Degraded,
        ]
        .map(Class::exit_status)
        .to_vec();
        assert_eq!(statuses, [0, 0, 1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn a_refused_mark_is_usage_refused_or_failed_by_its_cause() {
        use nvrec::recording::marks::{MarkAction, MarkRefusal};
        use nvrec::recording::RecordingError;
        let failed = MarkRefusal::Failed {
            action: MarkAction::Releasing,
            mark_id: 3,
            cause: std::sync::Arc::new(RecordingError::NoSuchMark(3)),
        };
        assert_eq!(
            failed.to_string(),
            "releasing mark 3: mark 3 is not on this volume set"
        );
        let classes = [
            MarkRefusal::NotARing,
            MarkRefusal::BeingRead(2),
            MarkRefusal::RecordingEnded,
            failed,
            MarkRefusal::NoAnswer(std::time::Duration::from_secs(5)),
        ]
        .map(|refusal| Class::of_mark_refusal(&refusal));
        use Class::*;
        assert_eq!(classes, [Usage, Refused, Refused, Failed, Failed]);
    }

    #[test]
    fn a_recordings_failure_is_found_typed_under_context_and_fails() {
        use nvrec::recording::{RecordingError, RecordingFailure};
        let failure = RecordingFailure::EntryUnwritten;
        let error = anyhow::Error::new(RecordingError::from(failure.clone())).context("recording");
        assert!(matches!(
            recording_failure(&error),
            Some(RecordingFailure::EntryUnwritten)
        ));
        assert_eq!(Class::of_error(&error), Class::Failed);
        assert_eq!(error_text(&error), format!("recording: {failure}"));
        let bare = anyhow::Error::new(failure).context("recording");
        assert!(recording_failure(&bare).is_some());
        assert!(recording_failure(&anyhow::anyhow!("no")).is_none());
    }
}
