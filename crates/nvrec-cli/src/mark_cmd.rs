//! `nvrec mark`: a mark asked of the ring recording running on a volume set (its window
//! kept out of the ring; format 1.7), or one released. A mark of a set no recorder writes
//! is released on the drives directly.

use crate::args::duration_arg;
use anyhow::Result;
use clap::Args;
use nvrec::recording::marks::{MarkOrder, MarkRequest};
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
    let order = match args.release {
        Some(id) => MarkOrder::Release(id),
        None => MarkOrder::Take(MarkRequest {
            before: args.before,
            after: args.after,
            label: args.label,
        }),
    };
    let answer = marking::mark(&args.targets, &order)?;
    if json {
        outln!("{}", serde_json::to_value(&answer)?);
    } else {
        outln!("{}", marking::taken_line(&answer));
    }
    Ok(Class::Done)
}
