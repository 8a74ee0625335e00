//! decode_chunk and decode_chunk_header on arbitrary input never panic and agree, and what
//! they accept round-trips (the property is nvrec::layout::fuzzing::chunk, which the crate's tests also run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvrec::layout::fuzzing;

fuzz_target!(|data: &[u8]| {
    // As they come, and sealed (right magic, version and CRCs) to reach the field checks.
    fuzzing::chunk(data);
    fuzzing::chunk(&fuzzing::sealed_chunk(data));
});
