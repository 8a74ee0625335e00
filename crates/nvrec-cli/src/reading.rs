//! What the reading commands (`ls`, `replay`, `verify`, `export`, `archive`) share: opening
//! what they read (saying which of an archive's manifests could not be read), running a use
//! case under the process's stop and abort with a progress display, and the lines on a
//! set's metadata damage.

use crate::{progress, signal};
use anyhow::Result;
use nvrec::control::{Control, Progress};
use nvrec::recording::health;
use nvrec_app::chunks::ChunkSource;
use std::path::PathBuf;
use std::sync::Arc;

/// Opens a volume set's members or an archive; an archive's unreadable manifests are named
/// on stderr (the commands count them too).
pub fn open(targets: &[PathBuf]) -> Result<ChunkSource> {
    let source = ChunkSource::open(targets)?;
    for bad in source.unreadable() {
        errln!("nvrec: unreadable manifest {bad}");
    }
    Ok(source)
}

/// Runs `work` under SIGINT/SIGTERM's control with a progress display named `what` (on a
/// terminal, and not with `--json`), gone when it returns.
pub fn with_progress<T>(what: &str, json: bool, work: impl FnOnce(&Control, &Progress) -> T) -> T {
    let progress = Arc::new(Progress::default());
    let display = progress::ProgressDisplay::start(Arc::clone(&progress), what.into(), !json);
    let result = work(&signal::CONTROL, &progress);
    drop(display);
    result
}

/// True when the reader of stdout went away (`replay | head -c 100`): the command then ends
/// quietly (main), whatever it made of the rest.
pub fn stdout_gone() -> bool {
    crate::output::stdout_closed()
}

/// The metadata damage of a set, a line each, with what to do about it.
pub fn print_damage(damage: &[health::MetaDamage]) {
    for item in damage {
        outln!("  METADATA {item}");
    }
    if damage
        .iter()
        .any(|d| d.severity == health::Severity::Repairable)
    {
        outln!("  (nvrec repair rewrites the damaged copies from the good ones)");
    }
    let mut unreadable: Vec<u16> = damage
        .iter()
        .filter(|d| d.severity == health::Severity::Unreadable)
        .filter_map(|d| d.member_index)
        .collect();
    unreadable.dedup();
    for member in unreadable {
        outln!(
            "  (member {member} has metadata it cannot read: nvrec repair writes nothing while \
             a copy it cannot read may be the newest; give repair the other targets to repair \
             the set without member {member}, or replace it)"
        );
    }
}
