//! Checkpoint::decode on arbitrary input never panics, and what it accepts round-trips
//! (the property is nvrec::layout::fuzzing::checkpoint, which the crate's tests also run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvrec::layout::{self, fuzzing};

fuzz_target!(|data: &[u8]| {
    // As they come, and sealed (right magic, version and CRC) to reach the field checks.
    fuzzing::checkpoint(data);
    fuzzing::checkpoint(&fuzzing::sealed_meta(&layout::CHECKPOINT_MAGIC, data));
});
