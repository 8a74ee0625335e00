//! `nvrec mark`: a mark asked of the ring recording running on a volume set (its window
//! kept out of the ring; format 1.7), or one released. A mark of a set no recorder writes
//! is released on the drives directly.

use crate::args::duration_arg;
use anyhow::Result;
use clap::Args;
use nvrec::device::{Access, Safety};
use nvrec::recording::marks::{MarkOrder, MarkRequest};
use nvrec::recording::volume;
use nvrec_app::marking;
use nvrec_app::Class;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MarkArgs {
    /// The volume set's members (as `record` was given them; one is enough to find it).
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// How much of the recording before now the mark keeps.
    #[arg(long, default_value = "2m", value_parser = duration_arg)]
    before: Duration,
    /// How long after now it goes on keeping.
    #[arg(long, default_value = "30s", value_parser = duration_arg)]
    after: Duration,
    /// What the mark is (at most 64 bytes).
    #[arg(long, default_value = "")]
    label: String,
    /// Release mark N instead: the ring may write over its slots again.
    #[arg(long, value_name = "N", conflicts_with_all = ["before", "after", "label"])]
    release: Option<u32>,
}

pub fn mark(args: MarkArgs, json: bool) -> Result<Class> {
    if args.label.len() > nvrec::layout::LABEL_MAX_BYTES {
        return Err(nvrec_app::outcome::UsageError(format!(
            "--label is {} bytes: a mark's label holds at most {}",
            args.label.len(),
            nvrec::layout::LABEL_MAX_BYTES
        ))
        .into());
    }
    let set = volume::open(&args.targets, Access::Read, Safety::Check)?;
    let set_uuid = set.set_uuid.to_string();
    let order = match args.release {
        Some(id) => MarkOrder::Release(id),
        None => MarkOrder::Take(MarkRequest {
            before: args.before,
            after: args.after,
            label: args.label.clone(),
        }),
    };
    let live = set.live_recording()?.is_some();
    drop(set);
    let answer = match (&order, live) {
        (MarkOrder::Release(id), false) => release_here(&args.targets, *id)?,
        _ => marking::ask(&set_uuid, &order)?,
    };
    if json {
        outln!("{}", serde_json::to_value(&answer)?);
    } else {
        outln!("{}", marking::taken_line(&answer));
    }
    Ok(Class::Done)
}

/// Releases mark `id` of a set no recorder writes.
fn release_here(targets: &[PathBuf], id: u32) -> Result<nvrec::recording::marks::MarkAnswer> {
    let set = volume::open(targets, Access::Write, Safety::Check)?;
    set.lock_for_recording()?;
    let entry = nvrec::recording::marks::release(&set, id)?;
    Ok(nvrec::recording::marks::MarkAnswer {
        mark_id: entry.recording_id,
        recording_id: entry.mark_of.map_or(0, |of| of.recording_id),
        released: true,
        before_ns: 0,
        after_ns: 0,
        label: entry.name.as_str().to_string(),
        cut_short: false,
        joined: false,
    })
}
