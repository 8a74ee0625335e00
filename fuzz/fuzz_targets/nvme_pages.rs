//! The NVMe decoders (Identify Controller, Identify Namespace, SMART log, the OCP counter)
//! never panic on arbitrary bytes, whatever their length, and what the SMART decoder accepts
//! becomes a report without overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nvrec::nvme::{decode_ocp_physical_written, page, SmartReport};

fuzz_target!(|data: &[u8]| {
    let _ = page::decode_identify_controller(data);
    if let Ok(namespace) = page::decode_identify_namespace(data) {
        assert!(namespace.formats.len() <= 64);
        let _ = namespace.block_bytes();
    }
    if let Ok(log) = page::decode_smart_log(data) {
        let report = SmartReport::new(&log);
        assert!(report.temperature_sensors_kelvin.len() <= 8);
        let _ = (log.throttled_seconds(), log.throttle_transitions(), log.data_written_bytes());
    }
    let _ = decode_ocp_physical_written(data);
});
