//! `record`'s options that say what a byte stream's samples are (an IQ stream from a radio):
//! kept in the recording's entry, for `export --format sigmf` (checked by
//! [`Samples::signal`]).

use clap::Args;
use nvrec_app::sources::Samples;

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
    /// The samples' facts as given; checked when the recording is planned.
    pub fn samples(self) -> Samples {
        Samples {
            datatype: self.datatype,
            sample_rate: self.sample_rate,
            center_freq: self.center_freq,
            meta: self.meta,
        }
    }
}
