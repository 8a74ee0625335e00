//! Byte sizes and durations as users write them, and back.
//!
//! Sizes follow dd's conventions because that is what the users we replace typed before:
//! `K`, `M`, `G`, `T`, `P` (and `KiB` ... `PiB`) are powers of 1024, `KB` ... `PB` are powers
//! of 1000, a bare number is bytes, and `0x...` is hexadecimal (addresses in the streamer's
//! console log are hex). Durations take `ns`, `us`, `ms`, `s`, `m`, `h` or a bare number of
//! seconds. This module is pure: no I/O, no allocation beyond the returned strings.

use std::time::Duration;

/// Why a size or duration could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("'{0}' is empty; expected a number such as 128K, 4G or 0x20000")]
    Empty(String),
    #[error("'{text}' is not a size: {why} (use a number with an optional suffix K, M, G, T, P (x1024), KB, MB, GB, TB, PB (x1000), or 0x hex)")]
    BadSize { text: String, why: &'static str },
    #[error("'{0}' does not fit in 64 bits")]
    Overflow(String),
    #[error("'{text}' is not a duration: {why} (use a number with ns, us, ms, s, m or h, e.g. 500ms or 2s)")]
    BadDuration { text: String, why: &'static str },
}

/// Parses a byte count such as `128K`, `4GiB`, `1.5G`, `10MB` or `0x3650000`.
pub fn parse_size_bytes(text: &str) -> Result<u64, ParseError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ParseError::Empty(text.to_string()));
    }
    if let Some(hex) = trimmed
        .strip_prefix("0x")
        .or_else(|| trimmed.strip_prefix("0X"))
    {
        return u64::from_str_radix(&hex.replace('_', ""), 16).map_err(|_| ParseError::BadSize {
            text: text.to_string(),
            why: "bad hexadecimal digits",
        });
    }
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(split);
    let number = number.replace('_', "");
    if number.is_empty() {
        return Err(ParseError::BadSize {
            text: text.to_string(),
            why: "no number",
        });
    }
    let multiplier: u64 = match suffix.trim() {
        "" | "B" | "b" | "c" => 1,
        "K" | "k" | "KiB" | "kiB" | "Ki" => 1 << 10,
        "M" | "m" | "MiB" | "Mi" => 1 << 20,
        "G" | "g" | "GiB" | "Gi" => 1 << 30,
        "T" | "t" | "TiB" | "Ti" => 1 << 40,
        "P" | "p" | "PiB" | "Pi" => 1 << 50,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "PB" => 1_000_000_000_000_000,
        _ => {
            return Err(ParseError::BadSize {
                text: text.to_string(),
                why: "unknown suffix",
            })
        }
    };
    if let Some((whole, fraction)) = number.split_once('.') {
        // Fractions are allowed only where the result is a whole number of bytes.
        let whole: u64 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| ParseError::BadSize {
                text: text.to_string(),
                why: "bad number",
            })?
        };
        if fraction.is_empty()
            || fraction.len() > 12
            || !fraction.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(ParseError::BadSize {
                text: text.to_string(),
                why: "bad fraction",
            });
        }
        let denominator = 10u128.pow(fraction.len() as u32);
        let numerator: u128 = fraction.parse::<u128>().unwrap_or(0) * multiplier as u128;
        if !numerator.is_multiple_of(denominator) {
            return Err(ParseError::BadSize {
                text: text.to_string(),
                why: "not a whole number of bytes",
            });
        }
        let total = whole as u128 * multiplier as u128 + numerator / denominator;
        return u64::try_from(total).map_err(|_| ParseError::Overflow(text.to_string()));
    }
    let value: u64 = number
        .parse()
        .map_err(|_| ParseError::Overflow(text.to_string()))?;
    value
        .checked_mul(multiplier)
        .ok_or_else(|| ParseError::Overflow(text.to_string()))
}

/// Parses a duration such as `500ms`, `2s`, `1.5s`, `10m`, `1h` or `30` (seconds).
pub fn parse_duration(text: &str) -> Result<Duration, ParseError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(ParseError::Empty(text.to_string()));
    }
    let split = trimmed
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(split);
    let value: f64 = number.parse().map_err(|_| ParseError::BadDuration {
        text: text.to_string(),
        why: "bad number",
    })?;
    let seconds_per_unit = match suffix.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "" | "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(ParseError::BadDuration {
                text: text.to_string(),
                why: "unknown unit",
            })
        }
    };
    let seconds = value * seconds_per_unit;
    if !seconds.is_finite() || !(0.0..=1e9).contains(&seconds) {
        return Err(ParseError::BadDuration {
            text: text.to_string(),
            why: "out of range",
        });
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Parses a data rate: `500M` or `500MiB/s` (bytes, x1024), `500MB/s` (bytes, x1000),
/// `100Gbit/s` or `100Gb/s` (bits, x1000, as network people write them). Returns bytes per second.
pub fn parse_rate_bytes_per_s(text: &str) -> Result<f64, ParseError> {
    let trimmed = text.trim();
    let body = trimmed
        .strip_suffix("/s")
        .or_else(|| trimmed.strip_suffix("ps"))
        .unwrap_or(trimmed);
    let bits = ["bit", "b"].iter().find_map(|suffix| {
        body.strip_suffix(suffix)
            .filter(|rest| !rest.ends_with(['i', 'I']))
    });
    if let Some(number_and_prefix) = bits {
        let split = number_and_prefix
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(number_and_prefix.len());
        let (number, prefix) = number_and_prefix.split_at(split);
        let value: f64 = number.parse().map_err(|_| ParseError::BadSize {
            text: text.to_string(),
            why: "bad number",
        })?;
        let multiplier = match prefix {
            "" => 1.0,
            "k" | "K" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            _ => {
                return Err(ParseError::BadSize {
                    text: text.to_string(),
                    why: "unknown bit-rate prefix",
                })
            }
        };
        return Ok(value * multiplier / 8.0);
    }
    parse_size_bytes(body).map(|bytes| bytes as f64)
}

/// Formats nanoseconds since the Unix epoch as UTC: `2026-11-22 09:17:10.123`.
pub fn format_utc_ns(ns: u64) -> String {
    format!("{}.{:03}", utc_seconds(ns, ' '), (ns / 1_000_000) % 1000)
}

/// Formats nanoseconds since the Unix epoch as RFC 3339 in UTC, to the nanosecond:
/// `2026-11-22T09:17:10.123456789Z` (SigMF's `core:datetime`).
pub fn format_rfc3339_ns(ns: u64) -> String {
    format!("{}.{:09}Z", utc_seconds(ns, 'T'), ns % 1_000_000_000)
}

/// The date and the time to the second, `separator` between them.
fn utc_seconds(ns: u64, separator: char) -> String {
    let (year, month, day) = civil_date(ns);
    let second_of_day = (ns / 1_000_000_000) % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}{separator}{:02}:{:02}:{:02}",
        second_of_day / 3600,
        (second_of_day / 60) % 60,
        second_of_day % 60
    )
}

/// The civil date (proleptic Gregorian) of nanoseconds since 1970-01-01.
fn civil_date(ns: u64) -> (i64, i64, i64) {
    let days = (ns / 1_000_000_000 / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

/// Formats a byte count with a binary unit: `131072` becomes `128 KiB`, `1536` `1.50 KiB`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut unit_index = 0;
    let mut value = bytes as f64;
    while value >= 1024.0 && unit_index + 1 < UNITS.len() {
        value /= 1024.0;
        unit_index += 1;
    }
    if unit_index == 0 {
        format!("{bytes} B")
    } else if value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit_index])
    } else {
        format!("{value:.2} {}", UNITS[unit_index])
    }
}

/// Bytes per second as MiB/s, the unit the streamer's console log uses.
pub fn rate_mib_per_s(bytes: u64, elapsed: Duration) -> f64 {
    let seconds = elapsed.as_secs_f64();
    if seconds <= 0.0 {
        return 0.0;
    }
    bytes as f64 / (1024.0 * 1024.0) / seconds
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_like_dd() {
        let cases: &[(&str, u64)] = &[
            ("0", 0),
            ("512", 512),
            ("128K", 128 << 10),
            ("128k", 128 << 10),
            ("128KiB", 128 << 10),
            ("4G", 4 << 30),
            ("4GiB", 4 << 30),
            ("1T", 1 << 40),
            ("10MB", 10_000_000),
            ("1KB", 1000),
            ("1.5G", 3 << 29),
            ("0x3650000", 0x365_0000),
            ("0xdf90356000", 0xdf_9035_6000),
            ("1_000", 1000),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_size_bytes(text), Ok(*expected), "{text}");
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        for text in [
            "",
            "K",
            "12Q",
            "0xzz",
            "1.0000001K",
            "99999999999999999999",
            "16E",
            "1.",
            "-1",
        ] {
            assert!(parse_size_bytes(text).is_err(), "{text} should not parse");
        }
        assert!(matches!(
            parse_size_bytes("20000000P"),
            Err(ParseError::Overflow(_))
        ));
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3d").is_err());
    }

    #[test]
    fn rates_parse_in_bytes_and_bits() {
        assert_eq!(parse_rate_bytes_per_s("100Gbit/s"), Ok(12.5e9));
        assert_eq!(parse_rate_bytes_per_s("100Gb/s"), Ok(12.5e9));
        assert_eq!(parse_rate_bytes_per_s("1.6GB/s"), Ok(1.6e9));
        assert_eq!(parse_rate_bytes_per_s("512M"), Ok(536_870_912.0));
        assert_eq!(parse_rate_bytes_per_s("512MiB/s"), Ok(536_870_912.0));
        assert!(parse_rate_bytes_per_s("fast").is_err());
    }

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc_ns(0), "1970-01-01 00:00:00.000");
        assert_eq!(
            format_utc_ns(1_795_000_000_123_000_000),
            "2026-11-18 11:06:40.123"
        );
        assert_eq!(
            format_utc_ns(951_782_400_000_000_000),
            "2000-02-29 00:00:00.000"
        );
        assert_eq!(
            format_rfc3339_ns(1_795_000_000_123_456_789),
            "2026-11-18T11:06:40.123456789Z"
        );
        assert_eq!(format_rfc3339_ns(0), "1970-01-01T00:00:00.000000000Z");
    }

    #[test]
    fn bytes_format_binary() {
        assert_eq!(format_bytes(100), "100 B");
        assert_eq!(format_bytes(131072), "128 KiB");
        assert_eq!(format_bytes(1536), "1.50 KiB");
        assert_eq!(format_bytes(4 << 30), "4 GiB");
    }

    #[test]
    fn rates_are_mib_per_second() {
        assert_eq!(rate_mib_per_s(1 << 20, Duration::from_secs(1)), 1.0);
        assert_eq!(rate_mib_per_s(1 << 30, Duration::from_millis(500)), 2048.0);
        assert_eq!(rate_mib_per_s(1, Duration::ZERO), 0.0);
    }
}
