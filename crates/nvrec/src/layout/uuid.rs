//! The 16-byte identifier of a volume set.

use std::fmt;
use std::str::FromStr;

use super::error::{LayoutError, Structure};

/// A 128-bit identifier, stored on disk as its 16 bytes in order (RFC 9562 byte order).
///
/// The layout module does no I/O, so it never makes one up: the caller supplies the bytes,
/// normally 16 bytes from the system's random source passed to [`Uuid::from_random_bytes`].
/// Shown as the usual `8-4-4-4-12` lowercase hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    /// The all-zero uuid. Never a valid set uuid.
    pub const NIL: Uuid = Uuid([0; 16]);

    /// The uuid with exactly these bytes.
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        Uuid(bytes)
    }

    /// A version 4 (random) uuid made from 16 random bytes: the version and variant bits
    /// are set, the other 122 bits are taken as they are.
    pub const fn from_random_bytes(mut bytes: [u8; 16]) -> Self {
        bytes[6] = (bytes[6] & 0x0f) | 0x40;
        bytes[8] = (bytes[8] & 0x3f) | 0x80;
        Uuid(bytes)
    }

    /// The 16 bytes, in on-disk order.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// Whether this is the all-zero uuid.
    pub fn is_nil(&self) -> bool {
        self.0 == [0; 16]
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Uuid({self})")
    }
}

impl FromStr for Uuid {
    type Err = LayoutError;

    /// Parses `8-4-4-4-12` hex (either case), or the same 32 hex digits without hyphens.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |reason: &str| LayoutError::invalid(Structure::Uuid, "text", reason);
        let bytes = s.as_bytes();
        let digits: Vec<u8> = match bytes.len() {
            36 => {
                for (i, &c) in bytes.iter().enumerate() {
                    if matches!(i, 8 | 13 | 18 | 23) != (c == b'-') {
                        return Err(bad("expected 8-4-4-4-12 hex digits"));
                    }
                }
                bytes.iter().copied().filter(|&c| c != b'-').collect()
            }
            32 => bytes.to_vec(),
            _ => return Err(bad("expected 32 hex digits, with or without hyphens")),
        };
        let mut out = [0u8; 16];
        for (o, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
            let hi = hex_value(pair[0]).ok_or_else(|| bad("not a hex digit"))?;
            let lo = hex_value(pair[1]).ok_or_else(|| bad("not a hex digit"))?;
            *o = (hi << 4) | lo;
        }
        Ok(Uuid(out))
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: [u8; 16] = [
        0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40,
        0x00,
    ];

    #[test]
    fn display_is_8_4_4_4_12_lowercase_hex() {
        assert_eq!(
            Uuid(SAMPLE).to_string(),
            "123e4567-e89b-12d3-a456-426614174000"
        );
        assert_eq!(
            Uuid::NIL.to_string(),
            "00000000-0000-0000-0000-000000000000"
        );
        assert_eq!(
            format!("{:?}", Uuid(SAMPLE)),
            "Uuid(123e4567-e89b-12d3-a456-426614174000)"
        );
    }

    #[test]
    fn parse_round_trips_display() {
        let u = Uuid(SAMPLE);
        assert_eq!(u.to_string().parse::<Uuid>(), Ok(u));
        assert_eq!("123E4567E89B12D3A456426614174000".parse::<Uuid>(), Ok(u));
        for bad in [
            "",
            "123e4567-e89b-12d3-a456-42661417400",
            "123e4567e-89b-12d3-a456-426614174000",
            "123e4567-e89b-12d3-a456-42661417400g",
            "+23e4567-e89b-12d3-a456-426614174000",
            "ü23e4567-e89b-12d3-a456-42661417400",
        ] {
            assert!(bad.parse::<Uuid>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn random_bytes_become_version_4() {
        let u = Uuid::from_random_bytes([0xff; 16]);
        assert_eq!(u.to_string(), "ffffffff-ffff-4fff-bfff-ffffffffffff");
        let u = Uuid::from_random_bytes([0; 16]);
        assert_eq!(u.to_string(), "00000000-0000-4000-8000-000000000000");
        assert!(!u.is_nil());
        assert!(Uuid::NIL.is_nil());
    }
}
