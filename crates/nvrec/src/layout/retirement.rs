//! Retirements: members that stopped taking writes during a recording, and where the
//! chunks they had not completed were written instead. Checkpoints and recording entries
//! carry the table (format 1.1; see `docs/FORMAT.md`, "Retirement record").

use super::codec::{get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use super::error::{LayoutError, Structure};

/// Retirements one recording may have: beyond this many failed members, the recording
/// stops instead.
pub const RETIREMENTS_MAX: usize = 16;
/// Bytes of one retirement record.
pub const RETIREMENT_SIZE_BYTES: usize = 64;

/// Why a member was retired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RetirementCause {
    /// A write failed (EIO and the like).
    WriteFailed,
    /// A write found the target full (ENOSPC).
    TargetFull,
    /// A write did not complete within the member timeout.
    Timeout,
    /// A flush failed (format 1.8): what the member completed since its last good flush
    /// was never confirmed durable. On disk: cause 1 (write failed), which a 1.7 reader
    /// reads, with `cause_detail` 1 in bytes reserved before.
    FlushFailed,
}

impl RetirementCause {
    /// The on-disk code, and the detail (1.8) that tells a flush from a write.
    pub const fn code(self) -> (u16, u16) {
        match self {
            RetirementCause::WriteFailed => (1, 0),
            RetirementCause::TargetFull => (2, 0),
            RetirementCause::Timeout => (3, 0),
            RetirementCause::FlushFailed => (1, DETAIL_FLUSH),
        }
    }

    /// The cause with this on-disk code and detail (an unknown detail reads as its code).
    pub const fn from_code(code: u16, detail: u16) -> Option<Self> {
        match (code, detail) {
            (1, DETAIL_FLUSH) => Some(RetirementCause::FlushFailed),
            (1, _) => Some(RetirementCause::WriteFailed),
            (2, _) => Some(RetirementCause::TargetFull),
            (3, _) => Some(RetirementCause::Timeout),
            _ => None,
        }
    }

    pub const fn text(self) -> &'static str {
        match self {
            RetirementCause::WriteFailed => "write failed",
            RetirementCause::TargetFull => "target full",
            RetirementCause::Timeout => "no completion within the member timeout",
            RetirementCause::FlushFailed => "flush failed",
        }
    }
}

/// One member retired during a recording.
///
/// Its chunks with sequence numbers below `first_sequence` completed on it and stay there;
/// the chunks it had been given from `first_sequence` on and had not completed were
/// written again, in sequence order, to `redirect_slot_count` consecutive slots of member
/// `redirect_member` starting at `redirect_first_slot` (going on at slot 0 after slot
/// `redirect_lap_slots - 1`). Those redirected chunks carry
/// [`ChunkFlags::REDIRECTED`](super::ChunkFlags::REDIRECTED) and sequence numbers lower than
/// the chunks before them on that member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retirement {
    pub member_index: u16,
    pub cause: RetirementCause,
    /// The OS error number, 0 when there was none (a timeout).
    pub errno: i32,
    /// When the member was retired: nanoseconds since the Unix epoch (UTC).
    pub retired_ns: u64,
    /// Where the stream stood at the member's first chunk not completed (or, when none
    /// was outstanding, at the next chunk to be written).
    pub stream_offset_bytes: u64,
    /// The member's first chunk not completed (or the next sequence, when none was).
    pub first_sequence: u64,
    pub redirect_member: u16,
    pub redirect_slot_count: u32,
    pub redirect_first_slot: u64,
    pub redirect_lap_slots: u64,
    /// The retired member's slot of its first chunk not completed. From there to the end
    /// of its span, only chunks that completed there and were not redirected belong to the
    /// recording; the other slots hold failed writes or leftovers, which are not damage.
    pub retired_first_slot: u64,
}

/// `cause_detail` (format 1.8) of a write-failed cause: the failure was a flush's.
const DETAIL_FLUSH: u16 = 1;

mod off {
    pub const MEMBER_INDEX: usize = 0;
    pub const CAUSE: usize = 2;
    pub const ERRNO: usize = 4;
    pub const RETIRED_NS: usize = 8;
    pub const STREAM_OFFSET: usize = 16;
    pub const FIRST_SEQUENCE: usize = 24;
    pub const REDIRECT_MEMBER: usize = 32;
    /// 1.8: what kind of failure the cause was (`DETAIL_FLUSH`); zero before.
    pub const CAUSE_DETAIL: usize = 34;
    pub const REDIRECT_SLOT_COUNT: usize = 36;
    pub const REDIRECT_FIRST_SLOT: usize = 40;
    pub const REDIRECT_LAP_SLOTS: usize = 48;
    pub const RETIRED_FIRST_SLOT: usize = 56;
}

impl Retirement {
    /// The slots of the redirect member that hold the redirected chunks, in order.
    pub fn redirect_slots(&self) -> impl Iterator<Item = u64> + '_ {
        // In u128: a lap near 2^64 (decoded from disk) must not overflow.
        let lap = u128::from(self.redirect_lap_slots.max(1));
        let first = u128::from(self.redirect_first_slot) % lap;
        (0..u64::from(self.redirect_slot_count))
            .map(move |i| ((first + u128::from(i)) % lap) as u64)
    }

    fn validate(&self, structure: Structure, member_count: usize) -> Result<(), LayoutError> {
        let bad = |field, reason: String| Err(LayoutError::invalid(structure, field, reason));
        if usize::from(self.member_index) >= member_count {
            return bad("retirement member", format!("{}", self.member_index));
        }
        if usize::from(self.redirect_member) >= member_count && self.redirect_slot_count > 0 {
            return bad(
                "retirement redirect member",
                format!("{}", self.redirect_member),
            );
        }
        if self.redirect_slot_count > 0 && self.redirect_lap_slots == 0 {
            return bad("retirement redirect lap", "is 0".into());
        }
        Ok(())
    }

    fn encode_into(&self, b: &mut [u8], at: usize) {
        put_u16(b, at + off::MEMBER_INDEX, self.member_index);
        let (code, detail) = self.cause.code();
        put_u16(b, at + off::CAUSE, code);
        put_u16(b, at + off::CAUSE_DETAIL, detail);
        put_u32(b, at + off::ERRNO, self.errno as u32);
        put_u64(b, at + off::RETIRED_NS, self.retired_ns);
        put_u64(b, at + off::STREAM_OFFSET, self.stream_offset_bytes);
        put_u64(b, at + off::FIRST_SEQUENCE, self.first_sequence);
        put_u16(b, at + off::REDIRECT_MEMBER, self.redirect_member);
        put_u32(b, at + off::REDIRECT_SLOT_COUNT, self.redirect_slot_count);
        put_u64(b, at + off::REDIRECT_FIRST_SLOT, self.redirect_first_slot);
        put_u64(b, at + off::REDIRECT_LAP_SLOTS, self.redirect_lap_slots);
        put_u64(b, at + off::RETIRED_FIRST_SLOT, self.retired_first_slot);
    }

    fn decode_from(structure: Structure, b: &[u8], at: usize) -> Result<Self, LayoutError> {
        let code = get_u16(b, at + off::CAUSE);
        let detail = get_u16(b, at + off::CAUSE_DETAIL);
        let cause = RetirementCause::from_code(code, detail).ok_or_else(|| {
            LayoutError::invalid(
                structure,
                "retirement cause",
                format!("unknown code {code}"),
            )
        })?;
        Ok(Retirement {
            member_index: get_u16(b, at + off::MEMBER_INDEX),
            cause,
            errno: get_u32(b, at + off::ERRNO) as i32,
            retired_ns: get_u64(b, at + off::RETIRED_NS),
            stream_offset_bytes: get_u64(b, at + off::STREAM_OFFSET),
            first_sequence: get_u64(b, at + off::FIRST_SEQUENCE),
            redirect_member: get_u16(b, at + off::REDIRECT_MEMBER),
            redirect_slot_count: get_u32(b, at + off::REDIRECT_SLOT_COUNT),
            redirect_first_slot: get_u64(b, at + off::REDIRECT_FIRST_SLOT),
            redirect_lap_slots: get_u64(b, at + off::REDIRECT_LAP_SLOTS),
            retired_first_slot: get_u64(b, at + off::RETIRED_FIRST_SLOT),
        })
    }
}

/// Checks a retirement table against the structure's member count.
pub(crate) fn validate_table(
    structure: Structure,
    table: &[Retirement],
    member_count: usize,
) -> Result<(), LayoutError> {
    if table.len() > RETIREMENTS_MAX {
        return Err(LayoutError::invalid(
            structure,
            "retirement_count",
            format!("{} exceeds {RETIREMENTS_MAX}", table.len()),
        ));
    }
    table
        .iter()
        .try_for_each(|r| r.validate(structure, member_count))
}

/// Writes the table: its count as a u16 at `count_at`, the records from `records_at`.
pub(crate) fn encode_table(b: &mut [u8], count_at: usize, records_at: usize, table: &[Retirement]) {
    put_u16(b, count_at, table.len().min(RETIREMENTS_MAX) as u16);
    for (i, retirement) in table.iter().take(RETIREMENTS_MAX).enumerate() {
        retirement.encode_into(b, records_at + i * RETIREMENT_SIZE_BYTES);
    }
}

/// Reads the table written by [`encode_table`] (a 1.0 structure has a count of 0 there).
pub(crate) fn decode_table(
    structure: Structure,
    b: &[u8],
    count_at: usize,
    records_at: usize,
) -> Result<Vec<Retirement>, LayoutError> {
    let count = usize::from(get_u16(b, count_at));
    if count > RETIREMENTS_MAX {
        return Err(LayoutError::invalid(
            structure,
            "retirement_count",
            format!("{count} exceeds {RETIREMENTS_MAX}"),
        ));
    }
    (0..count)
        .map(|i| Retirement::decode_from(structure, b, records_at + i * RETIREMENT_SIZE_BYTES))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirected_slots_wrap_at_the_lap_even_near_the_top_of_u64() {
        let retirement = Retirement {
            member_index: 0,
            cause: RetirementCause::WriteFailed,
            errno: 5,
            retired_ns: 1,
            stream_offset_bytes: 0,
            first_sequence: 0,
            redirect_member: 1,
            redirect_slot_count: 3,
            redirect_first_slot: u64::MAX - 1,
            redirect_lap_slots: u64::MAX,
            retired_first_slot: 0,
        };
        let slots: Vec<u64> = retirement.redirect_slots().collect();
        assert_eq!(slots, [u64::MAX - 1, 0, 1]);
        let small = Retirement {
            redirect_first_slot: 6,
            redirect_lap_slots: 8,
            ..retirement
        };
        assert_eq!(small.redirect_slots().collect::<Vec<_>>(), [6, 7, 0]);
    }

    /// A failed flush (1.8) is written as a failed write with its detail in bytes a 1.7
    /// reader left reserved: such a reader reads it as a failed write, this one as what it
    /// was; every cause round-trips.
    #[test]
    fn a_flush_failure_is_a_write_failure_with_its_detail_to_an_earlier_reader() {
        let causes = [
            RetirementCause::WriteFailed,
            RetirementCause::TargetFull,
            RetirementCause::Timeout,
            RetirementCause::FlushFailed,
        ];
        for cause in causes {
            let retirement = Retirement {
                member_index: 1,
                cause,
                errno: 5,
                retired_ns: 7,
                stream_offset_bytes: 9,
                first_sequence: 11,
                redirect_member: 0,
                redirect_slot_count: 0,
                redirect_first_slot: 0,
                redirect_lap_slots: 0,
                retired_first_slot: 3,
            };
            let mut bytes = vec![0u8; RETIREMENT_SIZE_BYTES];
            retirement.encode_into(&mut bytes, 0);
            let back = Retirement::decode_from(Structure::Checkpoint, &bytes, 0).unwrap();
            assert_eq!(back, retirement);
            let detail = get_u16(&bytes, off::CAUSE_DETAIL);
            assert_eq!(
                (get_u16(&bytes, off::CAUSE), detail != 0),
                match cause {
                    RetirementCause::FlushFailed => (1, true),
                    other => (other.code().0, false),
                }
            );
        }
        // A detail this reader does not know reads as its cause.
        assert_eq!(
            RetirementCause::from_code(2, 9),
            Some(RetirementCause::TargetFull)
        );
        assert_eq!(RetirementCause::from_code(4, 0), None);
    }
}
