//! The index area: checkpoints (crash safety) and the recording table (what is on the
//! set). Both are written in turn to alternating slots, so a torn write only ever hits
//! the slot being written and the previous version survives in the other.

use super::codec::{
    check_meta_crc, check_preamble, get_array, get_u16, get_u32, get_u64, put_bytes, put_preamble,
    put_u16, put_u32, put_u64, seal_meta, take,
};
use super::error::{LayoutError, Structure};
use super::flags::flag_set;
use super::label::Label;
use super::retirement::{decode_table, encode_table, validate_table, Retirement};
use super::signal::Signal;
use super::uuid::Uuid;
use super::{
    CHECKPOINT_MAGIC, CHECKPOINT_SIZE_BYTES, LABEL_MAX_BYTES, MAX_MEMBERS, RECORDING_ENTRY_MAGIC,
    RECORDING_ENTRY_SIZE_BYTES,
};

const C: Structure = Structure::Checkpoint;
const R: Structure = Structure::RecordingEntry;

/// Byte offsets of the checkpoint fields (see `docs/FORMAT.md`, "Checkpoint").
pub(crate) mod cp_off {
    pub const MEMBER_COUNT: usize = 12;
    pub const RETIREMENT_COUNT: usize = 14;
    pub const SET_UUID: usize = 16;
    pub const GENERATION: usize = 32;
    pub const WRITTEN_NS: usize = 40;
    pub const RECORDING_ID: usize = 48;
    pub const RECOVERY_WINDOW_SLOTS: usize = 52;
    pub const RECORDING_FIRST_SEQUENCE: usize = 56;
    pub const DURABLE_SEQUENCE_END: usize = 64;
    pub const DURABLE_STREAM_BYTES: usize = 72;
    pub const DURABLE_LOST_BYTES: usize = 80;
    // 88..128 reserved
    pub const MEMBERS: usize = 128;
    pub const MEMBER_STRIDE: usize = 16;
    pub const MEMBER_NEXT_SLOT: usize = 0;
    pub const MEMBER_LAP: usize = 8;
    // 128 + 128 × 16 = 2176 .. 2240 reserved
    pub const RETIREMENTS: usize = 2240;
    // 2240 + 16 × 64 = 3264 .. 4092 reserved, 4092..4096 CRC32C
}

/// Byte offsets of the recording entry fields (see `docs/FORMAT.md`, "Recording entry").
pub(crate) mod re_off {
    pub const RECORDING_ID: usize = 12;
    pub const SET_UUID: usize = 16;
    pub const REVISION: usize = 32;
    pub const STATE: usize = 40;
    pub const FLAGS: usize = 44;
    pub const FIRST_SEQUENCE: usize = 48;
    pub const END_SEQUENCE: usize = 56;
    pub const START_NS: usize = 64;
    pub const END_NS: usize = 72;
    pub const STREAM_LEN_BYTES: usize = 80;
    pub const LOST_BYTES: usize = 88;
    pub const NAME: usize = 96;
    pub const MEMBER_COUNT: usize = 160;
    pub const RETIREMENT_COUNT: usize = 162;
    pub const RECLAIM_CAUSE: usize = 164;
    pub const RECLAIM_FLAGS: usize = 166;
    pub const RECLAIMED_NS: usize = 168;
    pub const MARK_OF: usize = 176;
    // 180..184 reserved
    pub const MARK_OFFSET_BYTES: usize = 184;
    pub const MEMBERS: usize = 192;
    pub const MEMBER_STRIDE: usize = 16;
    pub const MEMBER_START_SLOT: usize = 0;
    pub const MEMBER_END_SLOT: usize = 8;
    // 192 + 128 × 16 = 2240
    pub const OVERWROTE: usize = 2240;
    // 2256 .. 2278 signal, 2278 .. 2280 reserved
    pub const MARK_FROM_NS: usize = 2280;
    // 2288 .. 2304 reserved
    pub const RETIREMENTS: usize = 2304;
    // 2304 + 16 × 64 = 3328
    pub const START_LAPS: usize = 3328;
    // 3328 + 128 × 4 = 3840 .. 4092 reserved, 4092..4096 CRC32C
}

/// Where a structure's member table lies: its start, one member's stride, and the offsets
/// in a member of its two u64 fields (checkpoint: next slot and lap; entry: start and end
/// slot).
#[derive(Clone, Copy)]
struct MemberTable {
    at: usize,
    stride: usize,
    first: usize,
    second: usize,
}

const CP_MEMBERS: MemberTable = MemberTable {
    at: cp_off::MEMBERS,
    stride: cp_off::MEMBER_STRIDE,
    first: cp_off::MEMBER_NEXT_SLOT,
    second: cp_off::MEMBER_LAP,
};

const RE_MEMBERS: MemberTable = MemberTable {
    at: re_off::MEMBERS,
    stride: re_off::MEMBER_STRIDE,
    first: re_off::MEMBER_START_SLOT,
    second: re_off::MEMBER_END_SLOT,
};

impl MemberTable {
    fn put(self, b: &mut [u8], members: impl Iterator<Item = (u64, u64)>) {
        for (i, (first, second)) in members.enumerate() {
            let at = self.at + i * self.stride;
            put_u64(b, at + self.first, first);
            put_u64(b, at + self.second, second);
        }
    }

    fn get(self, b: &[u8], member_count: u16) -> impl Iterator<Item = (u64, u64)> + '_ {
        (0..usize::from(member_count)).map(move |i| {
            let at = self.at + i * self.stride;
            (get_u64(b, at + self.first), get_u64(b, at + self.second))
        })
    }
}

/// Every structure names its set; a nil uuid names none.
fn check_set_uuid(structure: Structure, set_uuid: Uuid) -> Result<(), LayoutError> {
    if set_uuid.is_nil() {
        return Err(LayoutError::invalid(structure, "set_uuid", "is nil"));
    }
    Ok(())
}

/// A counter whose `values` (generations, ids, revisions) start at 1: 0 is never written.
fn check_from_one(
    structure: Structure,
    field: &'static str,
    value: u64,
    values: &str,
) -> Result<(), LayoutError> {
    if value == 0 {
        return Err(LayoutError::invalid(
            structure,
            field,
            format!("is 0 ({values} start at 1)"),
        ));
    }
    Ok(())
}

/// A structure names 1..=[`MAX_MEMBERS`] members.
fn check_member_count(structure: Structure, member_count: usize) -> Result<(), LayoutError> {
    if member_count == 0 || member_count > usize::from(MAX_MEMBERS) {
        return Err(LayoutError::invalid(
            structure,
            "member_count",
            format!("{member_count} is outside 1..={MAX_MEMBERS}"),
        ));
    }
    Ok(())
}

/// Where the writer stood on one member when a checkpoint was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemberPosition {
    /// The first data slot of this member that may hold a chunk with a sequence number at
    /// or above the checkpoint's `durable_sequence_end`: the slot of the member's oldest
    /// chunk still in flight, or, if none is, the slot its next chunk will go to.
    pub next_slot_index: u64,
    /// How many times writing on this member has wrapped from the last slot to slot 0
    /// (ring mode; 0 otherwise).
    pub lap: u64,
}

impl MemberPosition {
    /// Slot `next_slot_index` of lap `lap`.
    pub const fn at(next_slot_index: u64, lap: u64) -> MemberPosition {
        MemberPosition {
            next_slot_index,
            lap,
        }
    }
}

/// Where a recording lies on one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemberSpan {
    /// The data slot the recording's first chunk on this member went to (or would have).
    pub start_slot_index: u64,
    /// The data slot after the recording's last chunk on this member; equal to
    /// `start_slot_index` while the recording is open. In ring mode the member's slots
    /// hold the recording's newest chunks in slot order starting here (wrapping).
    pub end_slot_index: u64,
}

/// A crash-safety record: "every chunk with a sequence number below
/// `durable_sequence_end` is on stable storage, and this is where each member's writer
/// stood". Written identically to every member, to checkpoint slot
/// `generation % checkpoint_slot_count`.
///
/// Recovery starts from the newest valid checkpoint ([`newest_checkpoint`]) and searches
/// forward on each member from `members[i].next_slot_index`, at most
/// `recovery_window_slots` slots, instead of scanning the whole drive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The volume set; never nil. A reader ignores checkpoints of another set.
    pub set_uuid: Uuid,
    /// Counts checkpoints of the set from 1; the newest valid one wins.
    pub generation: u64,
    /// When the checkpoint was written: nanoseconds since the Unix epoch (UTC).
    pub written_ns: u64,
    /// The recording being written, 0 if none.
    pub recording_id: u32,
    /// The writer's promise: before the next checkpoint it writes at most this many slots
    /// on any member past the positions below. Bounds the recovery search.
    pub recovery_window_slots: u32,
    /// Sequence number of the first chunk of the recording being written.
    pub recording_first_sequence: u64,
    /// Every chunk with a lower sequence number is durable on its member.
    pub durable_sequence_end: u64,
    /// Stream bytes (lost ones included) that the durable chunks of the recording cover.
    pub durable_stream_bytes: u64,
    /// Of those, bytes lost to gaps (the sum of `gap_bytes` of the durable chunks).
    pub durable_lost_bytes: u64,
    /// One position per member of the set, in member order; `1..=MAX_MEMBERS` entries.
    pub members: Vec<MemberPosition>,
    /// Members retired so far during the recording being written (format 1.1).
    pub retirements: Vec<Retirement>,
}

impl Checkpoint {
    /// Checks the fields: a non-nil uuid, a generation from 1, 1..=128 members, no more
    /// lost than durable bytes, and the recording's first sequence not after the durable
    /// end.
    pub fn validate(&self) -> Result<(), LayoutError> {
        check_set_uuid(C, self.set_uuid)?;
        check_from_one(C, "generation", self.generation, "generations")?;
        let n = self.members.len();
        check_member_count(C, n)?;
        if self.durable_lost_bytes > self.durable_stream_bytes {
            return Err(LayoutError::invalid(
                C,
                "durable_lost_bytes",
                format!(
                    "{} exceeds the durable stream length {}",
                    self.durable_lost_bytes, self.durable_stream_bytes
                ),
            ));
        }
        validate_table(C, &self.retirements, n)?;
        if self.recording_id != 0 && self.recording_first_sequence > self.durable_sequence_end {
            return Err(LayoutError::invalid(
                C,
                "durable_sequence_end",
                format!(
                    "{} is before the recording's first sequence {}",
                    self.durable_sequence_end, self.recording_first_sequence
                ),
            ));
        }
        Ok(())
    }

    /// The 4096 bytes of the checkpoint. Fails only when [`Checkpoint::validate`] does.
    pub fn encode(&self) -> Result<[u8; CHECKPOINT_SIZE_BYTES], LayoutError> {
        self.validate()?;
        let mut b = [0u8; CHECKPOINT_SIZE_BYTES];
        put_preamble(&mut b, &CHECKPOINT_MAGIC);
        // validate() bounds the length by MAX_MEMBERS, so it fits a u16.
        let member_count = u16::try_from(self.members.len()).unwrap_or(MAX_MEMBERS);
        put_u16(&mut b, cp_off::MEMBER_COUNT, member_count);
        put_bytes(&mut b, cp_off::SET_UUID, self.set_uuid.as_bytes());
        put_u64(&mut b, cp_off::GENERATION, self.generation);
        put_u64(&mut b, cp_off::WRITTEN_NS, self.written_ns);
        put_u32(&mut b, cp_off::RECORDING_ID, self.recording_id);
        put_u32(
            &mut b,
            cp_off::RECOVERY_WINDOW_SLOTS,
            self.recovery_window_slots,
        );
        put_u64(
            &mut b,
            cp_off::RECORDING_FIRST_SEQUENCE,
            self.recording_first_sequence,
        );
        put_u64(
            &mut b,
            cp_off::DURABLE_SEQUENCE_END,
            self.durable_sequence_end,
        );
        put_u64(
            &mut b,
            cp_off::DURABLE_STREAM_BYTES,
            self.durable_stream_bytes,
        );
        put_u64(&mut b, cp_off::DURABLE_LOST_BYTES, self.durable_lost_bytes);
        let members = self.members.iter();
        CP_MEMBERS.put(&mut b, members.map(|m| (m.next_slot_index, m.lap)));
        encode_table(
            &mut b,
            cp_off::RETIREMENT_COUNT,
            cp_off::RETIREMENTS,
            &self.retirements,
        );
        seal_meta(&mut b);
        Ok(b)
    }

    /// Decodes and validates the first 4096 bytes of `bytes`: length, magic, major
    /// version, CRC32C, fields. Entries past `member_count` and reserved bytes are ignored.
    pub fn decode(bytes: &[u8]) -> Result<Self, LayoutError> {
        let b = take::<CHECKPOINT_SIZE_BYTES>(C, bytes)?;
        check_preamble(C, b, &CHECKPOINT_MAGIC)?;
        check_meta_crc(C, b)?;
        let member_count = get_u16(b, cp_off::MEMBER_COUNT);
        check_member_count(C, usize::from(member_count))?;
        let members = CP_MEMBERS
            .get(b, member_count)
            .map(|(next_slot_index, lap)| MemberPosition {
                next_slot_index,
                lap,
            })
            .collect();
        let cp = Checkpoint {
            set_uuid: Uuid(get_array(b, cp_off::SET_UUID)),
            generation: get_u64(b, cp_off::GENERATION),
            written_ns: get_u64(b, cp_off::WRITTEN_NS),
            recording_id: get_u32(b, cp_off::RECORDING_ID),
            recovery_window_slots: get_u32(b, cp_off::RECOVERY_WINDOW_SLOTS),
            recording_first_sequence: get_u64(b, cp_off::RECORDING_FIRST_SEQUENCE),
            durable_sequence_end: get_u64(b, cp_off::DURABLE_SEQUENCE_END),
            durable_stream_bytes: get_u64(b, cp_off::DURABLE_STREAM_BYTES),
            durable_lost_bytes: get_u64(b, cp_off::DURABLE_LOST_BYTES),
            members,
            retirements: decode_table(C, b, cp_off::RETIREMENT_COUNT, cp_off::RETIREMENTS)?,
        };
        cp.validate()?;
        Ok(cp)
    }
}

/// The life of a recording, as its table entry tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordingState {
    /// Being written, or the writer crashed before closing it (recovery tells which).
    Open,
    /// Closed cleanly: its last chunk carries [`ChunkFlags::END`](super::ChunkFlags::END).
    Closed,
    /// Ended early by an error or an abort request; its last chunk carries `END | ABORTED`.
    Aborted,
    /// The writer crashed; recovery closed the entry at the end of the durable chunks. No
    /// end marker was written.
    Interrupted,
}

impl RecordingState {
    /// The on-disk code.
    pub const fn code(self) -> u32 {
        match self {
            RecordingState::Open => 1,
            RecordingState::Closed => 2,
            RecordingState::Aborted => 3,
            RecordingState::Interrupted => 4,
        }
    }

    /// The state with this on-disk code.
    pub const fn from_code(code: u32) -> Option<Self> {
        match code {
            1 => Some(RecordingState::Open),
            2 => Some(RecordingState::Closed),
            3 => Some(RecordingState::Aborted),
            4 => Some(RecordingState::Interrupted),
            _ => None,
        }
    }
}

flag_set! {
    /// Flags of a recording. Bits 0..16 must be understood; bits 16..32 may be ignored.
    pub struct RecordingFlags {
        /// Ring mode: when the data area is full, writing wraps to slot 0 and overwrites
        /// the oldest chunks; only the newest chunks survive.
        const RING = 1 << 0;
        /// The stream is records (datagrams, packets, losses; format 1.2): its chunks are
        /// flagged `RECORDS`, and a reader that does not know records refuses it.
        const RECORDS = 1 << 1;
        /// The recording's space was reclaimed for newer ones (format 1.6): its slots may
        /// hold other data now, and the entry says when and why (`reclaimed`). A reader that
        /// does not know the flag refuses the entry rather than read what is gone.
        const RECLAIMED = 1 << 2;
        /// The entry is a mark (format 1.7): a window of recording `mark_of`'s chunks that
        /// its ring keeps, its spans the slots kept on each member. A reader that does not
        /// know marks refuses the entry rather than take it for a recording.
        const MARK = 1 << 3;
        /// The stream's payloads carry a flow index (format 1.9, `flow::index`): index
        /// records at their starts. A reader that does not know them refuses the entry
        /// rather than take them for packets.
        const FLOW_INDEX = 1 << 4;
        /// The payload is the seekable test pattern. Ignorable.
        const PATTERN = 1 << 16;
        /// The entry carries each member's lap at the start (`start_laps`) and which
        /// members wrapped over their own start (`overwrote`), format 1.1. Ignorable.
        const LAPS = 1 << 17;
        /// The entry carries the facts of a sampled signal (`signal`: sample format, rate,
        /// centre frequency, metadata; format 1.3). Ignorable.
        const SIGNAL = 1 << 18;
    }
}

/// One recording in the recording table, written identically to every member.
///
/// Recording `id` lives in table slot `(id - 1) % recording_slot_count`; revision `r`
/// of the entry is written to copy `r % 2` of that slot, so the previous revision
/// survives a torn write. [`newest_recording_entry`] picks between the copies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordingEntry {
    /// The volume set; never nil. A reader ignores entries of another set.
    pub set_uuid: Uuid,
    /// The recording, numbered from 1 within the set.
    pub recording_id: u32,
    /// Counts rewrites of this entry from 1; the newest valid copy wins.
    pub revision: u64,
    pub state: RecordingState,
    pub flags: RecordingFlags,
    /// Sequence number of the recording's first chunk.
    pub first_sequence: u64,
    /// One past the sequence number of the recording's last chunk; equal to
    /// `first_sequence` while the recording is open (see the checkpoints then).
    pub end_sequence: u64,
    /// When the recording started: nanoseconds since the Unix epoch (UTC).
    pub start_ns: u64,
    /// When it ended (0 while open).
    pub end_ns: u64,
    /// Length of the recorded stream, lost bytes included.
    pub stream_len_bytes: u64,
    /// Stream bytes lost because the input outran the drives (the sum of the gaps).
    pub lost_bytes: u64,
    /// A name the user gave the recording.
    pub name: Label,
    /// One span per member of the set, in member order; `1..=MAX_MEMBERS` entries.
    pub members: Vec<MemberSpan>,
    /// Members retired during the recording (format 1.1).
    pub retirements: Vec<Retirement>,
    /// With [`RecordingFlags::LAPS`] (ring recordings, format 1.1): each member's lap count
    /// when the recording started (its low 32 bits), and whether the member wrote more than
    /// a lap of this recording, overwriting its own oldest chunks (known once the recording
    /// ended; recovery works it out for a crashed one).
    pub start_laps: Vec<u32>,
    pub overwrote: Vec<bool>,
    /// With [`RecordingFlags::SIGNAL`] (format 1.3): what the stream's samples are, for a
    /// SigMF export. `None` with the flag set: an older writer rewrote the entry and the
    /// facts are gone.
    pub signal: Option<Signal>,
    /// With [`RecordingFlags::RECLAIMED`] (format 1.6): when and why its space was reused.
    pub reclaimed: Option<Reclaim>,
    /// With [`RecordingFlags::MARK`] (format 1.7): the recording whose chunks the mark keeps.
    pub mark_of: Option<MarkOf>,
}

/// What a mark's entry says of its recording (format 1.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkOf {
    /// The recording whose chunks the mark keeps.
    pub recording_id: u32,
    /// Where the mark's window begins in that recording's stream: its first chunk's
    /// `stream_offset_bytes`.
    pub stream_offset_bytes: u64,
    /// When it begins: its first chunk's time (ns since the Unix epoch). The entry's
    /// `start_ns` is its recording's, which its chunks' `elapsed_ns` count from.
    pub from_ns: u64,
}

/// Why a recording's space was reclaimed (format 1.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReclaimCause {
    /// A newer recording needed the room: the set's oldest recording went first.
    Space,
    /// It ended longer ago than the set's recordings are kept (`--keep`).
    Age,
    /// Its space was given back once its archive was verified (`archive
    /// --delete-after-verify`): its slots were discarded.
    Freed,
    /// A mark was released (`nvrec mark --release`, format 1.7): its recording's ring may
    /// write over its slots again.
    Released,
}

impl ReclaimCause {
    /// The on-disk code.
    pub const fn code(self) -> u16 {
        match self {
            ReclaimCause::Space => 1,
            ReclaimCause::Age => 2,
            ReclaimCause::Freed => 3,
            ReclaimCause::Released => 4,
        }
    }

    /// The cause with this on-disk code.
    pub const fn from_code(code: u16) -> Option<Self> {
        match code {
            1 => Some(ReclaimCause::Space),
            2 => Some(ReclaimCause::Age),
            3 => Some(ReclaimCause::Freed),
            4 => Some(ReclaimCause::Released),
            _ => None,
        }
    }

    /// The cause in words, as `ls` prints it.
    pub const fn as_str(self) -> &'static str {
        match self {
            ReclaimCause::Space => "space",
            ReclaimCause::Age => "age",
            ReclaimCause::Freed => "freed",
            ReclaimCause::Released => "released",
        }
    }
}

/// A reclaimed recording's record: when, why, and whether an archive held it then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reclaim {
    /// When the entry was marked reclaimed, before any of its slots was reused.
    pub reclaimed_ns: u64,
    pub cause: ReclaimCause,
    /// An archive held the whole recording, checked when it was reclaimed.
    pub archived: bool,
}

/// Reclaim flag bit 0: an archive held the recording when it was reclaimed.
const RECLAIM_ARCHIVED: u16 = 1;

impl RecordingEntry {
    /// Checks the fields: non-nil uuid, id and revision from 1, known flags, sequences
    /// in order, no more lost bytes than stream bytes.
    pub fn validate(&self) -> Result<(), LayoutError> {
        check_set_uuid(R, self.set_uuid)?;
        check_from_one(R, "recording_id", self.recording_id.into(), "ids")?;
        check_from_one(R, "revision", self.revision, "revisions")?;
        let unknown = self.flags.unknown_incompat_bits();
        if unknown != 0 {
            return Err(LayoutError::UnsupportedFeature {
                structure: R,
                field: "flags",
                bits: unknown,
            });
        }
        if self.end_sequence < self.first_sequence {
            return Err(LayoutError::invalid(
                R,
                "end_sequence",
                format!(
                    "{} is before the first sequence {}",
                    self.end_sequence, self.first_sequence
                ),
            ));
        }
        let n = self.members.len();
        check_member_count(R, n)?;
        validate_table(R, &self.retirements, n)?;
        if self.reclaimed.is_some() != self.flags.contains(RecordingFlags::RECLAIMED) {
            return Err(LayoutError::invalid(
                R,
                "flags",
                "RECLAIMED and the reclaim fields go together",
            ));
        }
        if self.mark_of.is_some() != self.flags.contains(RecordingFlags::MARK)
            || self.mark_of.is_some_and(|of| of.recording_id == 0)
        {
            return Err(LayoutError::invalid(
                R,
                "flags",
                "MARK and a recording id in mark_of go together",
            ));
        }
        if self.signal.is_some() && !self.flags.contains(RecordingFlags::SIGNAL) {
            return Err(LayoutError::invalid(
                R,
                "flags",
                "a signal's facts without the SIGNAL flag",
            ));
        }
        if self.lost_bytes > self.stream_len_bytes {
            return Err(LayoutError::invalid(
                R,
                "lost_bytes",
                format!(
                    "{} exceeds the stream length {}",
                    self.lost_bytes, self.stream_len_bytes
                ),
            ));
        }
        Ok(())
    }

    /// The 4096 bytes of the entry. Fails only when [`RecordingEntry::validate`] does.
    pub fn encode(&self) -> Result<[u8; RECORDING_ENTRY_SIZE_BYTES], LayoutError> {
        self.validate()?;
        let mut b = [0u8; RECORDING_ENTRY_SIZE_BYTES];
        put_preamble(&mut b, &RECORDING_ENTRY_MAGIC);
        put_u32(&mut b, re_off::RECORDING_ID, self.recording_id);
        put_bytes(&mut b, re_off::SET_UUID, self.set_uuid.as_bytes());
        put_u64(&mut b, re_off::REVISION, self.revision);
        put_u32(&mut b, re_off::STATE, self.state.code());
        put_u32(&mut b, re_off::FLAGS, self.flags.bits());
        put_u64(&mut b, re_off::FIRST_SEQUENCE, self.first_sequence);
        put_u64(&mut b, re_off::END_SEQUENCE, self.end_sequence);
        put_u64(&mut b, re_off::START_NS, self.start_ns);
        put_u64(&mut b, re_off::END_NS, self.end_ns);
        put_u64(&mut b, re_off::STREAM_LEN_BYTES, self.stream_len_bytes);
        put_u64(&mut b, re_off::LOST_BYTES, self.lost_bytes);
        put_bytes(&mut b, re_off::NAME, &self.name.encode());
        // validate() bounds the length by MAX_MEMBERS, so it fits a u16.
        let member_count = u16::try_from(self.members.len()).unwrap_or(MAX_MEMBERS);
        put_u16(&mut b, re_off::MEMBER_COUNT, member_count);
        let members = self.members.iter();
        RE_MEMBERS.put(
            &mut b,
            members.map(|m| (m.start_slot_index, m.end_slot_index)),
        );
        encode_table(
            &mut b,
            re_off::RETIREMENT_COUNT,
            re_off::RETIREMENTS,
            &self.retirements,
        );
        for (i, &wrapped) in self
            .overwrote
            .iter()
            .enumerate()
            .take(usize::from(MAX_MEMBERS))
        {
            if wrapped {
                b[re_off::OVERWROTE + i / 8] |= 1 << (i % 8);
            }
        }
        for (i, &lap) in self
            .start_laps
            .iter()
            .enumerate()
            .take(usize::from(MAX_MEMBERS))
        {
            put_u32(&mut b, re_off::START_LAPS + 4 * i, lap);
        }
        if let Some(signal) = &self.signal {
            signal.encode_into(&mut b)?;
        }
        if let Some(reclaim) = &self.reclaimed {
            put_u16(&mut b, re_off::RECLAIM_CAUSE, reclaim.cause.code());
            let flags = if reclaim.archived {
                RECLAIM_ARCHIVED
            } else {
                0
            };
            put_u16(&mut b, re_off::RECLAIM_FLAGS, flags);
            put_u64(&mut b, re_off::RECLAIMED_NS, reclaim.reclaimed_ns);
        }
        if let Some(of) = self.mark_of {
            put_u32(&mut b, re_off::MARK_OF, of.recording_id);
            put_u64(&mut b, re_off::MARK_OFFSET_BYTES, of.stream_offset_bytes);
            put_u64(&mut b, re_off::MARK_FROM_NS, of.from_ns);
        }
        seal_meta(&mut b);
        Ok(b)
    }

    /// Decodes and validates the first 4096 bytes of `bytes`: length, magic, major
    /// version, CRC32C, fields. Reserved bytes are ignored.
    pub fn decode(bytes: &[u8]) -> Result<Self, LayoutError> {
        let b = take::<RECORDING_ENTRY_SIZE_BYTES>(R, bytes)?;
        check_preamble(R, b, &RECORDING_ENTRY_MAGIC)?;
        check_meta_crc(R, b)?;
        let code = get_u32(b, re_off::STATE);
        let state = RecordingState::from_code(code).ok_or_else(|| {
            LayoutError::invalid(R, "state", format!("unknown state code {code}"))
        })?;
        let name: [u8; LABEL_MAX_BYTES] = get_array(b, re_off::NAME);
        let member_count = get_u16(b, re_off::MEMBER_COUNT);
        check_member_count(R, usize::from(member_count))?;
        let members = RE_MEMBERS
            .get(b, member_count)
            .map(|(start_slot_index, end_slot_index)| MemberSpan {
                start_slot_index,
                end_slot_index,
            })
            .collect();
        let entry = RecordingEntry {
            set_uuid: Uuid(get_array(b, re_off::SET_UUID)),
            recording_id: get_u32(b, re_off::RECORDING_ID),
            revision: get_u64(b, re_off::REVISION),
            state,
            flags: RecordingFlags::from_bits_retain(get_u32(b, re_off::FLAGS)),
            first_sequence: get_u64(b, re_off::FIRST_SEQUENCE),
            end_sequence: get_u64(b, re_off::END_SEQUENCE),
            start_ns: get_u64(b, re_off::START_NS),
            end_ns: get_u64(b, re_off::END_NS),
            stream_len_bytes: get_u64(b, re_off::STREAM_LEN_BYTES),
            lost_bytes: get_u64(b, re_off::LOST_BYTES),
            name: Label::decode(R, "name", &name)?,
            members,
            retirements: decode_table(R, b, re_off::RETIREMENT_COUNT, re_off::RETIREMENTS)?,
            start_laps: Vec::new(),
            overwrote: Vec::new(),
            signal: None,
            reclaimed: None,
            mark_of: None,
        };
        let mut entry = entry;
        if entry.flags.contains(RecordingFlags::MARK) {
            entry.mark_of = Some(MarkOf {
                recording_id: get_u32(b, re_off::MARK_OF),
                stream_offset_bytes: get_u64(b, re_off::MARK_OFFSET_BYTES),
                from_ns: get_u64(b, re_off::MARK_FROM_NS),
            });
        }
        if entry.flags.contains(RecordingFlags::SIGNAL) {
            entry.signal = Signal::decode_from(b)?;
        }
        if entry.flags.contains(RecordingFlags::RECLAIMED) {
            entry.reclaimed = Some(decode_reclaim(b)?);
        }
        if entry.flags.contains(RecordingFlags::LAPS) {
            entry.start_laps = (0..usize::from(member_count))
                .map(|i| get_u32(b, re_off::START_LAPS + 4 * i))
                .collect();
            entry.overwrote = (0..usize::from(member_count))
                .map(|i| b[re_off::OVERWROTE + i / 8] & (1 << (i % 8)) != 0)
                .collect();
        }
        entry.validate()?;
        Ok(entry)
    }
}

/// The reclaim fields of an entry flagged `RECLAIMED`.
fn decode_reclaim(b: &[u8; RECORDING_ENTRY_SIZE_BYTES]) -> Result<Reclaim, LayoutError> {
    let code = get_u16(b, re_off::RECLAIM_CAUSE);
    let cause = ReclaimCause::from_code(code).ok_or_else(|| {
        LayoutError::invalid(R, "reclaim_cause", format!("unknown cause code {code}"))
    })?;
    let flags = get_u16(b, re_off::RECLAIM_FLAGS);
    if flags & !RECLAIM_ARCHIVED != 0 {
        return Err(LayoutError::invalid(
            R,
            "reclaim_flags",
            format!("unknown bits {flags:#x}"),
        ));
    }
    Ok(Reclaim {
        reclaimed_ns: get_u64(b, re_off::RECLAIMED_NS),
        cause,
        archived: flags & RECLAIM_ARCHIVED != 0,
    })
}

/// The checkpoint a reader goes by: among the checkpoint slots' bytes, the valid one of
/// set `set_uuid` with the highest generation. Slots that do not decode (blank, torn,
/// foreign) or belong to another set are skipped. `None` if no slot qualifies (a set
/// that never checkpointed, or lost them all).
pub fn newest_checkpoint<'a, I>(set_uuid: Uuid, slots: I) -> Option<Checkpoint>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    slots
        .into_iter()
        .filter_map(|bytes| Checkpoint::decode(bytes).ok())
        .filter(|cp| cp.set_uuid == set_uuid)
        .fold(None, |best: Option<Checkpoint>, cp| match best {
            Some(b) if b.generation >= cp.generation => Some(b),
            _ => Some(cp),
        })
}

/// The entry a recording table slot holds: among the bytes of its copies, the valid
/// entry of set `set_uuid` with the highest `(recording_id, revision)`. A higher id wins
/// first because the slot is reused by recording `id + recording_slot_count`, whose first
/// revision leaves the older recording's entry in the other copy. `None` if no copy
/// qualifies (an unused slot).
pub fn newest_recording_entry<'a, I>(set_uuid: Uuid, copies: I) -> Option<RecordingEntry>
where
    I: IntoIterator<Item = &'a [u8]>,
{
    copies
        .into_iter()
        .filter_map(|bytes| RecordingEntry::decode(bytes).ok())
        .filter(|e| e.set_uuid == set_uuid)
        .fold(None, |best: Option<RecordingEntry>, e| match best {
            Some(b) if (b.recording_id, b.revision) >= (e.recording_id, e.revision) => Some(b),
            _ => Some(e),
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layout::codec::{META_CRC_OFFSET, VERSION_MAJOR_OFFSET, VERSION_MINOR_OFFSET};
    use crate::layout::crc32c;

    pub(crate) fn sample_checkpoint() -> Checkpoint {
        Checkpoint {
            set_uuid: Uuid::from_random_bytes([0x3c; 16]),
            generation: 77,
            written_ns: 1_767_225_600_500_000_000,
            recording_id: 5,
            recovery_window_slots: 64,
            recording_first_sequence: 10_000,
            durable_sequence_end: 12_345,
            durable_stream_bytes: 300 * 131_072,
            durable_lost_bytes: 8192,
            members: vec![
                MemberPosition {
                    next_slot_index: 600,
                    lap: 0,
                },
                MemberPosition {
                    next_slot_index: 17,
                    lap: 3,
                },
            ],
            retirements: Vec::new(),
        }
    }

    pub(crate) fn sample_entry() -> RecordingEntry {
        RecordingEntry {
            set_uuid: Uuid::from_random_bytes([0x3c; 16]),
            recording_id: 5,
            revision: 2,
            state: RecordingState::Closed,
            flags: RecordingFlags::RING | RecordingFlags::PATTERN,
            first_sequence: 10_000,
            end_sequence: 20_000,
            start_ns: 1_767_225_600_000_000_000,
            end_ns: 1_767_225_660_000_000_000,
            stream_len_bytes: 10_000 * 131_000,
            lost_bytes: 4096,
            name: Label::new("flight 12, sensor A").expect("valid"),
            members: vec![
                MemberSpan {
                    start_slot_index: 100,
                    end_slot_index: 5100,
                },
                MemberSpan {
                    start_slot_index: 7,
                    end_slot_index: 5007,
                },
                MemberSpan {
                    start_slot_index: 0,
                    end_slot_index: 0,
                },
            ],
            retirements: vec![sample_retirement()],
            start_laps: Vec::new(),
            overwrote: Vec::new(),
            signal: None,
            reclaimed: None,
            mark_of: None,
        }
    }

    pub(crate) fn sample_retirement() -> Retirement {
        Retirement {
            member_index: 1,
            cause: crate::layout::RetirementCause::Timeout,
            errno: 0,
            retired_ns: 1_767_225_630_000_000_000,
            stream_offset_bytes: 7_000 * 131_000,
            first_sequence: 17_000,
            redirect_member: 0,
            redirect_slot_count: 64,
            redirect_first_slot: 5_090,
            redirect_lap_slots: 5_100,
            retired_first_slot: 4_321,
        }
    }

    /// A flipped byte `i` of a 4096-byte block is caught by what guards it: the magic (bytes
    /// 0..8), the major version (8..10), the CRC32C (everything else).
    pub(crate) fn assert_flip_is_caught(i: usize, err: &LayoutError) {
        match i {
            0..=7 => assert!(matches!(err, LayoutError::BadMagic { .. }), "{i}: {err}"),
            8..=9 => assert!(
                matches!(err, LayoutError::UnsupportedVersion { .. }),
                "{i}: {err}"
            ),
            _ => assert!(matches!(err, LayoutError::BadCrc { .. }), "{i}: {err}"),
        }
    }

    /// Rejected for its member count.
    fn bad_member_count(e: &LayoutError) -> bool {
        matches!(
            e,
            LayoutError::InvalidField {
                field: "member_count",
                ..
            }
        )
    }

    fn reseal(b: &mut [u8; 4096]) {
        let crc = crc32c(&b[..META_CRC_OFFSET]);
        b[META_CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn checkpoint_round_trip() {
        let max = Checkpoint {
            members: (0..u64::from(MAX_MEMBERS))
                .map(|i| MemberPosition {
                    next_slot_index: u64::MAX - i,
                    lap: i,
                })
                .collect(),
            generation: u64::MAX,
            ..sample_checkpoint()
        };
        let idle = Checkpoint {
            recording_id: 0,
            recording_first_sequence: 99,
            durable_sequence_end: 0,
            members: vec![MemberPosition::default()],
            ..sample_checkpoint()
        };
        for cp in [sample_checkpoint(), max, idle] {
            let b = cp.encode().expect("encodes");
            assert_eq!(Checkpoint::decode(&b), Ok(cp));
        }
    }

    #[test]
    fn recording_entry_round_trip() {
        let open = RecordingEntry {
            state: RecordingState::Open,
            end_sequence: 10_000,
            end_ns: 0,
            revision: 1,
            flags: RecordingFlags::empty(),
            name: Label::empty(),
            members: (0..u64::from(MAX_MEMBERS))
                .map(|i| MemberSpan {
                    start_slot_index: i,
                    end_slot_index: u64::MAX - i,
                })
                .collect(),
            ..sample_entry()
        };
        let mut all = vec![sample_entry(), open];
        for state in [RecordingState::Aborted, RecordingState::Interrupted] {
            // Every ignorable bit, LAPS among them: the laps and the wrapped members too.
            all.push(RecordingEntry {
                state,
                flags: RecordingFlags::from_bits_retain(0xffff_0000),
                start_laps: vec![7, u32::MAX, 0],
                overwrote: vec![true, false, true],
                ..sample_entry()
            });
        }
        for e in all {
            let b = e.encode().expect("encodes");
            assert_eq!(RecordingEntry::decode(&b), Ok(e));
        }
    }

    /// Format 1.6: a reclaimed entry round-trips, its fields sit where the format says and
    /// change nothing else but the flags and the CRC; a reader of 1.5 refuses the entry by
    /// its must-understand flag; the flag and the fields go together, and unknown codes are
    /// refused.
    #[test]
    fn a_reclaimed_entry_round_trips_and_is_refused_without_its_fields() {
        let plain = sample_entry();
        let reclaimed = RecordingEntry {
            flags: plain.flags | RecordingFlags::RECLAIMED,
            reclaimed: Some(Reclaim {
                reclaimed_ns: 1_767_300_000_000_000_000,
                cause: ReclaimCause::Age,
                archived: true,
            }),
            ..plain.clone()
        };
        let b = reclaimed.encode().expect("encodes");
        assert_eq!(RecordingEntry::decode(&b), Ok(reclaimed.clone()));
        assert_eq!(b[164..166], [2, 0], "cause: age");
        assert_eq!(b[166..168], [1, 0], "archived");
        assert_eq!(b[168..176], 1_767_300_000_000_000_000u64.to_le_bytes());
        let old = plain.encode().expect("encodes");
        let differing: Vec<usize> = (0..4096).filter(|&i| old[i] != b[i]).collect();
        assert!(
            differing
                .iter()
                .all(|&i| (44..48).contains(&i) || (164..176).contains(&i) || i >= 4092),
            "{differing:?}"
        );
        // The flag alone, or the fields alone, are refused.
        let flag_alone = RecordingEntry {
            reclaimed: None,
            mark_of: None,
            ..reclaimed.clone()
        };
        assert!(flag_alone.encode().is_err());
        let fields_alone = RecordingEntry {
            flags: plain.flags,
            ..reclaimed.clone()
        };
        assert!(fields_alone.encode().is_err());
        // An unknown cause or reclaim flag bit is refused on reading.
        for (at, value) in [(164usize, 9u8), (166, 2)] {
            let mut bad = b;
            bad[at] = value;
            seal_meta(&mut bad);
            assert!(RecordingEntry::decode(&bad).is_err(), "byte {at} = {value}");
        }
    }

    fn sample_signal() -> Signal {
        Signal {
            format: crate::layout::SampleFormat::parse("ci16_le").expect("a datatype"),
            sample_rate_hz: 2.4e6,
            center_freq_hz: Some(-915e6),
            meta: vec![
                ("core:author".into(), "Ada".into()),
                ("antenna:gain".into(), "3 dBi = 2x".into()),
            ],
        }
    }

    /// Format 1.3: a signal's facts round-trip, sit where the format says, and change no byte
    /// a 1.2 reader reads but the flags (an ignorable bit) and the CRC; an entry without them
    /// (1.2 and before) decodes with none, and so does one a 1.2 writer rewrote (the flag
    /// kept, the fields zero).
    #[test]
    fn a_signal_round_trips_and_entries_without_one_still_read() {
        let plain = sample_entry();
        let with_signal = RecordingEntry {
            flags: plain.flags | RecordingFlags::SIGNAL,
            signal: Some(sample_signal()),
            ..plain.clone()
        };
        let b = with_signal.encode().expect("encodes");
        assert_eq!(RecordingEntry::decode(&b), Ok(with_signal.clone()));
        assert_eq!(b[2256..2264], 2.4e6f64.to_bits().to_le_bytes());
        assert_eq!(b[2264..2272], (-915e6f64).to_bits().to_le_bytes());
        assert_eq!(b[2272..2274], [4 + 16, 0], "i16, complex, little-endian");
        assert_eq!(b[2274..2276], [1, 0], "the centre frequency is given");
        let text = b"core:author=Ada\nantenna:gain=3 dBi = 2x";
        assert_eq!(b[2276..2278], (text.len() as u16).to_le_bytes());
        assert_eq!(&b[3840..3840 + text.len()], text);
        let old = plain.encode().expect("encodes");
        let differing: Vec<usize> = (0..4096).filter(|&i| old[i] != b[i]).collect();
        assert!(
            differing.iter().all(|&i| (44..48).contains(&i)
                || (2256..2278).contains(&i)
                || (3840..4096).contains(&i)),
            "{differing:?}"
        );
        assert_eq!(RecordingEntry::decode(&old).expect("decodes").signal, None);
        // A 1.2 writer's rewrite: the ignorable flag kept, the reserved bytes zero.
        let rewritten = RecordingEntry {
            signal: None,
            ..with_signal.clone()
        };
        let decoded = RecordingEntry::decode(&rewritten.encode().expect("encodes"));
        assert_eq!(decoded.map(|e| e.signal), Ok(None));
        // Facts without the flag are refused, and so are fields out of range.
        let unflagged = RecordingEntry {
            flags: plain.flags,
            ..with_signal.clone()
        };
        assert!(unflagged.encode().is_err());
        let mut bad = b;
        bad[2272] = 9;
        reseal(&mut bad);
        assert!(
            RecordingEntry::decode(&bad).is_err(),
            "an unknown sample format"
        );
        let mut bad = b;
        bad[2256..2264].copy_from_slice(&0f64.to_bits().to_le_bytes());
        reseal(&mut bad);
        assert!(RecordingEntry::decode(&bad).is_err(), "a rate of 0");
    }

    #[test]
    fn fields_sit_where_the_format_says() {
        let cp = sample_checkpoint();
        let b = cp.encode().expect("encodes");
        assert_eq!(&b[0..8], b"NVRECCKP");
        assert_eq!(b[12..14], [2, 0]);
        assert_eq!(b[32..40], 77u64.to_le_bytes());
        assert_eq!(b[128 + 16..128 + 24], 17u64.to_le_bytes());
        assert_eq!(b[128 + 24..128 + 32], 3u64.to_le_bytes());
        assert!(b[160..4092].iter().all(|&x| x == 0));
        let e = sample_entry();
        let b = e.encode().expect("encodes");
        assert_eq!(&b[0..8], b"NVRECREC");
        assert_eq!(b[12..16], 5u32.to_le_bytes());
        assert_eq!(b[40..44], 2u32.to_le_bytes());
        assert_eq!(b[44..48], 0x0001_0001u32.to_le_bytes());
        assert_eq!(&b[96..115], b"flight 12, sensor A");
        assert_eq!(b[160..162], [3, 0]);
        assert_eq!(b[192 + 16..192 + 24], 7u64.to_le_bytes());
        assert_eq!(b[192 + 24..192 + 32], 5007u64.to_le_bytes());
        assert_eq!(b[162..164], [1, 0], "one retirement");
        assert!(b[164..192].iter().all(|&x| x == 0));
        assert!(b[192 + 48..2304].iter().all(|&x| x == 0));
        let r = sample_retirement();
        assert_eq!(b[2304..2306], [1, 0], "retired member");
        assert_eq!(b[2306..2308], [3, 0], "cause: timeout");
        assert_eq!(b[2304 + 24..2304 + 32], r.first_sequence.to_le_bytes());
        assert_eq!(b[2304 + 36..2304 + 40], 64u32.to_le_bytes());
        assert_eq!(b[2304 + 40..2304 + 48], 5090u64.to_le_bytes());
        assert_eq!(b[2304 + 48..2304 + 56], 5100u64.to_le_bytes());
        assert_eq!(b[2304 + 56..2304 + 64], 4321u64.to_le_bytes());
        assert!(b[2304 + 64..4092].iter().all(|&x| x == 0));
    }

    #[test]
    fn every_flipped_byte_is_rejected() {
        let blocks = [
            sample_checkpoint().encode().expect("encodes"),
            sample_entry().encode().expect("encodes"),
        ];
        for (which, good) in blocks.iter().enumerate() {
            for i in 0..4096 {
                let mut b = *good;
                b[i] ^= 0x04;
                let err = if which == 0 {
                    Checkpoint::decode(&b).map(|_| ())
                } else {
                    RecordingEntry::decode(&b).map(|_| ())
                }
                .expect_err("a flipped byte must be caught");
                assert_flip_is_caught(i, &err);
            }
        }
    }

    #[test]
    fn checkpoint_rejections_table() {
        let good = sample_checkpoint().encode().expect("encodes");
        type Case = (&'static str, fn(&mut [u8; 4096]), fn(&LayoutError) -> bool);
        let cases: Vec<Case> = vec![
            (
                "magic",
                |b| b[0] ^= 0x20,
                |e| matches!(e, LayoutError::BadMagic { .. }),
            ),
            (
                "recording-entry magic",
                |b| {
                    b[..8].copy_from_slice(&RECORDING_ENTRY_MAGIC);
                    reseal(b);
                },
                |e| matches!(e, LayoutError::BadMagic { .. }),
            ),
            (
                "version",
                |b| {
                    b[VERSION_MAJOR_OFFSET + 1] = 1;
                    reseal(b);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::UnsupportedVersion {
                            found_major: 257,
                            ..
                        }
                    )
                },
            ),
            (
                "crc",
                |b| b[4095] ^= 0x80,
                |e| matches!(e, LayoutError::BadCrc { .. }),
            ),
            (
                "no members",
                |b| {
                    b[cp_off::MEMBER_COUNT] = 0;
                    reseal(b);
                },
                bad_member_count,
            ),
            (
                "too many members",
                |b| {
                    b[cp_off::MEMBER_COUNT] = 129;
                    reseal(b);
                },
                bad_member_count,
            ),
            (
                "generation 0",
                |b| {
                    b[cp_off::GENERATION] = 0;
                    reseal(b);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "generation",
                            ..
                        }
                    )
                },
            ),
            (
                "lost more than durable",
                |b| {
                    put_u64(b, cp_off::DURABLE_LOST_BYTES, u64::MAX);
                    reseal(b);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "durable_lost_bytes",
                            ..
                        }
                    )
                },
            ),
            (
                "durable end before start",
                |b| {
                    put_u64(b, cp_off::DURABLE_SEQUENCE_END, 9_999);
                    reseal(b);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "durable_sequence_end",
                            ..
                        }
                    )
                },
            ),
            (
                "blank",
                |b| b.fill(0),
                |e| matches!(e, LayoutError::Blank { .. }),
            ),
        ];
        for (name, mutate, expected) in cases {
            let mut b = good;
            mutate(&mut b);
            let err = Checkpoint::decode(&b).expect_err(name);
            assert!(expected(&err), "{name}: {err}");
        }
    }

    #[test]
    fn recording_entry_rejections_table() {
        let good = sample_entry().encode().expect("encodes");
        type Case = (&'static str, fn(&mut [u8; 4096]), fn(&LayoutError) -> bool);
        let cases: Vec<Case> = vec![
            (
                "magic",
                |b| b[7] = 0,
                |e| matches!(e, LayoutError::BadMagic { .. }),
            ),
            (
                "version",
                |b| {
                    b[VERSION_MAJOR_OFFSET] = 0;
                    reseal(b);
                },
                |e| matches!(e, LayoutError::UnsupportedVersion { .. }),
            ),
            (
                "crc",
                |b| b[100] ^= 1,
                |e| matches!(e, LayoutError::BadCrc { .. }),
            ),
            (
                "state 0",
                |b| {
                    put_u32(b, re_off::STATE, 0);
                    reseal(b);
                },
                |e| matches!(e, LayoutError::InvalidField { field: "state", .. }),
            ),
            (
                "state 5",
                |b| {
                    put_u32(b, re_off::STATE, 5);
                    reseal(b);
                },
                |e| matches!(e, LayoutError::InvalidField { field: "state", .. }),
            ),
            (
                "unknown must-understand flag",
                |b| {
                    put_u32(b, re_off::FLAGS, 1 << 5);
                    reseal(b);
                },
                |e| matches!(e, LayoutError::UnsupportedFeature { bits: 0x20, .. }),
            ),
            (
                "recording 0",
                |b| {
                    put_u32(b, re_off::RECORDING_ID, 0);
                    reseal(b);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "recording_id",
                            ..
                        }
                    )
                },
            ),
            (
                "end before first",
                |b| {
                    put_u64(b, re_off::END_SEQUENCE, 1);
                    reseal(b);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "end_sequence",
                            ..
                        }
                    )
                },
            ),
            (
                "lost more than recorded",
                |b| {
                    put_u64(b, re_off::LOST_BYTES, u64::MAX);
                    reseal(b);
                },
                |e| {
                    matches!(
                        e,
                        LayoutError::InvalidField {
                            field: "lost_bytes",
                            ..
                        }
                    )
                },
            ),
            (
                "no members",
                |b| {
                    put_u16(b, re_off::MEMBER_COUNT, 0);
                    reseal(b);
                },
                bad_member_count,
            ),
            (
                "too many members",
                |b| {
                    put_u16(b, re_off::MEMBER_COUNT, MAX_MEMBERS + 1);
                    reseal(b);
                },
                bad_member_count,
            ),
            (
                "name not NUL-padded",
                |b| {
                    b[re_off::NAME + 63] = b'x';
                    reseal(b);
                },
                |e| matches!(e, LayoutError::InvalidField { field: "name", .. }),
            ),
        ];
        for (name, mutate, expected) in cases {
            let mut b = good;
            mutate(&mut b);
            let err = RecordingEntry::decode(&b).expect_err(name);
            assert!(expected(&err), "{name}: {err}");
        }
    }

    #[test]
    fn truncated_input_and_newer_minor() {
        let cp = sample_checkpoint();
        let good = cp.encode().expect("encodes");
        for len in [0, 7, 4095] {
            assert_eq!(
                Checkpoint::decode(&good[..len]),
                Err(LayoutError::Truncated {
                    structure: C,
                    needed_bytes: 4096,
                    got_bytes: len
                })
            );
            assert!(matches!(
                RecordingEntry::decode(&good[..len]),
                Err(LayoutError::Truncated { structure: R, .. })
            ));
        }
        let mut b = good;
        b[VERSION_MINOR_OFFSET] = 3;
        b[100] = 0xff; // reserved in 1.0
        b[2200] = 0xff; // past the member count: ignored
        b[3000] = 0xff;
        reseal(&mut b);
        assert_eq!(Checkpoint::decode(&b), Ok(cp));
    }

    #[test]
    fn the_newest_checkpoint_survives_a_torn_write() {
        let set = sample_checkpoint().set_uuid;
        let older = Checkpoint {
            generation: 76,
            ..sample_checkpoint()
        }
        .encode()
        .expect("encodes");
        let newer = sample_checkpoint().encode().expect("encodes");
        let mut torn = newer;
        torn[2048..].fill(0); // half of the write landed
        let foreign = Checkpoint {
            set_uuid: Uuid([9; 16]),
            generation: 1000,
            ..sample_checkpoint()
        }
        .encode()
        .expect("encodes");
        let blank = [0u8; 4096];

        let pick =
            |slots: &[&[u8]]| newest_checkpoint(set, slots.iter().copied()).map(|c| c.generation);
        assert_eq!(pick(&[&older, &newer]), Some(77));
        assert_eq!(pick(&[&newer, &older]), Some(77));
        assert_eq!(pick(&[&older, &torn]), Some(76));
        assert_eq!(pick(&[&foreign, &older]), Some(76));
        assert_eq!(pick(&[&blank, &blank]), None);
        assert_eq!(pick(&[]), None);
    }

    #[test]
    fn the_newest_recording_entry_wins() {
        let set = sample_entry().set_uuid;
        let rev = |id: u32, revision: u64| {
            RecordingEntry {
                recording_id: id,
                revision,
                ..sample_entry()
            }
            .encode()
            .expect("encodes")
        };
        let pick = |copies: &[&[u8]]| {
            newest_recording_entry(set, copies.iter().copied())
                .map(|e| (e.recording_id, e.revision))
        };
        assert_eq!(pick(&[&rev(5, 2), &rev(5, 1)]), Some((5, 2)));
        assert_eq!(pick(&[&rev(5, 2), &rev(5, 3)]), Some((5, 3)));
        // Slot reuse: recording 261 (= 5 + 256) has written its first revision to copy 1.
        assert_eq!(pick(&[&rev(5, 4), &rev(261, 1)]), Some((261, 1)));
        let mut torn = rev(5, 3);
        torn[10] ^= 1;
        assert_eq!(pick(&[&rev(5, 2), &torn]), Some((5, 2)));
        assert_eq!(pick(&[&[0u8; 4096], &[0u8; 4096]]), None);
    }
}
