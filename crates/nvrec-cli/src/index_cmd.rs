//! `nvrec index`: a recording's flow index held to its data and built again from it
//! (`nvrec_app::indexing`); this parses and prints.

use crate::args::EngineArg;
use crate::reading;
use anyhow::Result;
use clap::Args;
use nvrec::unit::format_bytes;
use nvrec_app::indexing::{IndexReport, IndexRequest};
use nvrec_app::Class;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct IndexArgs {
    /// The members of the set.
    #[arg(required = true)]
    targets: Vec<PathBuf>,
    /// Which recording (default: the last).
    #[arg(long)]
    recording: Option<u32>,
    /// Write the flows built from the data to FILE as Parquet (the schema of an archive's
    /// flows objects, for DuckDB, Spark or Trino), for a recording without an index too.
    #[arg(long, value_name = "FILE")]
    parquet: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "auto")]
    engine: EngineArg,
}

pub fn index(args: IndexArgs, json: bool) -> Result<Class> {
    let source = reading::open(&args.targets)?;
    let entry = source.select(args.recording)?;
    let request = IndexRequest {
        parquet: args.parquet.clone(),
    };
    let engine = args.engine.choice();
    let report = reading::with_progress("index", json, |control, progress| {
        nvrec_app::indexing::index(&source, entry, &request, engine, control, progress)
    })?;
    if reading::stdout_gone() {
        return Ok(Class::Failed);
    }
    match json {
        true => outln!("{}", serde_json::to_value(&report)?),
        false => print_text(&report),
    }
    Ok(report.class())
}

fn print_text(report: &IndexReport) {
    let name = nvrec_app::listing::entry_name(&report.entry);
    if report.indexed {
        outln!(
            "{name}: {} index blocks ({}, {:.3} % of the stream), {} agree with their chunks",
            report.blocks,
            format_bytes(report.index_bytes),
            100.0 * report.index_share,
            report.blocks_agree
        );
    } else {
        outln!("{name}: recorded without a flow index");
    }
    for block in &report.blocks_differ {
        outln!(
            "  the block of chunks {} to {} differs from them: {}",
            block.first_sequence,
            block.end_sequence - 1,
            block.what
        );
    }
    if report.blocks_partly_overwritten > 0 {
        outln!(
            "  {} blocks of chunks the ring partly wrote over: not checked",
            report.blocks_partly_overwritten
        );
    }
    for note in &report.unindexed {
        outln!("  {note}");
    }
    outln!(
        "  {} flows, {} packets in {} chunks read",
        report.flows,
        report.packets,
        report.summary.chunk_count
    );
    for hole in report.holes.iter().take(20) {
        outln!("  hole: {hole}");
    }
    if let Some(path) = &report.parquet {
        outln!("  the flows written to {}", path.display());
    }
}
