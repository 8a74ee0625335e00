//! Short human-readable names stored in fixed 64-byte fields.

use std::fmt;

use super::error::{LayoutError, Structure};
use super::LABEL_MAX_BYTES;

/// A name of at most [`LABEL_MAX_BYTES`] bytes of UTF-8 without control characters
/// (so it can be printed to a terminal as it is). Stored NUL-padded in a 64-byte field;
/// the empty label is all zeros.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Label(String);

impl Label {
    /// Checks and wraps `text`.
    pub fn new(text: &str) -> Result<Self, LayoutError> {
        if text.len() > LABEL_MAX_BYTES {
            return Err(LayoutError::invalid(
                Structure::Label,
                "text",
                format!(
                    "{} bytes long, at most {LABEL_MAX_BYTES} allowed",
                    text.len()
                ),
            ));
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(LayoutError::invalid(
                Structure::Label,
                "text",
                format!("contains the control character {c:?}"),
            ));
        }
        Ok(Label(text.to_owned()))
    }

    /// The empty label.
    pub const fn empty() -> Self {
        Label(String::new())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn encode(&self) -> [u8; LABEL_MAX_BYTES] {
        let mut out = [0u8; LABEL_MAX_BYTES];
        // `new` guarantees the length; `zip` would stop at 64 bytes even so.
        for (o, b) in out.iter_mut().zip(self.0.bytes()) {
            *o = b;
        }
        out
    }

    /// Decodes a NUL-padded field: text up to the first NUL, zeros after it.
    pub(crate) fn decode(
        structure: Structure,
        field: &'static str,
        bytes: &[u8; LABEL_MAX_BYTES],
    ) -> Result<Self, LayoutError> {
        let len = bytes
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(LABEL_MAX_BYTES);
        let (text, padding) = bytes.split_at(len);
        if padding.iter().any(|&b| b != 0) {
            return Err(LayoutError::invalid(
                structure,
                field,
                "bytes after the terminating NUL are not zero",
            ));
        }
        let text = std::str::from_utf8(text)
            .map_err(|_| LayoutError::invalid(structure, field, "not UTF-8"))?;
        Label::new(text).map_err(|e| match e {
            LayoutError::InvalidField { reason, .. } => LayoutError::InvalidField {
                structure,
                field,
                reason,
            },
            other => other,
        })
    }
}

impl TryFrom<&str> for Label {
    type Error = LayoutError;
    fn try_from(text: &str) -> Result<Self, Self::Error> {
        Label::new(text)
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Label({:?})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_limits() {
        for text in ["", "run 42", "ÄÖÜ ünïcödé", &"x".repeat(LABEL_MAX_BYTES)] {
            let label = Label::new(text).expect("valid label");
            let bytes = label.encode();
            assert_eq!(
                Label::decode(Structure::Superblock, "label", &bytes),
                Ok(label)
            );
        }
        assert!(Label::new(&"x".repeat(LABEL_MAX_BYTES + 1)).is_err());
        assert!(Label::new("a\nb").is_err());
        assert!(Label::new("a\0b").is_err());
    }

    #[test]
    fn decode_rejects_garbage_after_nul_and_bad_utf8() {
        let mut bytes = [0u8; LABEL_MAX_BYTES];
        bytes[0] = b'a';
        bytes[5] = b'b';
        assert!(Label::decode(Structure::Superblock, "label", &bytes).is_err());
        let mut bytes = [0u8; LABEL_MAX_BYTES];
        bytes[0] = 0xff;
        assert!(Label::decode(Structure::Superblock, "label", &bytes).is_err());
        let mut bytes = [0u8; LABEL_MAX_BYTES];
        bytes[0] = 0x1b;
        let err = Label::decode(Structure::RecordingEntry, "name", &bytes);
        assert!(matches!(
            err,
            Err(LayoutError::InvalidField {
                structure: Structure::RecordingEntry,
                field: "name",
                ..
            })
        ));
    }
}
