//! The properties every decoder must have, as functions over arbitrary bytes. The fuzz
//! targets under `fuzz/` call them with libFuzzer's inputs, and the crate's own property
//! tests call them with seeded pseudo-random inputs, so CI checks the same properties on
//! stable Rust. Not a stable API.
//!
//! Each function panics (the failure a fuzzer reports) if, for its input:
//! - the decoder panics, or
//! - a decode succeeds but the decoded value does not validate, does not re-encode, or
//!   re-encodes to bytes that decode to a different value.
//!
//! A fuzzer mutating raw bytes almost never gets past a CRC32C, so [`sealed_meta`] and
//! [`sealed_chunk`] turn any input into a structure with the right magic, version and
//! CRCs: fed through them, the input reaches the field checks behind the CRC.

use super::codec::{crc32c_append, META_CRC_OFFSET};
use super::{
    crc32c, decode_chunk, decode_chunk_header, frame_span, packet_header, Checkpoint, Content,
    IndexGeometry, LayoutError, Packet, Reassembly, Record, RecordingEntry, Structure, Superblock,
    VolumeLayout, CHUNK_HEADER_SIZE_BYTES, CHUNK_MAGIC, CHUNK_VERSION_MINOR, FORMAT_VERSION_MAJOR,
    FORMAT_VERSION_MINOR, FRAGMENT_BYTES_MIN, META_STRUCT_SIZE_BYTES, SUPERBLOCK_A_OFFSET_BYTES,
};

/// A 4096-byte metadata structure with `magic`, the current major version, `data` from
/// byte 12 on (cut or zero-padded) and a correct CRC32C.
pub fn sealed_meta(magic: &[u8; 8], data: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; META_STRUCT_SIZE_BYTES];
    b[..8].copy_from_slice(magic);
    b[8..10].copy_from_slice(&FORMAT_VERSION_MAJOR.to_le_bytes());
    b[10..12].copy_from_slice(&FORMAT_VERSION_MINOR.to_le_bytes());
    let n = data.len().min(META_CRC_OFFSET - 12);
    b[12..12 + n].copy_from_slice(&data[..n]);
    let crc = crc32c(&b[..META_CRC_OFFSET]);
    b[META_CRC_OFFSET..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// A chunk with the chunk magic, the current major version, header fields from `data`
/// (bytes 12..120), the rest of `data` as payload, the payload length reduced to fit, and
/// correct CRCs.
pub fn sealed_chunk(data: &[u8]) -> Vec<u8> {
    const H: usize = CHUNK_HEADER_SIZE_BYTES;
    let fields = H - 8 - 12;
    let mut b = vec![0u8; H];
    b[..8].copy_from_slice(&CHUNK_MAGIC);
    b[8..10].copy_from_slice(&FORMAT_VERSION_MAJOR.to_le_bytes());
    b[10..12].copy_from_slice(&CHUNK_VERSION_MINOR.to_le_bytes());
    let n = data.len().min(fields);
    b[12..12 + n].copy_from_slice(&data[..n]);
    b.extend_from_slice(data.get(fields..).unwrap_or_default());
    let available = (b.len() - H) as u64;
    let mut len = [0u8; 4];
    len.copy_from_slice(&b[80..84]);
    let len = u64::from(u32::from_le_bytes(len)) % (available + 1);
    b[80..84].copy_from_slice(&(len as u32).to_le_bytes());
    let crc = crc32c_append(crc32c(&b[..H]), &b[H..H + len as usize]);
    b[120..124].copy_from_slice(&crc.to_le_bytes());
    let crc = crc32c(&b[..124]);
    b[124..128].copy_from_slice(&crc.to_le_bytes());
    b
}

/// `Superblock::decode` never panics; what it accepts re-encodes to itself and has a sound map.
pub fn superblock(data: &[u8]) {
    let Ok(sb) = Superblock::decode(data) else {
        return;
    };
    if let Err(e) = sb.validate() {
        panic!("decoded superblock does not validate: {e}: {sb:?}");
    }
    check_map(&sb.layout);
    let bytes = match sb.encode() {
        Ok(b) => b,
        Err(e) => panic!("decoded superblock does not re-encode: {e}: {sb:?}"),
    };
    match Superblock::decode(&bytes) {
        Ok(again) => assert_eq!(again, sb, "superblock changed in a round trip"),
        Err(e) => panic!("re-encoded superblock does not decode: {e}: {sb:?}"),
    }
}

/// `decode_chunk` and `decode_chunk_header` never panic and agree with each other; a chunk
/// that decodes, framed again around a copy of its payload, decodes to the same chunk.
pub fn chunk(data: &[u8]) {
    let header_only = decode_chunk_header(data);
    let view = match decode_chunk(data) {
        Ok(view) => view,
        Err(e) => {
            // The whole chunk can fail where the header alone passes only on the payload.
            if header_only.is_ok() {
                assert!(
                    matches!(
                        e,
                        LayoutError::Truncated {
                            structure: Structure::Chunk,
                            ..
                        } | LayoutError::BadCrc {
                            structure: Structure::Chunk,
                            ..
                        }
                    ),
                    "header decodes but the chunk fails with {e}"
                );
            }
            return;
        }
    };
    assert_eq!(
        header_only.as_ref(),
        Ok(&view.header),
        "header decoders disagree"
    );
    if let Err(e) = view.header.validate() {
        panic!(
            "decoded chunk header does not validate: {e}: {:?}",
            view.header
        );
    }
    assert_eq!(view.payload.len(), view.header.payload_len_bytes as usize);
    let mut slot = vec![0u8; CHUNK_HEADER_SIZE_BYTES + view.payload.len()];
    slot[CHUNK_HEADER_SIZE_BYTES..].copy_from_slice(view.payload);
    if let Err(e) = view.header.encode_into(&mut slot) {
        panic!("decoded chunk does not re-encode: {e}: {:?}", view.header);
    }
    match decode_chunk(&slot) {
        Ok(again) => assert_eq!(again, view, "chunk changed in a round trip"),
        Err(e) => panic!("re-encoded chunk does not decode: {e}: {:?}", view.header),
    }
}

/// `Checkpoint::decode` never panics; what it accepts re-encodes to itself.
pub fn checkpoint(data: &[u8]) {
    let Ok(cp) = Checkpoint::decode(data) else {
        return;
    };
    if let Err(e) = cp.validate() {
        panic!("decoded checkpoint does not validate: {e}: {cp:?}");
    }
    let bytes = match cp.encode() {
        Ok(b) => b,
        Err(e) => panic!("decoded checkpoint does not re-encode: {e}: {cp:?}"),
    };
    match Checkpoint::decode(&bytes) {
        Ok(again) => assert_eq!(again, cp, "checkpoint changed in a round trip"),
        Err(e) => panic!("re-encoded checkpoint does not decode: {e}: {cp:?}"),
    }
}

/// `RecordingEntry::decode` never panics; what it accepts re-encodes to itself.
pub fn recording_entry(data: &[u8]) {
    let Ok(entry) = RecordingEntry::decode(data) else {
        return;
    };
    if let Err(e) = entry.validate() {
        panic!("decoded recording entry does not validate: {e}: {entry:?}");
    }
    let bytes = match entry.encode() {
        Ok(b) => b,
        Err(e) => panic!("decoded recording entry does not re-encode: {e}: {entry:?}"),
    };
    match RecordingEntry::decode(&bytes) {
        Ok(again) => assert_eq!(again, entry, "recording entry changed in a round trip"),
        Err(e) => panic!("re-encoded recording entry does not decode: {e}: {entry:?}"),
    }
}

/// Reads the parameters of [`VolumeLayout::compute_with`] from the first 20 bytes of
/// `data` (little-endian: volume size u64, chunk size u32, logical block u32, checkpoint
/// slots u16, recording slots u16; missing bytes are zero).
pub fn layout_params(data: &[u8]) -> (u64, u32, u32, IndexGeometry) {
    let mut b = [0u8; 20];
    for (o, i) in b.iter_mut().zip(data) {
        *o = *i;
    }
    let u64_at = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(a)
    };
    let u32_at = |i: usize| {
        let mut a = [0u8; 4];
        a.copy_from_slice(&b[i..i + 4]);
        u32::from_le_bytes(a)
    };
    let u16_at = |i: usize| u32::from(u16::from_le_bytes([b[i], b[i + 1]]));
    (
        u64_at(0),
        u32_at(8),
        u32_at(12),
        IndexGeometry {
            checkpoint_slot_count: u16_at(16),
            recording_slot_count: u16_at(18),
        },
    )
}

/// `VolumeLayout::compute_with` never panics; a layout it returns is sound; the minimum
/// size it names when a volume is too small is enough.
pub fn volume_layout(data: &[u8]) {
    let (volume, chunk, lbs, geometry) = layout_params(data);
    match VolumeLayout::compute_with(volume, chunk, lbs, geometry) {
        Ok(l) => {
            check_map(&l);
            assert_eq!(
                (
                    l.volume_size_bytes,
                    l.chunk_size_bytes,
                    l.logical_block_bytes,
                    l.geometry()
                ),
                (volume, chunk, lbs, geometry)
            );
        }
        Err(LayoutError::VolumeTooSmall {
            min_volume_bytes, ..
        }) => {
            assert!(min_volume_bytes > volume);
            match VolumeLayout::compute_with(min_volume_bytes, chunk, lbs, geometry) {
                Ok(l) => {
                    check_map(&l);
                    assert_eq!(l.data_slot_count, 1);
                }
                Err(e) => panic!("the named minimum {min_volume_bytes} does not fit: {e}"),
            }
        }
        Err(_) => {}
    }
}

/// Panics unless `l` is a sound volume map, checked from first principles rather than
/// by [`VolumeLayout::validate`] (which must agree).
pub fn check_map(l: &VolumeLayout) {
    if let Err(e) = l.validate() {
        panic!("layout does not validate: {e}: {l:?}");
    }
    let meta = u64::from(l.meta_block_bytes);
    let chunk = u64::from(l.chunk_size_bytes);
    let lbs = u64::from(l.logical_block_bytes);
    assert!(
        meta >= META_STRUCT_SIZE_BYTES as u64 && meta % lbs == 0,
        "{l:?}"
    );
    assert_eq!(chunk % meta, 0, "{l:?}");
    // Superblock A, the index area, the data area and superblock B come in this order,
    // inside the volume, without overlap.
    let [a, b] = l.superblock_offsets_bytes();
    assert_eq!(a, SUPERBLOCK_A_OFFSET_BYTES);
    assert!(l.index_offset_bytes >= a + meta, "{l:?}");
    assert_eq!(l.index_offset_bytes % meta, 0, "{l:?}");
    assert!(
        l.index_offset_bytes + l.index_len_bytes() <= l.data_offset_bytes,
        "{l:?}"
    );
    assert!(l.data_slot_count >= 1, "{l:?}");
    assert!(l.data_offset_bytes + l.data_len_bytes() <= b, "{l:?}");
    assert!(b + meta <= l.volume_size_bytes, "{l:?}");
    // Copy B is the last whole metadata block: findable from the volume size alone.
    assert!(l.volume_size_bytes - (b + meta) < meta, "{l:?}");
    assert_eq!(b % meta, 0, "{l:?}");
    // The data area starts on a chunk boundary and is whole chunks long.
    assert_eq!(l.data_offset_bytes % chunk, 0, "{l:?}");
    assert_eq!(l.data_len_bytes() % chunk, 0, "{l:?}");
    // Every slot accessor agrees with the map.
    let first_cp = l.checkpoint_slot_offset_bytes(0);
    assert_eq!(first_cp, Some(l.index_offset_bytes));
    let last_entry = l.recording_entry_offset_bytes(l.recording_slot_count - 1, 1);
    assert_eq!(
        last_entry.map(|o| o + meta),
        Some(l.index_offset_bytes + l.index_len_bytes())
    );
    let last_slot = l.data_slot_offset_bytes(l.data_slot_count - 1);
    assert_eq!(
        last_slot.map(|o| o + chunk),
        Some(l.data_offset_bytes + l.data_len_bytes())
    );
    assert_eq!(l.data_slot_offset_bytes(l.data_slot_count), None);
    assert_eq!(
        l.checkpoint_slot_offset_bytes(l.checkpoint_slot_count),
        None
    );
}

/// Packs packets of these data into payloads of `capacity` bytes as the network sources do
/// (`frame_span`: a packet that does not fit spans into the next payload); the payloads.
pub fn pack_records(datas: &[Vec<u8>], capacity: usize) -> Vec<Vec<u8>> {
    let mut payloads = Vec::new();
    let mut payload = vec![0u8; capacity];
    let mut used = 0;
    for (index, data) in datas.iter().enumerate() {
        let packet = Packet {
            stream: (index % 3) as u16,
            content: Content::Udp,
            timestamp_ns: index as u64,
            original_len: data.len() as u32,
            data,
            peer: None,
            local: None,
            end: false,
        };
        let header = packet_header(&packet, data.len());
        let mut placed = 0;
        loop {
            // None: the payload is full; a fragment that goes on fills it.
            if let Some(spanned) = frame_span(&mut payload[used..], &header, data, placed) {
                used += spanned.record_bytes;
                placed += spanned.data_bytes;
                if !spanned.part.continues() {
                    break;
                }
            }
            payloads.push(payload[..used].to_vec());
            used = 0;
        }
    }
    payloads.push(payload[..used].to_vec());
    payloads
}

/// Records that span payloads: [`Reassembly`] never panics on any payloads, contiguous or
/// not; and packets of sizes the input gives, packed by [`pack_records`] into payloads of a
/// capacity it gives, come back the same and in order, with no loss, every payload but the
/// last full to within [`FRAGMENT_BYTES_MIN`].
pub fn records_span(data: &[u8]) {
    let mut reassembly = Reassembly::new();
    let mut offset = 0u64;
    for (index, payload) in data.split(|&byte| byte == 0xa5).enumerate() {
        // Every third payload after a hole.
        let at = offset + if index % 3 == 2 { 8 } else { 0 };
        for record in reassembly.payload(at, payload) {
            let _ = record;
        }
        offset = at + payload.len() as u64;
    }
    let _ = reassembly.finish();

    let Some((&first, sizes)) = data.split_first() else {
        return;
    };
    let capacity = FRAGMENT_BYTES_MIN + 8 * first as usize;
    let datas: Vec<Vec<u8>> = sizes
        .chunks(2)
        .take(64)
        .enumerate()
        .map(|(index, size)| {
            let len = size.iter().fold(0usize, |len, &b| len << 8 | b as usize) % 9000;
            (0..len).map(|at| (at * 31 + index) as u8).collect()
        })
        .collect();
    let payloads = pack_records(&datas, capacity);
    for payload in &payloads[..payloads.len() - 1] {
        assert!(payload.len() <= capacity);
        assert!(
            payload.len() > capacity - FRAGMENT_BYTES_MIN,
            "a payload of {} bytes of {capacity} left room",
            payload.len()
        );
    }
    let mut reassembly = Reassembly::new();
    let mut found = Vec::new();
    let mut offset = 0;
    for payload in &payloads {
        for record in reassembly.payload(offset, payload) {
            match record {
                Ok(Record::Packet(packet)) => found.push(packet.data.to_vec()),
                other => panic!("{other:?} from packets packed whole"),
            }
        }
        offset += payload.len() as u64;
    }
    assert_eq!(reassembly.finish(), None);
    assert!(found == datas, "packets changed in a round trip");
}
