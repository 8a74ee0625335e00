//! What a bench may ask of a target's size.
//!
//! A bench runs within the target it is given: it never grows a file that exists (opening
//! one preallocates nothing) and it refuses, before any I/O, to run over more bytes than the
//! target holds. Each bench says what it needs and why (the option that asked for it, or
//! the default it would have used), so that the refusal can tell the user what to change.
//!
//! What it deliberately does not do: shrink a size the user asked for to what fits. Only a
//! default that is defined as "as far as fits" (the sweep's chunk counts, a fill of the
//! whole target) adapts to the target.

use super::{BenchError, BenchTarget};
use crate::unit::format_bytes;

/// A bench asked for more bytes than its target holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bench {bench} needs {needed} ({why}), {target} has {available}; give a larger target or {remedy}",
    needed = format_bytes(*.needed_bytes),
    available = format_bytes(*.available_bytes)
)]
pub struct TargetTooSmall {
    /// "sweep", "fill", "overwrite", "profile cdm" ...
    pub bench: String,
    pub target: String,
    pub needed_bytes: u64,
    pub available_bytes: u64,
    /// What asked for the bytes: "--size", "the atto preset's region" ...
    pub why: String,
    /// What the user can change instead of the target: "a --size of at most 8 MiB".
    pub remedy: String,
}

/// What a bench needs of its target, and what to tell the user when it does not fit.
pub(crate) struct Need<'a> {
    pub bench: &'a str,
    pub needed_bytes: u64,
    pub why: String,
    pub remedy: String,
}

impl BenchTarget {
    /// Refuses a need larger than the target.
    pub(crate) fn require(&self, need: Need<'_>) -> Result<(), BenchError> {
        if need.needed_bytes <= self.capacity_bytes {
            return Ok(());
        }
        Err(BenchError::TargetTooSmall(TargetTooSmall {
            bench: need.bench.to_string(),
            target: self.name.clone(),
            needed_bytes: need.needed_bytes,
            available_bytes: self.capacity_bytes,
            why: need.why,
            remedy: need.remedy,
        }))
    }
}

/// "a --size of at most 8 MiB" for a target of `capacity_bytes`.
pub(crate) fn size_at_most(capacity_bytes: u64) -> String {
    format!("a --size of at most {}", format_bytes(capacity_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_need_within_the_target_passes_and_one_beyond_names_both_sizes() {
        let target = crate::bench::open_sim("sim:capacity=16M");
        let need = |needed_bytes| Need {
            bench: "fill",
            needed_bytes,
            why: "--size".to_string(),
            remedy: size_at_most(16 << 20),
        };
        assert!(target.require(need(16 << 20)).is_ok());
        let Err(BenchError::TargetTooSmall(error)) = target.require(need(32 << 20)) else {
            panic!("32 MiB on a 16 MiB target must be refused");
        };
        assert_eq!(
            error.to_string(),
            "bench fill needs 32 MiB (--size), sim has 16 MiB; give a larger target or a \
             --size of at most 16 MiB"
        );
    }
}
