//! The flows of a stretch of a recording: for each key its Community ID, its first and last
//! time, its packets and bytes, and the runs of chunks its packets lie in, so that its
//! packets are read back from those chunks alone.

use super::community::CommunityId;
use super::expr::FlowExpr;
use super::key::{key_of_packet, FlowKey};
use crate::layout::Packet;
use std::collections::HashMap;

/// One flow (one direction of a connection: its key) in a [`FlowTable`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowEntry {
    pub key: FlowKey,
    /// The Community ID of an IP flow (both directions share it); None for other keys.
    pub community_id: Option<CommunityId>,
    /// The first and last packet's receive time, ns since the Unix epoch.
    pub first_ns: u64,
    pub last_ns: u64,
    pub packets: u64,
    /// The packets' lengths as received (before a capture cut them short).
    pub bytes: u64,
    /// The chunks its packets lie in: runs of (first sequence, count), ascending.
    pub chunks: Vec<(u64, u64)>,
}

impl FlowEntry {
    /// Adds the chunks `first..=last` to the runs, joining a run they touch.
    fn add_chunks(&mut self, first: u64, last: u64) {
        if let Some((start, count)) = self.chunks.last_mut() {
            let end = *start + *count;
            if first <= end && last >= *start {
                *count = (*count).max(last + 1 - *start);
                return;
            }
        }
        self.chunks.push((first, last + 1 - first));
    }

    /// The chunks it lies in.
    pub fn chunk_count(&self) -> u64 {
        self.chunks.iter().map(|(_, count)| count).sum()
    }
}

/// What flows are asked for: a Community ID (as a sensor's log names a connection: both
/// directions), or an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowQuery {
    CommunityId(CommunityId),
    Expr(FlowExpr),
}

impl FlowQuery {
    pub fn matches(&self, entry: &FlowEntry) -> bool {
        match self {
            FlowQuery::CommunityId(id) => entry.community_id == Some(*id),
            FlowQuery::Expr(expr) => expr.matches(&entry.key),
        }
    }

    /// Whether a packet keyed `key` is of the flows asked for, its Community ID taken with
    /// `seed`.
    pub fn matches_key(&self, key: &FlowKey, seed: u16) -> bool {
        match (self, key) {
            (FlowQuery::CommunityId(id), FlowKey::Ip(flow)) => CommunityId::of(flow, seed) == *id,
            (FlowQuery::CommunityId(_), _) => false,
            (FlowQuery::Expr(expr), key) => expr.matches(key),
        }
    }
}

/// The packets an export keeps: those of the flows `query` asks for (keyed as `find` keys
/// them, so that an export keeps the packets `find` counts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowFilter {
    pub query: FlowQuery,
    /// The Community ID seed.
    pub seed: u16,
}

impl FlowFilter {
    pub fn keeps(&self, packet: &Packet<'_>) -> bool {
        self.query.matches_key(&key_of_packet(packet), self.seed)
    }
}

/// The flows of the packets added, by key.
///
/// A recorder keys every packet it records into one (the flow index): the flows are kept in
/// a vector, found by key through a map of their places, and the last flow added to is
/// tried first, so that a burst of one flow's packets (a GSO send, a TCP window) costs no
/// lookup at all.
#[derive(Debug, Clone, Default)]
pub struct FlowTable {
    seed: u16,
    places: HashMap<FlowKey, u32, foldhash::fast::RandomState>,
    flows: Vec<FlowEntry>,
    /// The flow the last packet was added to.
    last: Option<(FlowKey, u32)>,
    packets: u64,
}

impl FlowTable {
    /// An empty table whose Community IDs take `seed` (0 unless the sensors were given one).
    pub fn new(seed: u16) -> FlowTable {
        FlowTable {
            seed,
            ..FlowTable::default()
        }
    }

    /// Adds a packet of `original_len` bytes received at `timestamp_ns`, lying in the chunks
    /// `first_sequence..=last_sequence` (more than one where it spans payloads). Packets are
    /// added in the order of their chunks.
    pub fn add(
        &mut self,
        key: FlowKey,
        timestamp_ns: u64,
        original_len: u32,
        (first_sequence, last_sequence): (u64, u64),
    ) {
        let place = self.place_of(key, timestamp_ns);
        let entry = &mut self.flows[place as usize];
        entry.first_ns = entry.first_ns.min(timestamp_ns);
        entry.last_ns = entry.last_ns.max(timestamp_ns);
        entry.packets += 1;
        entry.bytes += u64::from(original_len);
        entry.add_chunks(first_sequence, last_sequence.max(first_sequence));
        self.packets += 1;
    }

    /// Where the flow of `key` is kept, a new one (first seen at `timestamp_ns`) made.
    #[inline]
    fn place_of(&mut self, key: FlowKey, timestamp_ns: u64) -> u32 {
        if let Some((last, place)) = self.last {
            if last == key {
                return place;
            }
        }
        let next = self.flows.len() as u32;
        let place = *self.places.entry(key).or_insert(next);
        if place == next {
            self.flows.push(FlowEntry {
                key,
                community_id: match &key {
                    FlowKey::Ip(flow) => Some(CommunityId::of(flow, self.seed)),
                    _ => None,
                },
                first_ns: timestamp_ns,
                last_ns: timestamp_ns,
                packets: 0,
                bytes: 0,
                chunks: Vec::new(),
            });
        }
        self.last = Some((key, place));
        place
    }

    /// The first and the last packet's receive time, if it has any.
    pub fn times(&self) -> Option<(u64, u64)> {
        let first = self.flows.iter().map(|entry| entry.first_ns).min()?;
        let last = self.flows.iter().map(|entry| entry.last_ns).max()?;
        Some((first, last))
    }

    /// The seed its Community IDs take.
    pub fn seed(&self) -> u16 {
        self.seed
    }

    /// Packets added.
    pub fn packets(&self) -> u64 {
        self.packets
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// The flows `query` asks for, by their first packet's time (then by key).
    pub fn matching(&self, query: &FlowQuery) -> Vec<&FlowEntry> {
        let mut found = self.matching_all();
        found.retain(|entry| query.matches(entry));
        found
    }

    /// Every flow, by its first packet's time (then by key).
    pub fn matching_all(&self) -> Vec<&FlowEntry> {
        let mut found: Vec<&FlowEntry> = self.flows.iter().collect();
        found.sort_by_key(|entry| (entry.first_ns, entry.key));
        found
    }
}

#[cfg(test)]
mod tests {
    use super::super::key::{IpFlow, PROTO_TCP};
    use super::*;

    fn tcp(from: (&str, u16), to: (&str, u16)) -> FlowKey {
        FlowKey::Ip(IpFlow {
            source: from.0.parse().unwrap(),
            destination: to.0.parse().unwrap(),
            protocol: PROTO_TCP,
            ports: Some((from.1, to.1)),
            vlan: None,
        })
    }

    #[test]
    fn a_flow_counts_its_packets_and_joins_the_chunks_they_lie_in() {
        let mut table = FlowTable::new(0);
        let out = tcp(("10.0.0.1", 40000), ("10.0.0.2", 80));
        let back = tcp(("10.0.0.2", 80), ("10.0.0.1", 40000));
        table.add(out, 1_000, 100, (5, 5));
        table.add(back, 1_500, 1500, (5, 5));
        table.add(out, 2_000, 100, (5, 6)); // spans two chunks
        table.add(out, 3_000, 100, (7, 7)); // the next chunk: one run
        table.add(out, 9_000, 60, (20, 20)); // far on: a run of its own
        table.add(FlowKey::Unreadable, 9_500, 10, (20, 20));
        assert_eq!((table.len(), table.packets()), (3, 6));
        let query = FlowQuery::Expr(FlowExpr::parse("src host 10.0.0.1").unwrap());
        let found = table.matching(&query);
        assert_eq!(found.len(), 1);
        let flow = found[0];
        assert_eq!(
            (flow.first_ns, flow.last_ns, flow.packets, flow.bytes),
            (1_000, 9_000, 4, 360)
        );
        assert_eq!(flow.chunks, vec![(5, 3), (20, 1)]);
        assert_eq!(flow.chunk_count(), 4);
        // Both directions share a Community ID, and it finds both.
        let id = flow.community_id.unwrap();
        let both = table.matching(&FlowQuery::CommunityId(id));
        assert_eq!(both.len(), 2);
        assert_eq!((both[0].key, both[1].key), (out, back));
        assert!(
            table.matching(&FlowQuery::Expr(FlowExpr::parse("not ip").unwrap()))[0]
                .community_id
                .is_none()
        );
        // A query asks of a packet's key what it asks of a flow.
        for entry in table.matching_all() {
            for query in [
                FlowQuery::CommunityId(id),
                FlowQuery::Expr(FlowExpr::parse("src host 10.0.0.1").unwrap()),
            ] {
                assert_eq!(query.matches_key(&entry.key, 0), query.matches(entry));
            }
        }
    }
}
