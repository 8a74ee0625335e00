//! Counting what arrived against what was sent: loss, reordering, duplicates, damage.
//!
//! Each stream keeps a bitmap of the last [`WINDOW`] sequence numbers seen. A datagram whose
//! number is below the highest seen so far is reordered (its bit was clear) or a duplicate
//! (its bit was set); one further back than the window is counted as reordered, since it
//! can no longer be told apart. Loss is what never arrived: up to the highest number seen,
//! or up to the count the sender reports ([`Checker::report_expecting`]).

use crate::datagram::{Template, Verdict};
use std::collections::BTreeMap;

/// Sequence numbers remembered per stream for telling duplicates from reordering.
pub const WINDOW: u64 = 1 << 22;

#[derive(Debug, Clone)]
struct StreamState {
    seen: Vec<u64>,
    /// One past the highest sequence number seen.
    next: u64,
    unique: u64,
    reordered: u64,
    duplicates: u64,
}

impl StreamState {
    fn new() -> StreamState {
        StreamState {
            seen: vec![0u64; (WINDOW / 64) as usize],
            next: 0,
            unique: 0,
            reordered: 0,
            duplicates: 0,
        }
    }

    fn bit(sequence: u64) -> (usize, u64) {
        let slot = sequence % WINDOW;
        ((slot / 64) as usize, 1u64 << (slot % 64))
    }

    fn note(&mut self, sequence: u64) {
        if sequence >= self.next {
            // Forget the numbers that leave the window as it moves up.
            let forget_from = self.next.max(sequence.saturating_sub(WINDOW - 1));
            let forget = (sequence + 1 - forget_from).min(WINDOW);
            for at in forget_from..forget_from + forget {
                let (word, mask) = Self::bit(at);
                self.seen[word] &= !mask;
            }
            let (word, mask) = Self::bit(sequence);
            self.seen[word] |= mask;
            self.next = sequence + 1;
            self.unique += 1;
            return;
        }
        if sequence + WINDOW < self.next {
            self.reordered += 1;
            self.unique += 1;
            return;
        }
        let (word, mask) = Self::bit(sequence);
        if self.seen[word] & mask != 0 {
            self.duplicates += 1;
        } else {
            self.seen[word] |= mask;
            self.reordered += 1;
            self.unique += 1;
        }
    }
}

/// What arrived, per stream and in all.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckReport {
    /// Datagrams taken (every one, duplicates and damaged included).
    pub datagrams: u64,
    pub bytes: u64,
    /// Distinct sequence numbers seen.
    pub unique: u64,
    /// Never seen: up to the highest number seen, or to the count expected.
    pub lost: u64,
    pub reordered: u64,
    pub duplicates: u64,
    /// The header read, the pattern did not match.
    pub damaged: u64,
    /// Not datagrams of this generator.
    pub foreign: u64,
    /// Per stream: (stream, unique, one past the highest sequence number seen).
    pub streams: Vec<StreamSummary>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StreamSummary {
    pub stream: u32,
    pub unique: u64,
    pub next_sequence: u64,
    pub reordered: u64,
    pub duplicates: u64,
}

impl CheckReport {
    /// Nothing lost, reordered, duplicated, damaged or foreign.
    pub fn is_perfect(&self) -> bool {
        self.lost == 0
            && self.reordered == 0
            && self.duplicates == 0
            && self.damaged == 0
            && self.foreign == 0
    }
}

/// Checks datagrams one by one.
pub struct Checker {
    template: Template,
    streams: BTreeMap<u32, StreamState>,
    datagrams: u64,
    bytes: u64,
    damaged: u64,
    foreign: u64,
}

impl Default for Checker {
    fn default() -> Self {
        Checker::new()
    }
}

impl Checker {
    pub fn new() -> Checker {
        Checker {
            template: Template::new(),
            streams: BTreeMap::new(),
            datagrams: 0,
            bytes: 0,
            damaged: 0,
            foreign: 0,
        }
    }

    /// Takes one datagram.
    pub fn datagram(&mut self, data: &[u8]) {
        self.datagrams += 1;
        self.bytes += data.len() as u64;
        match self.template.check(data) {
            Verdict::Intact(header) => self
                .streams
                .entry(header.stream)
                .or_insert_with(StreamState::new)
                .note(header.sequence),
            Verdict::Damaged(_) => self.damaged += 1,
            Verdict::Foreign => self.foreign += 1,
        }
    }

    /// Takes a run of datagrams of `len` bytes each, as a replay of a recording writes
    /// them (a short tail is one datagram, cut).
    pub fn fixed_size(&mut self, data: &[u8], len: usize) {
        for datagram in data.chunks(len) {
            self.datagram(datagram);
        }
    }

    /// Datagrams taken so far.
    pub fn datagrams(&self) -> u64 {
        self.datagrams
    }

    /// Distinct datagrams taken so far, over all streams.
    pub fn unique(&self) -> u64 {
        self.streams.values().map(|s| s.unique).sum()
    }

    /// The report, loss counted up to the highest number seen in each stream.
    pub fn report(&self) -> CheckReport {
        self.report_with(|state| state.next)
    }

    /// The report, loss counted up to `expected` per stream (what the sender says it sent);
    /// when fewer than `stream_count` streams were seen, each missing one counts `expected`
    /// lost.
    pub fn report_expecting(&self, stream_count: u32, expected: u64) -> CheckReport {
        let mut report = self.report_with(|state| state.next.max(expected));
        let silent = (stream_count as usize).saturating_sub(self.streams.len()) as u64;
        report.lost += silent * expected;
        report
    }

    fn report_with(&self, end: impl Fn(&StreamState) -> u64) -> CheckReport {
        let mut report = CheckReport {
            datagrams: self.datagrams,
            bytes: self.bytes,
            damaged: self.damaged,
            foreign: self.foreign,
            ..CheckReport::default()
        };
        for (&stream, state) in &self.streams {
            report.unique += state.unique;
            report.lost += end(state).saturating_sub(state.unique);
            report.reordered += state.reordered;
            report.duplicates += state.duplicates;
            report.streams.push(StreamSummary {
                stream,
                unique: state.unique,
                next_sequence: state.next,
                reordered: state.reordered,
                duplicates: state.duplicates,
            });
        }
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::datagram::make;

    fn checked(order: &[u64]) -> CheckReport {
        let mut checker = Checker::new();
        for &sequence in order {
            checker.datagram(&make(0, sequence, 64));
        }
        checker.report()
    }

    #[test]
    fn loss_reordering_and_duplicates_are_told_apart() {
        let cases: &[(&[u64], u64, u64, u64)] = &[
            // (order, lost, reordered, duplicates)
            (&[0, 1, 2, 3], 0, 0, 0),
            (&[0, 1, 3, 4], 1, 0, 0),
            (&[0, 2, 1, 3], 0, 1, 0),
            (&[0, 1, 1, 2], 0, 0, 1),
            (&[0, 3, 1, 1, 2], 0, 2, 1),
            (&[5, 6], 5, 0, 0),
            (&[0, 10, 3, 10], 8, 1, 1),
        ];
        for &(order, lost, reordered, duplicates) in cases {
            let report = checked(order);
            assert_eq!(
                (report.lost, report.reordered, report.duplicates),
                (lost, reordered, duplicates),
                "{order:?}"
            );
            assert_eq!(report.datagrams, order.len() as u64);
        }
        assert!(checked(&[0, 1, 2]).is_perfect());
    }

    #[test]
    fn a_jump_beyond_the_window_forgets_what_it_passed() {
        let report = checked(&[0, 1, 2 + 3 * WINDOW, 2 + 3 * WINDOW, 1]);
        assert_eq!(report.duplicates, 1);
        // 1 lies far behind the window now: counted reordered, not duplicate.
        assert_eq!(report.reordered, 1);
        assert_eq!(report.unique, 4);
    }

    #[test]
    fn the_expected_count_finds_loss_at_the_end_and_in_silent_streams() {
        let mut checker = Checker::new();
        for sequence in 0..8 {
            checker.datagram(&make(0, sequence, 100));
        }
        let report = checker.report_expecting(2, 10);
        assert_eq!(report.lost, 2 + 10);
        assert_eq!(report.streams.len(), 1);
        let mut damaged = make(0, 8, 100);
        damaged[50] ^= 1;
        checker.datagram(&damaged);
        checker.datagram(b"not ours");
        let report = checker.report();
        assert_eq!((report.damaged, report.foreign, report.lost), (1, 1, 0));
    }

    #[test]
    fn fixed_size_runs_are_cut_into_datagrams() {
        let mut data = Vec::new();
        for sequence in 0..5 {
            data.extend(make(2, sequence, 300));
        }
        let mut checker = Checker::new();
        checker.fixed_size(&data, 300);
        let report = checker.report();
        assert!(report.is_perfect(), "{report:?}");
        assert_eq!(report.unique, 5);
        assert_eq!(report.streams[0].stream, 2);
    }
}
