//! Losses inside a recording of network records (loss records, packets read only in
//! part) and a network source's own counts of what it could not store, counted and told.

/// What `verify` found in the records of a recording of datagrams.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RecordCounts {
    pub datagrams: u64,
    pub truncated: u64,
    /// Datagrams the recording says were lost (loss records), and how many losses.
    pub dropped: u64,
    pub losses: u64,
    /// The same by cause, in the order first met.
    pub by_cause: Vec<CauseCount>,
}

/// Losses of one cause in a recording of records.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct CauseCount {
    pub cause: nvrec::layout::LossCause,
    pub losses: u64,
    /// Datagrams, frames or packets lost.
    pub count: u64,
    /// Their bytes, where known (0 where not).
    pub bytes: u64,
}

impl RecordCounts {
    /// Decodes every record of a payload; the first that does not decode is the error.
    pub fn count(
        &mut self,
        records: nvrec::layout::Walk<'_>,
    ) -> Result<(), nvrec::layout::LayoutError> {
        for record in records {
            match record? {
                nvrec::layout::Record::Packet(packet) => {
                    self.datagrams += 1;
                    self.truncated += u64::from(packet.is_truncated());
                }
                nvrec::layout::Record::Loss(loss) => self.loss(&loss),
            }
        }
        Ok(())
    }

    pub fn loss(&mut self, loss: &nvrec::layout::Loss) {
        self.dropped += loss.count;
        self.losses += 1;
        let at = match self.by_cause.iter().position(|c| c.cause == loss.cause) {
            Some(at) => at,
            None => {
                self.by_cause.push(CauseCount {
                    cause: loss.cause,
                    losses: 0,
                    count: 0,
                    bytes: 0,
                });
                self.by_cause.len() - 1
            }
        };
        let tally = &mut self.by_cause[at];
        tally.losses += 1;
        tally.count += loss.count;
        tally.bytes += loss.bytes;
    }

    pub fn text(&self) -> String {
        let mut text = format!(", {} records decoded", self.datagrams);
        if self.truncated > 0 {
            text.push_str(&format!(", {} truncated", self.truncated));
        }
        if self.dropped > 0 {
            text.push_str(&format!(", {} DROPPED in {}", self.dropped, self.causes()));
        }
        text
    }

    /// How many losses, and by cause.
    pub fn causes(&self) -> String {
        let causes: Vec<String> = self
            .by_cause
            .iter()
            .map(|c| format!("{} {} in {}", c.cause.name(), c.count, c.losses))
            .collect();
        format!("{} losses ({})", self.losses, causes.join(", "))
    }
}

/// What a network source took or was offered and the recording does not hold, beyond the
/// kernel's drops (which the recording marks), a line each.
pub fn network_loss_lines(counts: &nvrec::net::NetReport) -> Vec<String> {
    let mut lines = Vec::new();
    if counts.not_stored > 0 {
        lines.push(format!(
            "{}{} datagrams or frames ({} bytes) taken but not stored (the target filled, or \
             the recording ended, before their chunks were written)",
            if counts.not_stored_exact {
                ""
            } else {
                "at least "
            },
            counts.not_stored,
            counts.not_stored_bytes
        ));
    }
    if counts.unframed > 0 {
        lines.push(format!(
            "{} datagrams or frames received but not framed when the recording ended",
            counts.unframed
        ));
    }
    if counts.refused_connections > 0 {
        lines.push(format!(
            "{} TCP connections refused: every stream number (65536) was in use",
            counts.refused_connections
        ));
    }
    lines
}

/// A loss record (or a packet read only in part) as a problem to report.
pub fn loss_text(loss: &nvrec::layout::Loss) -> String {
    match loss.cause {
        nvrec::layout::LossCause::Partial => format!(
            "loss: a packet of {} bytes on stream {} read only in part (the chunk holding the \
             rest is missing, or the recording ends before it)",
            loss.bytes, loss.stream
        ),
        cause => format!(
            "loss: {} datagrams dropped on stream {} ({}) when recorded",
            loss.count,
            loss.stream,
            cause.name()
        ),
    }
}
