//! A whole volume image, patched by the input (structures re-sealed with correct CRCs, or
//! cut short), read as `ls`, `verify` and `replay` read it: no panic, no runaway (the
//! property is nvrec::recording::fuzzing::volume_image, which the crate's tests also run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvrec::recording::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::volume_image(data);
});
