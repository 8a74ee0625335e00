//! Where a time window starts on a member, found by binary search over its chunk headers.
//!
//! Chunk timestamps rise with the sequence, and on a member the sequence rises in the order
//! its slots are read (a linear span from its start; a ring's lap from its write point).
//! So the first chunk that began at or after a time is found in about log2(slots) header
//! reads, whatever the recording's size. Slots that hold none of the recording's own chunks
//! lie between them: blank ones (a ring's trim ahead of its write point, the slots a lap of
//! whole writes leaves unused), older recordings' chunks, and redirected chunks (a retired
//! member's writes, sent here out of order and read apart). A probe steps over a few of
//! them to the next chunk of its own; where it meets more than [`PROBE_SLOTS`] in a row, or
//! a header that does not decode, the search gives up and the caller reads from the start
//! of the span: never a window that skips a chunk it should hold.
//!
//! The search is pure: what a slot holds comes from the caller ([`Held`]), so the tests
//! run it over plain vectors.

/// Slots of other content a probe steps over before the search gives up.
pub const PROBE_SLOTS: u64 = 64;

/// What one slot holds, as the search needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// A chunk of the recording's own on this member (not redirected here).
    /// A chunk of the recording, with its time on the recording's timeline
    /// (`ChunkHeader::time_ns`).
    Own { sequence: u64, timestamp_ns: u64 },
    /// Something else that decodes or nothing at all: blank, another recording or set, a
    /// redirected chunk.
    Other,
    /// A header that does not decode or a read that failed: what it held is unknown.
    Unknown,
    /// A slot the recording's metadata gives to other chunks (a retired member's run
    /// redirected here), known without a read: stepped over, not counted as a probe's.
    Elsewhere,
}

/// Where the window starts on one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At `position` of the runs (slot `slot`), whose chunk has `sequence`.
    At {
        position: u64,
        slot: u64,
        sequence: u64,
    },
    /// No chunk of the member's runs began at or after the time.
    Past,
    /// Somewhere from `position` on, in slots the search does not look at (a retired
    /// member's failed writes): read from there; `low` is the lowest sequence there in the
    /// window, if any (found by the caller).
    Within { position: u64, low: Option<u64> },
    /// The search could not tell (see the module doc).
    GaveUp,
}

/// The slot at `position` of `runs` ((first, count) pairs read in order).
pub fn slot_at(runs: &[(u64, u64)], position: u64) -> Option<u64> {
    let mut left = position;
    for &(first, count) in runs {
        if left < count {
            return Some(first + left);
        }
        left -= count;
    }
    None
}

/// How many slots `runs` hold.
pub fn run_slots(runs: &[(u64, u64)]) -> u64 {
    runs.iter().map(|run| run.1).sum()
}

/// `runs` from `position` on.
pub fn runs_from(runs: &[(u64, u64)], position: u64) -> Vec<(u64, u64)> {
    let mut left = position;
    let mut kept = Vec::with_capacity(runs.len());
    for &(first, count) in runs {
        if left >= count {
            left -= count;
            continue;
        }
        kept.push((first + left, count - left));
        left = 0;
    }
    kept
}

/// `runs` up to the slot `end` (the part of them read before it).
pub fn runs_before_slot(runs: &[(u64, u64)], end: u64) -> Vec<(u64, u64)> {
    let mut kept = Vec::with_capacity(runs.len());
    for &(first, count) in runs {
        if first >= end {
            break;
        }
        kept.push((first, count.min(end - first)));
        if first + count >= end {
            break;
        }
    }
    kept
}

/// The first own chunk at `position` of `runs` or after it: (position, sequence,
/// timestamp). `Ok(None)` when none follows; `Err(())` where the probe cannot tell.
fn probe(
    runs: &[(u64, u64)],
    position: u64,
    held: &mut impl FnMut(u64) -> Held,
) -> Result<Option<(u64, u64, u64)>, ()> {
    let total = run_slots(runs);
    let (mut at, mut looked) = (position, 0);
    while at < total {
        if looked > PROBE_SLOTS {
            return Err(());
        }
        let slot = slot_at(runs, at).expect("a position inside the runs");
        match held(slot) {
            Held::Own {
                sequence,
                timestamp_ns,
            } => return Ok(Some((at, sequence, timestamp_ns))),
            Held::Other => looked += 1,
            Held::Elsewhere => {}
            Held::Unknown => return Err(()),
        }
        at += 1;
    }
    Ok(None)
}

/// The first own chunk of `runs` that began at `from_ns` or later.
pub fn first_at_or_after(
    runs: &[(u64, u64)],
    from_ns: u64,
    mut held: impl FnMut(u64) -> Held,
) -> Start {
    // Invariant: every own chunk before `low` began before `from_ns`; the first own chunk
    // at or after `high` (if any) began at `from_ns` or later.
    let (mut low, mut high) = (0, run_slots(runs));
    while low < high {
        let middle = low + (high - low) / 2;
        match probe(runs, middle, &mut held) {
            Err(()) => return Start::GaveUp,
            Ok(Some((at, _, timestamp_ns))) if timestamp_ns < from_ns => low = at + 1,
            Ok(_) => high = middle,
        }
    }
    first_own_from(runs, low, &mut held)
}

/// The own chunk before a position of the runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    /// At `position` of the runs, whose chunk has `sequence`.
    At { position: u64, sequence: u64 },
    /// None of the recording's own chunks lies before it.
    Nothing,
    /// A header that does not decode, or more than [`PROBE_SLOTS`] other slots in a row.
    GaveUp,
}

/// The last own chunk of `runs` before `position`. A window begins at the chunk that was
/// filling at its start, the one before the first that began at or after it: records are
/// taken by their own time, and those that arrived after the start lie in that chunk too.
pub fn last_own_before(
    runs: &[(u64, u64)],
    position: u64,
    mut held: impl FnMut(u64) -> Held,
) -> Before {
    let (mut at, mut looked) = (position.min(run_slots(runs)), 0);
    while at > 0 {
        at -= 1;
        if looked > PROBE_SLOTS {
            return Before::GaveUp;
        }
        let slot = slot_at(runs, at).expect("a position inside the runs");
        match held(slot) {
            Held::Own { sequence, .. } => {
                return Before::At {
                    position: at,
                    sequence,
                }
            }
            Held::Other => looked += 1,
            Held::Elsewhere => {}
            Held::Unknown => return Before::GaveUp,
        }
    }
    Before::Nothing
}

/// The first own chunk of `runs` at all (the oldest a ring member still holds).
pub fn first_own(runs: &[(u64, u64)], mut held: impl FnMut(u64) -> Held) -> Start {
    first_own_from(runs, 0, &mut held)
}

/// The first own chunk of `runs` at `position` or after it.
fn first_own_from(runs: &[(u64, u64)], position: u64, held: &mut impl FnMut(u64) -> Held) -> Start {
    match probe(runs, position, held) {
        Err(()) => Start::GaveUp,
        Ok(None) => Start::Past,
        Ok(Some((position, sequence, _))) => Start::At {
            position,
            slot: slot_at(runs, position).expect("a position inside the runs"),
            sequence,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A member of `slots` slots; `own` gives (slot, sequence) of its own chunks, each
    /// stamped 10 ns a sequence; every other slot holds `other`.
    fn member(slots: u64, own: &[(u64, u64)], other: Held) -> Vec<Held> {
        let mut held = vec![other; slots as usize];
        for &(slot, sequence) in own {
            held[slot as usize] = Held::Own {
                sequence,
                timestamp_ns: sequence * 10,
            };
        }
        held
    }

    fn find(held: &[Held], runs: &[(u64, u64)], from_ns: u64) -> Start {
        first_at_or_after(runs, from_ns, |slot| held[slot as usize])
    }

    /// The answer by reading every slot in order.
    fn by_reading(held: &[Held], runs: &[(u64, u64)], from_ns: u64) -> Start {
        for position in 0..run_slots(runs) {
            let slot = slot_at(runs, position).unwrap();
            if let Held::Own {
                sequence,
                timestamp_ns,
            } = held[slot as usize]
            {
                if timestamp_ns >= from_ns {
                    return Start::At {
                        position,
                        slot,
                        sequence,
                    };
                }
            }
        }
        Start::Past
    }

    #[test]
    fn a_linear_span_is_searched_to_the_chunk_a_read_would_find() {
        let own: Vec<(u64, u64)> = (0..100).map(|s| (s, 1000 + s)).collect();
        let held = member(100, &own, Held::Other);
        let runs = [(0, 100)];
        for from_ns in [0, 10_000, 10_005, 10_010, 10_990, 10_991, 20_000] {
            assert_eq!(
                find(&held, &runs, from_ns),
                by_reading(&held, &runs, from_ns),
                "{from_ns}"
            );
        }
        assert_eq!(find(&held, &runs, 20_000), Start::Past);
    }

    #[test]
    fn a_wrapped_ring_is_searched_in_lap_order_over_trimmed_and_unused_slots() {
        // 200 slots, write point at 60: slots 60..70 trimmed (blank), 70..197 the older
        // lap, 197..200 unused at the end of the member, 0..60 the newest lap.
        let own: Vec<(u64, u64)> = (70..197).chain(0..60).zip(500..).collect();
        let held = member(200, &own, Held::Other);
        let runs = [(60, 140), (0, 60)];
        for from_ns in (4_900..7_000).step_by(37) {
            assert_eq!(
                find(&held, &runs, from_ns),
                by_reading(&held, &runs, from_ns),
                "{from_ns}"
            );
        }
        assert_eq!(
            first_own(&runs, |slot| held[slot as usize]),
            Start::At {
                position: 10,
                slot: 70,
                sequence: 500
            }
        );
    }

    #[test]
    fn redirected_chunks_among_its_own_are_stepped_over() {
        let mut own: Vec<(u64, u64)> = (0..50).map(|s| (s, s)).collect();
        own.extend((60..100).map(|s| (s, s - 10)));
        let held = member(100, &own, Held::Other); // 50..60: a redirected run.
        let runs = [(0, 100)];
        for from_ns in (0..1000).step_by(7) {
            assert_eq!(
                find(&held, &runs, from_ns),
                by_reading(&held, &runs, from_ns)
            );
        }
        // A run the metadata names is stepped over however long it is.
        let mut own: Vec<(u64, u64)> = (0..50).map(|s| (s, s)).collect();
        own.extend((500..600).map(|s| (s, s - 450)));
        let mut held = member(600, &own, Held::Other);
        held[50..500].fill(Held::Elsewhere);
        for from_ns in (0..1500).step_by(11) {
            assert_eq!(
                find(&held, &[(0, 600)], from_ns),
                by_reading(&held, &[(0, 600)], from_ns)
            );
        }
    }

    #[test]
    fn it_gives_up_where_it_cannot_tell_never_guesses() {
        let own: Vec<(u64, u64)> = (0..100).map(|s| (s, s)).collect();
        // A long stretch of other slots in the middle of the runs.
        let mut held = member(400, &own, Held::Other);
        for (slot, sequence) in (300..400).zip(100..) {
            held[slot as usize] = Held::Own {
                sequence,
                timestamp_ns: sequence * 10,
            };
        }
        assert_eq!(find(&held, &[(0, 400)], 1_500), Start::GaveUp);
        let mut torn = member(100, &own, Held::Other);
        torn[50] = Held::Unknown;
        assert_eq!(find(&torn, &[(0, 100)], 500), Start::GaveUp);
    }

    #[test]
    fn the_chunk_before_a_position_is_found_back_over_other_slots_or_not_guessed() {
        let runs = [(60, 140), (0, 60)];
        let own: Vec<(u64, u64)> = (70..197).chain(0..60).zip(500..).collect();
        let held = member(200, &own, Held::Other);
        let before = |position| last_own_before(&runs, position, |slot| held[slot as usize]);
        let at = |position, sequence| Before::At { position, sequence };
        // Position 140 is slot 0 (sequence 627); before it, over the unused 197..200.
        assert_eq!(before(140), at(136, 626));
        assert_eq!(before(11), at(10, 500));
        assert_eq!(
            before(10),
            Before::Nothing,
            "only trimmed slots before the oldest"
        );
        assert_eq!(before(200), at(199, 686), "the end: the newest");
        let mut torn = held.clone();
        torn[196] = Held::Unknown;
        assert_eq!(
            last_own_before(&runs, 140, |slot| torn[slot as usize]),
            Before::GaveUp
        );
        let mut far = member(300, &[(0, 1), (200, 2)], Held::Other);
        assert_eq!(
            last_own_before(&[(0, 300)], 200, |slot| far[slot as usize]),
            Before::GaveUp,
            "too many other slots: not guessed"
        );
        far[1..200].fill(Held::Elsewhere);
        assert_eq!(
            last_own_before(&[(0, 300)], 200, |slot| far[slot as usize]),
            at(0, 1),
            "a redirected run is stepped over"
        );
    }

    #[test]
    fn runs_from_a_position_keep_the_rest_in_order() {
        let runs = [(60, 140), (0, 60)];
        assert_eq!(runs_from(&runs, 0), vec![(60, 140), (0, 60)]);
        assert_eq!(runs_from(&runs, 139), vec![(199, 1), (0, 60)]);
        assert_eq!(runs_from(&runs, 140), vec![(0, 60)]);
        assert_eq!(runs_from(&runs, 150), vec![(10, 50)]);
        assert_eq!(runs_from(&runs, 200), Vec::<(u64, u64)>::new());
        assert_eq!(slot_at(&runs, 145), Some(5));
        assert_eq!(runs_before_slot(&[(10, 100)], 50), vec![(10, 40)]);
        assert_eq!(runs_before_slot(&[(10, 100)], 500), vec![(10, 100)]);
        assert_eq!(runs_before_slot(&[(10, 100)], 5), Vec::<(u64, u64)>::new());
        assert_eq!(slot_at(&runs, 200), None);
    }
}
