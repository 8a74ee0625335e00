//! RecordingEntry::decode on arbitrary input never panics, and what it accepts round-trips
//! (the property is nvrec::layout::fuzzing::recording_entry, which the crate's tests also run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvrec::layout::{self, fuzzing};

fuzz_target!(|data: &[u8]| {
    // As they come, and sealed (right magic, version and CRC) to reach the field checks.
    fuzzing::recording_entry(data);
    fuzzing::recording_entry(&fuzzing::sealed_meta(&layout::RECORDING_ENTRY_MAGIC, data));
});
