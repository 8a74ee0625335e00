//! The facts of a sampled signal (an IQ stream from a radio, say) that a recording's entry
//! keeps (format 1.3, recording flag `SIGNAL`): the sample format, named as SigMF names its
//! datatypes (`cf32_le`, `ci16_le`, `ru8`...), the sample rate, the centre frequency and
//! free `KEY=VALUE` metadata. `export --format sigmf` turns them into a SigMF recording.
//!
//! Pure: parses what users type, and encodes and decodes the entry's bytes
//! (`docs/FORMAT.md`, section 5.2). It knows nothing of SigMF's files.

use super::codec::{get_u16, get_u64, put_bytes, put_u16, put_u64};
use super::error::{LayoutError, Structure};

const R: Structure = Structure::RecordingEntry;

/// Byte offsets of the signal fields in a recording entry (see `docs/FORMAT.md`).
pub(crate) mod sig_off {
    pub const SAMPLE_RATE_HZ: usize = 2256;
    pub const CENTER_FREQ_HZ: usize = 2264;
    pub const SAMPLE_FORMAT: usize = 2272;
    pub const FIELDS: usize = 2274;
    pub const META_LEN_BYTES: usize = 2276;
    // 2278..2304 reserved
    pub const META: usize = 3840;
}

/// Bytes of `KEY=VALUE` metadata an entry holds (its 252 bytes from 3840 to the CRC).
pub const SIGNAL_META_BYTES_MAX: usize = 252;
/// The largest sample rate and the largest centre frequency (either sign) SigMF allows.
pub const SIGNAL_HZ_MAX: f64 = 1e12;
/// `signal_fields` bit: the centre frequency is given.
const FIELD_CENTER_FREQ: u16 = 1 << 0;

/// The `core:` keys a user may set with `--meta`: SigMF's global fields that hold text.
/// The others are numbers, objects or what nvrec writes itself (datatype, sample rate,
/// version, extensions).
pub const CORE_TEXT_KEYS: [&str; 8] = [
    "core:author",
    "core:collection",
    "core:data_doi",
    "core:description",
    "core:hw",
    "core:license",
    "core:meta_doi",
    "core:recorder",
];

/// What one component of a sample is (SigMF's `f32`, `i16`, `u8`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Component {
    F64 = 1,
    F32 = 2,
    I32 = 3,
    I16 = 4,
    U32 = 5,
    U16 = 6,
    I8 = 7,
    U8 = 8,
}

const COMPONENTS: [(Component, &str, u32); 8] = [
    (Component::F64, "f64", 8),
    (Component::F32, "f32", 4),
    (Component::I32, "i32", 4),
    (Component::I16, "i16", 2),
    (Component::U32, "u32", 4),
    (Component::U16, "u16", 2),
    (Component::I8, "i8", 1),
    (Component::U8, "u8", 1),
];

impl Component {
    fn name(self) -> &'static str {
        COMPONENTS[self as usize - 1].1
    }

    pub fn bytes(self) -> u32 {
        COMPONENTS[self as usize - 1].2
    }
}

/// Byte order of a component wider than a byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    Little,
    Big,
}

/// A SigMF datatype: complex (I and Q) or real samples of one component type, in one byte
/// order (8-bit components have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleFormat {
    pub complex: bool,
    pub component: Component,
    /// `None` exactly for 8-bit components.
    pub order: Option<ByteOrder>,
}

/// A `--datatype`, `--sample-rate`, `--center-freq` or `--meta` that cannot be kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignalError {
    #[error(
        "datatype {0:?} is not a SigMF datatype: c (complex) or r (real), then f64, f32, i32, \
         i16, u32, u16 with _le or _be, or i8, u8 (e.g. cf32_le, ci16_le, cu8)"
    )]
    Datatype(String),
    #[error("sample rate {0} Hz: give a rate above 0 and at most 1e12 Hz")]
    SampleRate(String),
    #[error("centre frequency {0} Hz: give one within ±1e12 Hz")]
    CenterFreq(String),
    #[error("--meta {0:?}: give KEY=VALUE with KEY as namespace:name (e.g. core:author=Ada)")]
    MetaShape(String),
    #[error("--meta {key}: {why}")]
    MetaKey { key: String, why: String },
    #[error("--meta {key}: the value holds a control character (a line break?)")]
    MetaValue { key: String },
    #[error("--meta: {0} bytes of KEY=VALUE text; a recording keeps at most 252")]
    MetaTooLong(usize),
}

impl SampleFormat {
    /// Parses a SigMF datatype name.
    pub fn parse(text: &str) -> Result<SampleFormat, SignalError> {
        let bad = || SignalError::Datatype(text.to_string());
        let complex = match text.as_bytes().first() {
            Some(b'c') => true,
            Some(b'r') => false,
            _ => return Err(bad()),
        };
        let rest = &text[1..];
        let (component_text, order) = match rest.rsplit_once('_') {
            Some((component, "le")) => (component, Some(ByteOrder::Little)),
            Some((component, "be")) => (component, Some(ByteOrder::Big)),
            Some(_) => return Err(bad()),
            None => (rest, None),
        };
        let component = COMPONENTS
            .iter()
            .find(|(_, name, _)| *name == component_text)
            .map(|&(component, _, _)| component)
            .ok_or_else(bad)?;
        if (component.bytes() == 1) != order.is_none() {
            return Err(bad());
        }
        Ok(SampleFormat {
            complex,
            component,
            order,
        })
    }

    /// The SigMF datatype name (`cf32_le`).
    pub fn name(&self) -> String {
        let order = match self.order {
            Some(ByteOrder::Little) => "_le",
            Some(ByteOrder::Big) => "_be",
            None => "",
        };
        let kind = if self.complex { 'c' } else { 'r' };
        format!("{kind}{}{order}", self.component.name())
    }

    /// Bytes of one sample (both components of a complex one).
    pub fn sample_bytes(&self) -> u32 {
        self.component.bytes() * if self.complex { 2 } else { 1 }
    }

    /// The entry's code: the component (1..=8) plus 16 when complex plus 32 when big-endian.
    fn code(&self) -> u16 {
        self.component as u16
            + if self.complex { 16 } else { 0 }
            + if self.order == Some(ByteOrder::Big) {
                32
            } else {
                0
            }
    }

    fn from_code(code: u16) -> Option<SampleFormat> {
        if code & !0x3f != 0 {
            return None;
        }
        let component = COMPONENTS.get(usize::from(code & 0xf).checked_sub(1)?)?.0;
        let big = code & 32 != 0;
        let order = match (component.bytes(), big) {
            (1, true) => return None,
            (1, false) => None,
            (_, true) => Some(ByteOrder::Big),
            (_, false) => Some(ByteOrder::Little),
        };
        Some(SampleFormat {
            complex: code & 16 != 0,
            component,
            order,
        })
    }
}

/// The facts of a sampled signal, as a recording keeps them.
#[derive(Debug, Clone)]
pub struct Signal {
    pub format: SampleFormat,
    /// Samples per second: above 0, at most [`SIGNAL_HZ_MAX`].
    pub sample_rate_hz: f64,
    /// The centre frequency the samples were taken at, if known.
    pub center_freq_hz: Option<f64>,
    /// Free metadata, `namespace:name` keys, in the order given.
    pub meta: Vec<(String, String)>,
}

// Compared bit for bit, so that an entry that decodes equals the one encoded.
impl PartialEq for Signal {
    fn eq(&self, other: &Signal) -> bool {
        self.format == other.format
            && self.sample_rate_hz.to_bits() == other.sample_rate_hz.to_bits()
            && self.center_freq_hz.map(f64::to_bits) == other.center_freq_hz.map(f64::to_bits)
            && self.meta == other.meta
    }
}

impl Eq for Signal {}

/// Above 0 and at most [`SIGNAL_HZ_MAX`] (NaN is not).
fn rate_in_range(rate_hz: f64) -> bool {
    rate_hz > 0.0 && rate_hz <= SIGNAL_HZ_MAX
}

/// Within ±[`SIGNAL_HZ_MAX`] (NaN and the infinities are not).
fn freq_in_range(freq_hz: f64) -> bool {
    freq_hz.abs() <= SIGNAL_HZ_MAX
}

/// Checks a sample rate as typed (`2.4e6`, `48000`).
pub fn parse_sample_rate_hz(text: &str) -> Result<f64, SignalError> {
    parse_hz(text, rate_in_range, SignalError::SampleRate)
}

/// Checks a centre frequency as typed.
pub fn parse_center_freq_hz(text: &str) -> Result<f64, SignalError> {
    parse_hz(text, freq_in_range, SignalError::CenterFreq)
}

fn parse_hz(
    text: &str,
    in_range: fn(f64) -> bool,
    refused: fn(String) -> SignalError,
) -> Result<f64, SignalError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|&hz| in_range(hz))
        .ok_or_else(|| refused(text.to_string()))
}

/// Parses one `--meta KEY=VALUE`: KEY is `namespace:name` (ASCII letters, digits, `_`, `-`,
/// `.`); a `core:` key must be one of [`CORE_TEXT_KEYS`]; VALUE is text without control
/// characters.
pub fn parse_meta(text: &str) -> Result<(String, String), SignalError> {
    let (key, value) = text
        .split_once('=')
        .ok_or_else(|| SignalError::MetaShape(text.to_string()))?;
    check_meta_key(key)?;
    if value.chars().any(char::is_control) {
        return Err(SignalError::MetaValue {
            key: key.to_string(),
        });
    }
    Ok((key.to_string(), value.to_string()))
}

fn check_meta_key(key: &str) -> Result<(), SignalError> {
    let why = |why: &str| SignalError::MetaKey {
        key: key.to_string(),
        why: why.to_string(),
    };
    let word = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
    };
    match key.split_once(':') {
        Some((namespace, name)) if word(namespace) && word(name) => {}
        _ => {
            return Err(why(
                "a key is namespace:name of letters, digits, _ - . (e.g. core:author)",
            ))
        }
    }
    if key.starts_with("core:") && !CORE_TEXT_KEYS.contains(&key) {
        return Err(why(&format!(
            "not a core field --meta may set; those are {}",
            CORE_TEXT_KEYS.join(", ")
        )));
    }
    Ok(())
}

impl Signal {
    /// Checks the fields: the sample rate and frequency in range, every metadata entry as
    /// [`parse_meta`] takes it, no key twice, and the text within [`SIGNAL_META_BYTES_MAX`].
    pub fn validate(&self) -> Result<(), SignalError> {
        if !rate_in_range(self.sample_rate_hz) {
            return Err(SignalError::SampleRate(self.sample_rate_hz.to_string()));
        }
        if let Some(freq) = self.center_freq_hz {
            if !freq_in_range(freq) {
                return Err(SignalError::CenterFreq(freq.to_string()));
            }
        }
        for (index, (key, value)) in self.meta.iter().enumerate() {
            parse_meta(&format!("{key}={value}"))?;
            if self.meta[..index].iter().any(|(earlier, _)| earlier == key) {
                return Err(SignalError::MetaKey {
                    key: key.clone(),
                    why: "given twice".into(),
                });
            }
        }
        let len = self.meta_text().len();
        if len > SIGNAL_META_BYTES_MAX {
            return Err(SignalError::MetaTooLong(len));
        }
        Ok(())
    }

    /// The metadata as the entry keeps it: `KEY=VALUE` entries joined by line feeds.
    fn meta_text(&self) -> String {
        self.meta
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Writes the fields into an entry's bytes (the caller sets the `SIGNAL` flag).
    pub(crate) fn encode_into(&self, b: &mut [u8]) -> Result<(), LayoutError> {
        self.validate()
            .map_err(|error| LayoutError::invalid(R, "signal", error.to_string()))?;
        let text = self.meta_text();
        put_u64(b, sig_off::SAMPLE_RATE_HZ, self.sample_rate_hz.to_bits());
        put_u64(
            b,
            sig_off::CENTER_FREQ_HZ,
            self.center_freq_hz.unwrap_or(0.0).to_bits(),
        );
        put_u16(b, sig_off::SAMPLE_FORMAT, self.format.code());
        let fields = if self.center_freq_hz.is_some() {
            FIELD_CENTER_FREQ
        } else {
            0
        };
        put_u16(b, sig_off::FIELDS, fields);
        put_u16(b, sig_off::META_LEN_BYTES, text.len() as u16);
        put_bytes(b, sig_off::META, text.as_bytes());
        Ok(())
    }

    /// Reads the fields of an entry flagged `SIGNAL`. A sample format of 0 means the facts
    /// are gone (an entry rewritten by a 1.2 writer, which keeps ignorable flags but writes
    /// reserved bytes as zero): `None`, not an error.
    pub(crate) fn decode_from(b: &[u8]) -> Result<Option<Signal>, LayoutError> {
        let code = get_u16(b, sig_off::SAMPLE_FORMAT);
        if code == 0 {
            return Ok(None);
        }
        let invalid = |field, why: String| LayoutError::invalid(R, field, why);
        let format = SampleFormat::from_code(code)
            .ok_or_else(|| invalid("sample_format", format!("unknown code {code}")))?;
        let fields = get_u16(b, sig_off::FIELDS);
        if fields & !FIELD_CENTER_FREQ != 0 {
            return Err(invalid(
                "signal_fields",
                format!("unknown bits {fields:#x}"),
            ));
        }
        let len = usize::from(get_u16(b, sig_off::META_LEN_BYTES));
        if len > SIGNAL_META_BYTES_MAX {
            return Err(invalid("meta_len_bytes", format!("{len} is over 252")));
        }
        let text = std::str::from_utf8(&b[sig_off::META..sig_off::META + len])
            .map_err(|_| invalid("meta", "is not UTF-8".into()))?;
        let meta = text
            .split('\n')
            .filter(|entry| !entry.is_empty())
            .map(parse_meta)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| invalid("meta", error.to_string()))?;
        let signal = Signal {
            format,
            sample_rate_hz: f64::from_bits(get_u64(b, sig_off::SAMPLE_RATE_HZ)),
            center_freq_hz: (fields & FIELD_CENTER_FREQ != 0)
                .then(|| f64::from_bits(get_u64(b, sig_off::CENTER_FREQ_HZ))),
            meta,
        };
        signal
            .validate()
            .map_err(|error| invalid("signal", error.to_string()))?;
        Ok(Some(signal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sigmf_datatype_parses_and_prints_back() {
        let mut count = 0;
        for kind in ["c", "r"] {
            for (_, component, bytes) in COMPONENTS {
                let orders: &[&str] = if bytes == 1 { &[""] } else { &["_le", "_be"] };
                for order in orders {
                    let name = format!("{kind}{component}{order}");
                    let format = SampleFormat::parse(&name).unwrap();
                    assert_eq!(format.name(), name);
                    assert_eq!(SampleFormat::from_code(format.code()), Some(format));
                    count += 1;
                }
            }
        }
        assert_eq!(count, 28);
        assert_eq!(SampleFormat::parse("cf32_le").unwrap().sample_bytes(), 8);
        assert_eq!(SampleFormat::parse("ri16_be").unwrap().sample_bytes(), 2);
        for bad in [
            "", "f32_le", "cf32", "cf16_le", "ci8_le", "cu8_be", "xf32_le", "cf32_xx", "CF32_LE",
        ] {
            assert!(SampleFormat::parse(bad).is_err(), "{bad:?}");
        }
        for bad_code in [0u16, 9, 15, 64, 7 + 32, 0x100] {
            assert_eq!(SampleFormat::from_code(bad_code), None, "{bad_code}");
        }
    }

    #[test]
    fn meta_keys_are_namespaced_and_core_keys_only_the_text_fields() {
        assert_eq!(
            parse_meta("core:author=Ada = Lovelace").unwrap(),
            ("core:author".into(), "Ada = Lovelace".into())
        );
        assert_eq!(parse_meta("antenna:gain=3 dBi").unwrap().0, "antenna:gain");
        for bad in [
            "author=Ada",
            "core:author",
            "core:datatype=cf32_le",
            "core:sample_rate=1",
            ":x=1",
            "a:=1",
            "a b:c=1",
            "core:author=line\nbreak",
        ] {
            assert!(parse_meta(bad).is_err(), "{bad:?}");
        }
        assert!(parse_sample_rate_hz("2.4e6").is_ok());
        for bad in ["0", "-1", "nan", "inf", "2e12", "fast"] {
            assert!(parse_sample_rate_hz(bad).is_err(), "{bad}");
        }
        assert!(parse_center_freq_hz("-1e9").is_ok());
        assert!(parse_center_freq_hz("inf").is_err());
    }

    #[test]
    fn the_metadata_is_bounded_and_keys_are_unique() {
        let signal = |meta: Vec<(String, String)>| Signal {
            format: SampleFormat::parse("ci16_le").unwrap(),
            sample_rate_hz: 1e6,
            center_freq_hz: None,
            meta,
        };
        let long = "x".repeat(SIGNAL_META_BYTES_MAX - "core:hw=".len());
        assert!(signal(vec![("core:hw".into(), long.clone())])
            .validate()
            .is_ok());
        assert_eq!(
            signal(vec![("core:hw".into(), format!("{long}y"))]).validate(),
            Err(SignalError::MetaTooLong(253))
        );
        let twice = vec![
            ("core:hw".to_string(), "a".to_string()),
            ("core:hw".to_string(), "b".to_string()),
        ];
        assert!(signal(twice).validate().is_err());
    }
}
