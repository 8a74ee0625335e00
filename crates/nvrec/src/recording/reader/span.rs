//! What of a member a read may touch: the entry's span cut to the member's data slots, and
//! the slots to read cut to what its target holds. A span or a superblock that claims more
//! (damaged, forged, or a target cut short) is reported once and never read past.

use super::Damage;
use crate::layout::MemberSpan;
use crate::recording::volume::{Member, VolumeSet};
use std::collections::VecDeque;

/// The part of member `index`'s span that lies within its `slot_count` data slots. A span
/// that the entry says goes further (a damaged or forged entry) is reported, and never read
/// or walked past the member's last slot.
pub(super) fn clamp_span(
    set: &VolumeSet,
    index: u16,
    span: MemberSpan,
    slot_count: u64,
    damages: &mut Vec<Damage>,
) -> MemberSpan {
    let clamped = within(span, slot_count);
    if clamped != span {
        damages.push(Damage::at(
            set,
            index,
            span.end_slot_index.max(span.start_slot_index),
            None,
            format!(
                "the entry's span of this member, slots {}..{}, goes past its {slot_count} data \
                 slots: read up to slot {slot_count}",
                span.start_slot_index, span.end_slot_index
            ),
        ));
    }
    clamped
}

/// `span` within `slot_count` slots.
fn within(span: MemberSpan, slot_count: u64) -> MemberSpan {
    MemberSpan {
        start_slot_index: span.start_slot_index.min(slot_count),
        end_slot_index: span.end_slot_index.min(slot_count),
    }
}

/// Drops from `runs` the slots that lie past the end of the member's target (a target cut
/// short, or a superblock that claims more than the target holds): they are reported once,
/// never read, so that the slots read stay bounded by what the target holds.
pub(super) fn cut_to_target(
    set: &VolumeSet,
    member: &Member,
    runs: &mut VecDeque<(u64, u64)>,
    damages: &mut Vec<Damage>,
) {
    let layout = member.layout();
    let chunk = u64::from(layout.chunk_size_bytes);
    let held = member
        .disk
        .capacity_bytes()
        .saturating_sub(layout.data_offset_bytes)
        / chunk;
    if held >= layout.data_slot_count {
        return;
    }
    let dropped = cut_runs(runs, held);
    if dropped > 0 {
        damages.push(Damage::at(
            set,
            member.index(),
            held,
            None,
            format!(
                "the target ends at slot {held} ({} bytes, the volume was {}): {dropped} slots \
                 of this recording past it are lost",
                member.disk.capacity_bytes(),
                layout.volume_size_bytes
            ),
        ));
    }
}

/// Cuts each run of slots (first, count) to end by slot `held`, dropping the runs left
/// empty; returns how many slots were cut.
fn cut_runs(runs: &mut VecDeque<(u64, u64)>, held: u64) -> u64 {
    let mut dropped = 0u64;
    for run in runs.iter_mut() {
        let end = run.0.saturating_add(run.1);
        let kept_end = end.min(held).max(run.0);
        dropped += end - kept_end;
        run.1 = kept_end - run.0;
    }
    runs.retain(|run| run.1 > 0);
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::span_of as span;

    #[test]
    fn a_span_past_the_member_ends_at_its_last_slot() {
        assert_eq!(within(span(3, 90), 100), span(3, 90));
        assert_eq!(within(span(3, 900), 100), span(3, 100));
        assert_eq!(within(span(500, u64::MAX), 100), span(100, 100));
    }

    #[test]
    fn runs_past_the_target_are_cut_counted_and_dropped() {
        let mut runs: VecDeque<(u64, u64)> = [(0, 10), (40, 20), (70, 5), (u64::MAX - 1, 9)]
            .into_iter()
            .collect();
        let dropped = cut_runs(&mut runs, 50);
        assert_eq!(runs, VecDeque::from([(0, 10), (40, 10)]));
        // 10 of the second run, the third whole, the last as far as 2^64.
        assert_eq!(dropped, 10 + 5 + 1);
        let mut held = VecDeque::from([(0, 10)]);
        assert_eq!(cut_runs(&mut held, 10), 0);
        assert_eq!(held, VecDeque::from([(0, 10)]));
    }
}
