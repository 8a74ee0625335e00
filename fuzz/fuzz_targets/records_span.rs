//! Records that span payloads: the reassembly never panics on any payloads, and packets
//! packed into payloads of any size come back the same (the property is
//! nvrec::layout::fuzzing::records_span, which the crate's tests also run).
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvrec::layout::fuzzing;

fuzz_target!(|data: &[u8]| {
    fuzzing::records_span(data);
});
