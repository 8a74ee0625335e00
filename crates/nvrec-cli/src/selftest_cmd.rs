//! `nvrec selftest`: placeholder while the suite is written.
use crate::Finished;
use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct SelftestArgs {}

pub fn run(_args: SelftestArgs, _json: bool) -> Result<Finished> {
    anyhow::bail!("selftest is not built yet")
}
