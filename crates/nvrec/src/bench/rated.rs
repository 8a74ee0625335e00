//! A bench's rates against the drive's rating (`--rated READ,WRITE`, MB/s as datasheets
//! quote them): which rates each bench compares, and the percent. Pure: the rates come from
//! a result, the rating from the user.
//!
//! What it deliberately does not do: judge. A drive at 60 % of its rated write after its
//! cache is what the bench exists to show, not a failure.

use super::{FillResult, OverwriteResult, ProfileResult, SweepResult};
use crate::engine::IoOp;

/// What a drive is rated for, bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Rated {
    pub read_bytes_per_s: f64,
    pub write_bytes_per_s: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--rated '{text}': {why} (give the rated read and write in MB/s: 3500,3000)")]
pub struct RatedError {
    pub text: String,
    pub why: &'static str,
}

impl Rated {
    /// `READ,WRITE` in MB/s (10^6 bytes a second), each positive.
    pub fn parse(text: &str) -> Result<Rated, RatedError> {
        let error = |why| RatedError {
            text: text.to_string(),
            why,
        };
        let (read, write) = text.split_once(',').ok_or(error("no comma"))?;
        let mb_per_s = |part: &str| match part.trim().trim_end_matches("MB/s").trim().parse() {
            Ok(value) if f64::is_finite(value) && value > 0.0 => Ok(value * 1e6),
            _ => Err(error("each rate must be a positive number of MB/s")),
        };
        Ok(Rated {
            read_bytes_per_s: mb_per_s(read)?,
            write_bytes_per_s: mb_per_s(write)?,
        })
    }

    fn of(&self, op: IoOp) -> f64 {
        match op {
            IoOp::Read => self.read_bytes_per_s,
            _ => self.write_bytes_per_s,
        }
    }
}

/// One rate of a bench against the rating of its direction.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RatedFigure {
    pub name: String,
    pub op: IoOp,
    pub bytes_per_s: f64,
    pub rated_bytes_per_s: f64,
    pub percent: f64,
}

/// A bench result's rates, named as its report names them.
pub trait RatedRates {
    fn rates(&self) -> Vec<(String, IoOp, f64)>;
}

impl RatedRates for SweepResult {
    fn rates(&self) -> Vec<(String, IoOp, f64)> {
        let summary = &self.summary;
        vec![
            (
                "peak write".into(),
                IoOp::Write,
                summary.peak_write_bytes_per_s,
            ),
            (
                "peak read".into(),
                IoOp::Read,
                summary.peak_read_bytes_per_s,
            ),
        ]
    }
}

impl RatedRates for FillResult {
    fn rates(&self) -> Vec<(String, IoOp, f64)> {
        let summary = &self.summary;
        let mut rates = vec![
            (
                "peak write".into(),
                IoOp::Write,
                summary.peak_write_bytes_per_s,
            ),
            (
                "mean write".into(),
                IoOp::Write,
                summary.mean_write_bytes_per_s,
            ),
            (
                "sustained write".into(),
                IoOp::Write,
                summary.sustained_write_bytes_per_s,
            ),
        ];
        rates.extend(
            self.analysis
                .plateaus
                .iter()
                .enumerate()
                .map(|(index, plateau)| {
                    (
                        format!("plateau {}", index + 1),
                        IoOp::Write,
                        plateau.rate_bytes_per_s,
                    )
                }),
        );
        if let Some(read) = summary.read_bytes_per_s {
            rates.push(("read back".into(), IoOp::Read, read));
        }
        rates
    }
}

impl RatedRates for OverwriteResult {
    fn rates(&self) -> Vec<(String, IoOp, f64)> {
        self.phases
            .iter()
            .flat_map(|phase| {
                [
                    (
                        format!("{} before the wrap", phase.mode.name()),
                        IoOp::Write,
                        phase.rate_before_wrap_bytes_per_s,
                    ),
                    (
                        format!("{} after the wrap", phase.mode.name()),
                        IoOp::Write,
                        phase.rate_after_wrap_bytes_per_s,
                    ),
                ]
            })
            .collect()
    }
}

impl RatedRates for ProfileResult {
    fn rates(&self) -> Vec<(String, IoOp, f64)> {
        self.tests
            .iter()
            .map(|test| (test.name.clone(), test.op, test.best_bytes_per_s))
            .collect()
    }
}

/// Every rate of `result` as a percent of the rating of its direction.
pub fn of_rated(rated: &Rated, result: &dyn RatedRates) -> Vec<RatedFigure> {
    result
        .rates()
        .into_iter()
        .map(|(name, op, bytes_per_s)| {
            let rated_bytes_per_s = rated.of(op);
            RatedFigure {
                name,
                op,
                bytes_per_s,
                rated_bytes_per_s,
                percent: bytes_per_s / rated_bytes_per_s * 100.0,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratings_parse_in_mb_per_s_and_bad_ones_say_why() {
        assert_eq!(
            Rated::parse("3500,3000"),
            Ok(Rated {
                read_bytes_per_s: 3.5e9,
                write_bytes_per_s: 3e9
            })
        );
        assert_eq!(
            Rated::parse(" 7000 MB/s , 6850.5 ")
                .unwrap()
                .write_bytes_per_s,
            6.8505e9
        );
        for (text, why) in [
            ("3500", "comma"),
            ("3500,", "positive"),
            ("fast,3000", "positive"),
            ("3500,-1", "positive"),
            ("0,3000", "positive"),
        ] {
            let error = Rated::parse(text).unwrap_err();
            assert!(error.why.contains(why), "{text}: {error}");
        }
    }

    struct Rates(Vec<(String, IoOp, f64)>);

    impl RatedRates for Rates {
        fn rates(&self) -> Vec<(String, IoOp, f64)> {
            self.0.clone()
        }
    }

    #[test]
    fn each_rate_against_its_direction() {
        // The seed's Gen4 drive: rated 5000 read, 4400 write.
        let rated = Rated::parse("5000,4400").unwrap();
        let result = Rates(vec![
            ("read".into(), IoOp::Read, 4.975e9),
            ("write".into(), IoOp::Write, 2.2e9),
        ]);
        let figures = of_rated(&rated, &result);
        assert_eq!(figures.len(), 2);
        assert!((figures[0].percent - 99.5).abs() < 1e-9);
        assert_eq!(figures[0].rated_bytes_per_s, 5e9);
        assert!((figures[1].percent - 50.0).abs() < 1e-9);
        assert_eq!(figures[1].rated_bytes_per_s, 4.4e9);
    }
}
