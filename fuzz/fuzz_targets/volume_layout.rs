//! VolumeLayout::compute_with on arbitrary parameters never panics, every layout it returns
//! is a sound volume map, and the minimum size it names for a too-small volume is enough
//! (the property is nvrec::layout::fuzzing::volume_layout, which the crate's tests also run).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nvrec::layout::fuzzing::volume_layout(data);
});
