//! The durable frontier: the writes in flight in stream order, how far from the first
//! every write has completed, and what the checkpoints built and made of it.

use super::*;

/// The frontier stage's state.
pub(super) struct Frontier {
    /// Writes not yet passed by the frontier, by flight number (stream order).
    pub(super) flights: InFlight<Flight>,
    pub(super) flight_limit: usize,
    /// The end of the run of completed writes from the recording's first: sequence,
    /// stream offset and the loss within it.
    pub(super) durable_sequence_end: u64,
    pub(super) durable_stream_bytes: u64,
    pub(super) durable_lost_bytes: u64,
    pub(super) checkpoint_generation: u64,
    /// The durable frontier the last checkpoint built claimed.
    pub(super) checkpointed_sequence_end: u64,
    pub(super) checkpoint_count: u64,
    pub(super) last_checkpoint: Instant,
    /// Set after a failure: the entry claims the frontier of completed writes, as recovery
    /// after a crash would find it.
    pub(super) claimed: Option<Claimed>,
    /// Members retired, and not flushed since, when the checkpoint being made was offered:
    /// its flush covers everything they wrote.
    pub(super) offered_flush: Vec<bool>,
    /// Members live when the checkpoint being made was offered (its metadata went to them).
    pub(super) offered_live: Vec<bool>,
    /// How many of each member's `completed_unflushed` there were when the checkpoint being
    /// made was offered (0 for a member it does not flush): what its flush covers.
    pub(super) offered_unflushed: Vec<usize>,
}

impl Frontier {
    /// A frontier at `sequence` (nothing in flight) after checkpoint `generation`.
    pub(super) fn new(
        flight_limit: usize,
        sequence: u64,
        generation: u64,
        now: Instant,
    ) -> Frontier {
        Frontier {
            flights: InFlight::with_capacity(flight_limit),
            flight_limit,
            durable_sequence_end: sequence,
            durable_stream_bytes: 0,
            durable_lost_bytes: 0,
            checkpoint_generation: generation,
            checkpointed_sequence_end: sequence,
            checkpoint_count: 0,
            last_checkpoint: now,
            claimed: None,
            offered_flush: Vec::new(),
            offered_live: Vec::new(),
            offered_unflushed: Vec::new(),
        }
    }
}
