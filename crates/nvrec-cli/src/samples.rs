//! `record`'s options that say what a byte stream's samples are (an IQ stream from a radio):
//! kept in the recording's entry, for `export --format sigmf`.

use crate::UsageError;
use clap::Args;
use nvrec::layout::{parse_center_freq_hz, parse_meta, parse_sample_rate_hz, SampleFormat, Signal};
use nvrec::source::SourceSpec;

#[derive(Args, Debug, Clone, Default)]
pub struct SampleArgs {
    /// What each sample of the stream is, as SigMF names it: c (complex, I then Q) or r
    /// (real), then f64, f32, i32, i16, u32, u16 with _le or _be, or i8, u8 (cf32_le, ci16_le,
    /// cu8). Kept in the recording for `nvrec export --format sigmf`.
    #[arg(long, value_name = "DATATYPE", requires = "sample_rate")]
    datatype: Option<String>,
    /// With --datatype: samples per second (e.g. 2.4e6).
    #[arg(long, value_name = "HZ", requires = "datatype")]
    sample_rate: Option<String>,
    /// With --datatype: the centre frequency the samples were taken at, in Hz (e.g. 915e6).
    #[arg(long, value_name = "HZ", requires = "datatype")]
    center_freq: Option<String>,
    /// With --datatype: metadata for the SigMF export, KEY=VALUE with KEY as namespace:name
    /// (core:author=Ada, core:hw="USRP B210", antenna:gain=3); repeat for several, 252 bytes
    /// in all.
    #[arg(long, value_name = "KEY=VALUE", requires = "datatype")]
    meta: Vec<String>,
}

impl SampleArgs {
    /// The facts the recording keeps, checked: none without --datatype.
    pub fn signal(&self, source: &SourceSpec) -> Result<Option<Signal>, UsageError> {
        let usage = |error: nvrec::layout::SignalError| UsageError(error.to_string());
        let Some(datatype) = &self.datatype else {
            return Ok(None);
        };
        if source.is_records() {
            return Err(UsageError(
                "--datatype describes samples of a byte stream; a network source records \
                 datagrams and packets"
                    .into(),
            ));
        }
        let signal = Signal {
            format: SampleFormat::parse(datatype).map_err(usage)?,
            sample_rate_hz: parse_sample_rate_hz(self.sample_rate.as_deref().unwrap_or(""))
                .map_err(usage)?,
            center_freq_hz: self
                .center_freq
                .as_deref()
                .map(parse_center_freq_hz)
                .transpose()
                .map_err(usage)?,
            meta: self
                .meta
                .iter()
                .map(|text| parse_meta(text))
                .collect::<Result<_, _>>()
                .map_err(usage)?,
        };
        signal.validate().map_err(usage)?;
        Ok(Some(signal))
    }
}
