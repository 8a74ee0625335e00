//! The CPU hot loops of the data path, each on one core: pattern generation and checking,
//! CRC32C, and chunk framing (header encode with CRC, and decode with CRC check).
//! Run with `cargo bench -p nvrec --features criterion --bench hot_loops`; throughput is reported in GiB/s.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nvrec::layout::{decode_chunk, ChunkFlags, ChunkHeader, Uuid};
use nvrec::pattern::Pattern;
use std::hint::black_box;

const CHUNK_BYTES: usize = 128 << 10;
const BUFFER_BYTES: usize = 8 << 20;

fn pattern(c: &mut Criterion) {
    let mut group = c.benchmark_group("pattern");
    group.throughput(Throughput::Bytes(BUFFER_BYTES as u64));
    let pattern = Pattern::new(7);
    let mut buffer = vec![0u8; BUFFER_BYTES];
    group.bench_function("fill", |b| {
        b.iter(|| pattern.fill(black_box(1 << 30), &mut buffer))
    });
    pattern.fill(1 << 30, &mut buffer);
    group.bench_function("check", |b| {
        b.iter(|| {
            assert!(pattern
                .check(black_box(1 << 30), &buffer, CHUNK_BYTES as u64)
                .is_ok())
        })
    });
    group.finish();
}

fn crc(c: &mut Criterion) {
    let mut group = c.benchmark_group("crc32c");
    group.throughput(Throughput::Bytes(BUFFER_BYTES as u64));
    let mut buffer = vec![0u8; BUFFER_BYTES];
    Pattern::new(1).fill(0, &mut buffer);
    group.bench_function("8MiB", |b| {
        b.iter(|| black_box(nvrec::layout::crc32c(black_box(&buffer))))
    });
    // One chunk's payload, in cache: the kernel's own speed.
    group.throughput(Throughput::Bytes(CHUNK_BYTES as u64));
    group.bench_function("128KiB", |b| {
        b.iter(|| black_box(nvrec::layout::crc32c(black_box(&buffer[..CHUNK_BYTES]))))
    });
    group.finish();
}

fn framing(c: &mut Criterion) {
    let mut group = c.benchmark_group("chunk");
    group.throughput(Throughput::Bytes(CHUNK_BYTES as u64));
    let mut slot = vec![0u8; CHUNK_BYTES];
    Pattern::new(2).fill(0, &mut slot);
    let payload_len_bytes = nvrec::layout::payload_capacity_bytes(CHUNK_BYTES as u32);
    let header = ChunkHeader {
        set_uuid: Uuid::from_random_bytes([7; 16]),
        recording_id: 1,
        member_index: 0,
        stream_id: 0,
        sequence: 42,
        slot_index: 42,
        timestamp_ns: 1,
        elapsed_ns: 0,
        stream_offset_bytes: 0,
        gap_bytes: 0,
        payload_len_bytes,
        flags: ChunkFlags::empty(),
    };
    group.bench_function("encode", |b| {
        b.iter(|| header.encode_into(black_box(&mut slot)).unwrap())
    });
    header.encode_into(&mut slot).unwrap();
    group.bench_function("decode", |b| {
        b.iter(|| black_box(decode_chunk(black_box(&slot)).unwrap()))
    });
    group.finish();
}

criterion_group!(benches, pattern, crc, framing);
criterion_main!(benches);
