//! `repair`: the metadata of a damaged set made whole from what survives, and whether it
//! is whole after.

use crate::outcome::Class;
use anyhow::Result;
use nvrec::control::Control;
use nvrec::device::{Access, Safety};
use nvrec::recording::repair::{self, RepairReport};
use nvrec::recording::volume::{self, MemberProblem};
use std::path::PathBuf;

/// What a repair is asked to do.
#[derive(Debug, Clone)]
pub struct RepairRequest {
    /// The members of the set (those present are repaired).
    pub targets: Vec<PathBuf>,
    /// Also read every chunk header to rebuild the entries of recordings whose entries
    /// are all lost.
    pub scan: bool,
}

/// How a repair went.
#[derive(Debug)]
pub struct RepairRun {
    pub set_uuid: String,
    pub report: RepairReport,
    /// What is wrong with the members given (a stranger, one unreadable).
    pub problems: Vec<MemberProblem>,
}

impl RepairRun {
    /// Whole: nothing failed, nothing left, every member there. A member that was not
    /// there was not repaired, and the chunks it holds were out of reach: never whole,
    /// whatever the members present say.
    pub fn whole(&self) -> bool {
        let report = &self.report;
        report.failed.is_empty()
            && report.left.is_empty()
            && report.unaccounted_left.is_empty()
            && report.missing_members.is_empty()
            && self.problems.is_empty()
    }

    pub fn class(&self) -> Class {
        Class::passed(self.whole())
    }

    /// Nothing was wrong to begin with.
    pub fn was_whole(&self) -> bool {
        let report = &self.report;
        report.found.is_empty()
            && report.extended.is_empty()
            && report.missing_members.is_empty()
            && self.problems.is_empty()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "set_uuid": self.set_uuid,
            "whole": self.whole(),
            "report": self.report,
            "problems": self.problems,
        })
    }
}

/// Repairs the set `request` names, locked against a recorder while it runs.
pub fn repair(request: &RepairRequest, control: &Control) -> Result<RepairRun> {
    let mut set = volume::open(&request.targets, Access::Write, Safety::Check)?;
    set.lock_for_recording()?;
    let report = repair::repair(&mut set, request.scan, control)?;
    Ok(RepairRun {
        set_uuid: set.set_uuid.to_string(),
        report,
        problems: set.problems.clone(),
    })
}
