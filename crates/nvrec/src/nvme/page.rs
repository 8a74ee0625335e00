//! Decoders for the NVMe data structures nvrec reads: Identify Controller (CNS 01h), Identify
//! Namespace (CNS 00h) and the SMART / Health Information log page (LID 02h). Offsets follow
//! the NVM Express Base Specification 2.0 (Identify Controller: figure 275; Identify
//! Namespace: NVM Command Set Specification 1.0, figure 97; SMART log: figure 207).
//!
//! Pure: they take bytes and never panic; short input is a [`DecodeError`]. Multi-byte fields
//! are little-endian. 128-bit counters stay `u128` here; reports convert them.

/// Bytes of an Identify data structure.
pub const IDENTIFY_BYTES: usize = 4096;
/// Bytes of the SMART / Health Information log page.
pub const SMART_LOG_BYTES: usize = 512;
/// Data units in the SMART log count thousands of 512-byte units (figure 207).
pub const DATA_UNIT_BYTES: u128 = 512_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{what} needs {needed} bytes, got {got}")]
pub struct DecodeError {
    pub what: &'static str,
    pub needed: usize,
    pub got: usize,
}

fn need(what: &'static str, bytes: &[u8], needed: usize) -> Result<(), DecodeError> {
    if bytes.len() < needed {
        return Err(DecodeError {
            what,
            needed,
            got: bytes.len(),
        });
    }
    Ok(())
}

fn u16_at(bytes: &[u8], offset: usize) -> u16 {
    u16::from_le_bytes([bytes[offset], bytes[offset + 1]])
}

fn u32_at(bytes: &[u8], offset: usize) -> u32 {
    u32::from_le_bytes(bytes[offset..offset + 4].try_into().expect("4 bytes"))
}

fn u64_at(bytes: &[u8], offset: usize) -> u64 {
    u64::from_le_bytes(bytes[offset..offset + 8].try_into().expect("8 bytes"))
}

fn u128_at(bytes: &[u8], offset: usize) -> u128 {
    u128::from_le_bytes(bytes[offset..offset + 16].try_into().expect("16 bytes"))
}

/// ASCII fields are space-padded on the right.
fn ascii_at(bytes: &[u8], offset: usize, len: usize) -> String {
    String::from_utf8_lossy(&bytes[offset..offset + len])
        .trim_end_matches([' ', '\0'])
        .trim_start()
        .to_string()
}

/// What nvrec uses of Identify Controller.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IdentifyController {
    pub vendor_id: u16,
    pub subsystem_vendor_id: u16,
    pub serial: String,
    pub model: String,
    pub firmware: String,
    pub ieee_oui: u32,
    /// Maximum data transfer size as a power of two of the minimum page size (0 = no limit).
    pub mdts: u8,
    pub controller_id: u16,
    /// `major.minor.tertiary`, or empty when the controller reports 0.
    pub version: String,
    /// Warning and critical composite temperature thresholds (Kelvin; 0 = not reported).
    pub warning_temperature_kelvin: u16,
    pub critical_temperature_kelvin: u16,
    /// Host-controlled thermal management limits (Kelvin; 0 = not supported).
    pub thermal_management_min_kelvin: u16,
    pub thermal_management_max_kelvin: u16,
    /// Host Memory Buffer the controller would like and the least it can use (HMPRE, HMMIN,
    /// 4 KiB units on the wire; 0 = no host memory buffer wanted).
    pub host_memory_buffer_preferred_bytes: u64,
    pub host_memory_buffer_min_bytes: u64,
    pub total_capacity_bytes: u128,
    pub unallocated_capacity_bytes: u128,
    pub namespace_count: u32,
    pub subsystem_nqn: String,
}

pub fn decode_identify_controller(bytes: &[u8]) -> Result<IdentifyController, DecodeError> {
    need("Identify Controller", bytes, IDENTIFY_BYTES)?;
    let version = u32_at(bytes, 80);
    Ok(IdentifyController {
        vendor_id: u16_at(bytes, 0),
        subsystem_vendor_id: u16_at(bytes, 2),
        serial: ascii_at(bytes, 4, 20),
        model: ascii_at(bytes, 24, 40),
        firmware: ascii_at(bytes, 64, 8),
        ieee_oui: u32::from_le_bytes([bytes[73], bytes[74], bytes[75], 0]),
        mdts: bytes[77],
        controller_id: u16_at(bytes, 78),
        version: if version == 0 {
            String::new()
        } else {
            format!(
                "{}.{}.{}",
                version >> 16,
                (version >> 8) & 0xff,
                version & 0xff
            )
        },
        warning_temperature_kelvin: u16_at(bytes, 266),
        critical_temperature_kelvin: u16_at(bytes, 268),
        host_memory_buffer_preferred_bytes: u64::from(u32_at(bytes, 272)) * 4096,
        host_memory_buffer_min_bytes: u64::from(u32_at(bytes, 276)) * 4096,
        total_capacity_bytes: u128_at(bytes, 280),
        unallocated_capacity_bytes: u128_at(bytes, 296),
        thermal_management_min_kelvin: u16_at(bytes, 324),
        thermal_management_max_kelvin: u16_at(bytes, 326),
        namespace_count: u32_at(bytes, 516),
        subsystem_nqn: ascii_at(bytes, 768, 256),
    })
}

/// One LBA format a namespace supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LbaFormat {
    pub index: u8,
    pub data_bytes: u32,
    pub metadata_bytes: u16,
    /// 0 best, 1 better, 2 good, 3 degraded (as the drive rates it).
    pub relative_performance: u8,
    pub in_use: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct IdentifyNamespace {
    pub size_blocks: u64,
    pub capacity_blocks: u64,
    pub used_blocks: u64,
    pub formats: Vec<LbaFormat>,
    pub format_in_use: u8,
}

impl IdentifyNamespace {
    /// Bytes in a block of the format in use.
    pub fn block_bytes(&self) -> Option<u32> {
        self.formats
            .iter()
            .find(|format| format.in_use)
            .map(|format| format.data_bytes)
    }
}

pub fn decode_identify_namespace(bytes: &[u8]) -> Result<IdentifyNamespace, DecodeError> {
    need("Identify Namespace", bytes, IDENTIFY_BYTES)?;
    let format_count = bytes[25] as usize + 1; // NLBAF is zero-based.
    let flbas = bytes[26];
    // FLBAS bits 3:0 and, beyond 16 formats, bits 6:5 as the upper bits of the index.
    let format_in_use = (flbas & 0x0f) | ((flbas >> 1) & 0x30);
    let formats = (0..format_count.min(64))
        .map(|index| {
            let descriptor = u32_at(bytes, 128 + 4 * index);
            let lbads = (descriptor >> 16) & 0xff;
            LbaFormat {
                index: index as u8,
                data_bytes: if (9..32).contains(&lbads) {
                    1 << lbads
                } else {
                    0
                },
                metadata_bytes: (descriptor & 0xffff) as u16,
                relative_performance: ((descriptor >> 24) & 0x3) as u8,
                in_use: index as u8 == format_in_use,
            }
        })
        .collect();
    Ok(IdentifyNamespace {
        size_blocks: u64_at(bytes, 0),
        capacity_blocks: u64_at(bytes, 8),
        used_blocks: u64_at(bytes, 16),
        formats,
        format_in_use,
    })
}

/// The critical warning bits (figure 207, byte 0) and what they mean.
pub const CRITICAL_WARNINGS: [(u8, &str, &str); 6] = [
    (
        0,
        "available_spare",
        "available spare capacity is below its threshold",
    ),
    (
        1,
        "temperature",
        "a temperature is above its over-temperature or below its under-temperature threshold",
    ),
    (
        2,
        "reliability",
        "NVM subsystem reliability is degraded (media or internal errors)",
    ),
    (
        3,
        "read_only",
        "the media has been placed in read-only mode",
    ),
    (
        4,
        "volatile_backup",
        "the volatile memory backup device has failed",
    ),
    (
        5,
        "persistent_memory",
        "the persistent memory region is read-only or unreliable",
    ),
];

/// The SMART / Health Information log.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SmartLog {
    pub critical_warning: u8,
    pub composite_temperature_kelvin: u16,
    pub available_spare_percent: u8,
    pub available_spare_threshold_percent: u8,
    pub percentage_used: u8,
    pub endurance_group_warning_summary: u8,
    /// Thousands of 512-byte units ([`DATA_UNIT_BYTES`]).
    pub data_units_read: u128,
    pub data_units_written: u128,
    pub host_read_commands: u128,
    pub host_write_commands: u128,
    pub controller_busy_time_minutes: u128,
    pub power_cycles: u128,
    pub power_on_hours: u128,
    pub unsafe_shutdowns: u128,
    pub media_errors: u128,
    pub error_log_entries: u128,
    pub warning_temperature_time_minutes: u32,
    pub critical_temperature_time_minutes: u32,
    /// Sensors 1 to 8, Kelvin; 0 where the sensor is not implemented.
    pub temperature_sensors_kelvin: [u16; 8],
    /// Thermal management temperature 1 and 2: transitions into throttling, and seconds spent.
    pub thermal_transition_count: [u32; 2],
    pub thermal_time_seconds: [u32; 2],
}

impl SmartLog {
    /// Names of the critical warning bits that are set.
    pub fn critical_warning_names(&self) -> Vec<&'static str> {
        CRITICAL_WARNINGS
            .iter()
            .filter(|(bit, _, _)| self.critical_warning & (1 << bit) != 0)
            .map(|(_, name, _)| *name)
            .collect()
    }

    pub fn data_read_bytes(&self) -> u128 {
        self.data_units_read.saturating_mul(DATA_UNIT_BYTES)
    }

    pub fn data_written_bytes(&self) -> u128 {
        self.data_units_written.saturating_mul(DATA_UNIT_BYTES)
    }

    /// Total seconds spent in either thermal management state.
    pub fn throttled_seconds(&self) -> u64 {
        self.thermal_time_seconds.iter().map(|s| *s as u64).sum()
    }

    pub fn throttle_transitions(&self) -> u64 {
        self.thermal_transition_count
            .iter()
            .map(|c| *c as u64)
            .sum()
    }
}

pub fn decode_smart_log(bytes: &[u8]) -> Result<SmartLog, DecodeError> {
    need("SMART / Health Information log", bytes, SMART_LOG_BYTES)?;
    let mut sensors = [0u16; 8];
    for (index, sensor) in sensors.iter_mut().enumerate() {
        *sensor = u16_at(bytes, 200 + 2 * index);
    }
    Ok(SmartLog {
        critical_warning: bytes[0],
        composite_temperature_kelvin: u16_at(bytes, 1),
        available_spare_percent: bytes[3],
        available_spare_threshold_percent: bytes[4],
        percentage_used: bytes[5],
        endurance_group_warning_summary: bytes[6],
        data_units_read: u128_at(bytes, 32),
        data_units_written: u128_at(bytes, 48),
        host_read_commands: u128_at(bytes, 64),
        host_write_commands: u128_at(bytes, 80),
        controller_busy_time_minutes: u128_at(bytes, 96),
        power_cycles: u128_at(bytes, 112),
        power_on_hours: u128_at(bytes, 128),
        unsafe_shutdowns: u128_at(bytes, 144),
        media_errors: u128_at(bytes, 160),
        error_log_entries: u128_at(bytes, 176),
        warning_temperature_time_minutes: u32_at(bytes, 192),
        critical_temperature_time_minutes: u32_at(bytes, 196),
        temperature_sensors_kelvin: sensors,
        thermal_transition_count: [u32_at(bytes, 216), u32_at(bytes, 220)],
        thermal_time_seconds: [u32_at(bytes, 224), u32_at(bytes, 228)],
    })
}

/// Kelvin to degrees Celsius, as NVMe reports temperatures.
pub fn kelvin_to_celsius(kelvin: u16) -> f64 {
    kelvin as f64 - 273.15
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(bytes: &mut [u8], offset: usize, value: &[u8]) {
        bytes[offset..offset + value.len()].copy_from_slice(value);
    }

    #[test]
    fn smart_log_fields_come_from_their_offsets() {
        let mut page = vec![0u8; SMART_LOG_BYTES];
        page[0] = 0b0000_0110;
        put(&mut page, 1, &318u16.to_le_bytes());
        page[3] = 100;
        page[4] = 10;
        page[5] = 42;
        let counters: [(usize, u128); 10] = [
            (32, 123_456),
            (48, 987_654_321),
            (64, 11),
            (80, 22),
            (96, 33),
            (112, 44),
            (128, 55),
            (144, 66),
            (160, 77),
            (176, u64::MAX as u128 + 5),
        ];
        for (offset, value) in counters {
            put(&mut page, offset, &value.to_le_bytes());
        }
        put(&mut page, 192, &7u32.to_le_bytes());
        put(&mut page, 196, &8u32.to_le_bytes());
        put(&mut page, 200, &320u16.to_le_bytes());
        put(&mut page, 202, &330u16.to_le_bytes());
        put(&mut page, 216, &3u32.to_le_bytes());
        put(&mut page, 220, &1u32.to_le_bytes());
        put(&mut page, 224, &90u32.to_le_bytes());
        put(&mut page, 228, &15u32.to_le_bytes());
        let log = decode_smart_log(&page).unwrap();
        assert_eq!(log.composite_temperature_kelvin, 318);
        assert!((kelvin_to_celsius(318) - 44.85).abs() < 1e-9);
        assert_eq!(
            (
                log.available_spare_percent,
                log.available_spare_threshold_percent,
                log.percentage_used
            ),
            (100, 10, 42)
        );
        assert_eq!(log.data_units_read, 123_456);
        assert_eq!(log.data_written_bytes(), 987_654_321 * 512_000);
        assert_eq!(
            [
                log.host_read_commands,
                log.host_write_commands,
                log.controller_busy_time_minutes,
                log.power_cycles,
                log.power_on_hours,
                log.unsafe_shutdowns,
                log.media_errors
            ],
            [11, 22, 33, 44, 55, 66, 77]
        );
        assert_eq!(log.error_log_entries, u64::MAX as u128 + 5);
        assert_eq!(
            (
                log.warning_temperature_time_minutes,
                log.critical_temperature_time_minutes
            ),
            (7, 8)
        );
        assert_eq!(log.temperature_sensors_kelvin[..3], [320, 330, 0]);
        assert_eq!(log.thermal_transition_count, [3, 1]);
        assert_eq!(log.throttled_seconds(), 105);
        assert_eq!(log.critical_warning_names(), ["temperature", "reliability"]);
    }

    #[test]
    fn identify_controller_fields_come_from_their_offsets() {
        let mut page = vec![0u8; IDENTIFY_BYTES];
        put(&mut page, 0, &0x1b36u16.to_le_bytes());
        put(&mut page, 4, b"NVREC0001           ");
        put(
            &mut page,
            24,
            format!("{:<40}", "QEMU NVMe Ctrl").as_bytes(),
        );
        put(&mut page, 64, b"7.2.22  ");
        put(&mut page, 73, &[0x00, 0x54, 0x52]);
        page[77] = 7;
        put(&mut page, 78, &5u16.to_le_bytes());
        put(&mut page, 80, &0x0001_0400u32.to_le_bytes());
        put(&mut page, 266, &343u16.to_le_bytes());
        put(&mut page, 268, &373u16.to_le_bytes());
        put(&mut page, 280, &(1u128 << 40).to_le_bytes());
        put(&mut page, 324, &300u16.to_le_bytes());
        put(&mut page, 326, &350u16.to_le_bytes());
        put(&mut page, 516, &256u32.to_le_bytes());
        put(&mut page, 768, b"nqn.2019-08.org.qemu:NVREC0001");
        let id = decode_identify_controller(&page).unwrap();
        assert_eq!(id.vendor_id, 0x1b36);
        assert_eq!(id.serial, "NVREC0001");
        assert_eq!(id.model, "QEMU NVMe Ctrl");
        assert_eq!(id.firmware, "7.2.22");
        assert_eq!(id.ieee_oui, 0x525400);
        assert_eq!((id.mdts, id.controller_id), (7, 5));
        assert_eq!(id.version, "1.4.0");
        assert_eq!(
            (
                id.warning_temperature_kelvin,
                id.critical_temperature_kelvin
            ),
            (343, 373)
        );
        assert_eq!(id.total_capacity_bytes, 1 << 40);
        assert_eq!(
            (
                id.thermal_management_min_kelvin,
                id.thermal_management_max_kelvin
            ),
            (300, 350)
        );
        assert_eq!(id.namespace_count, 256);
        assert_eq!(id.subsystem_nqn, "nqn.2019-08.org.qemu:NVREC0001");
    }

    #[test]
    fn identify_namespace_lists_formats_and_the_one_in_use() {
        let mut page = vec![0u8; IDENTIFY_BYTES];
        put(&mut page, 0, &2_097_152u64.to_le_bytes());
        put(&mut page, 8, &2_097_152u64.to_le_bytes());
        put(&mut page, 16, &1000u64.to_le_bytes());
        page[25] = 1; // two formats
        page[26] = 1; // the second in use
        put(&mut page, 128, &((9u32 << 16) | (2 << 24)).to_le_bytes());
        put(&mut page, 132, &((12u32 << 16) | 8).to_le_bytes());
        let ns = decode_identify_namespace(&page).unwrap();
        assert_eq!(ns.size_blocks, 2_097_152);
        assert_eq!(ns.used_blocks, 1000);
        assert_eq!(ns.formats.len(), 2);
        assert_eq!(
            (ns.formats[0].data_bytes, ns.formats[0].relative_performance),
            (512, 2)
        );
        assert_eq!(
            (ns.formats[1].data_bytes, ns.formats[1].metadata_bytes),
            (4096, 8)
        );
        assert_eq!(ns.block_bytes(), Some(4096));
        // 64 formats with FLBAS upper bits: index 0x23.
        page[25] = 63;
        page[26] = 0x03 | (0x2 << 5);
        let ns = decode_identify_namespace(&page).unwrap();
        assert_eq!(ns.formats.len(), 64);
        assert_eq!(ns.format_in_use, 0x23);
    }

    /// A field: its name, offset and width in bytes, and how to read it from the decoded value.
    type Field<T> = (&'static str, usize, usize, fn(&T) -> u128);

    /// Every field with its offset and width: set alone to a distinct value, it must come out
    /// of its own field and no other (catches wrong and overlapping offsets).
    fn field_by_field<T>(
        page_bytes: usize,
        decode: fn(&[u8]) -> Result<T, DecodeError>,
        fields: &[Field<T>],
    ) {
        for (name, offset, width, _) in fields {
            let mut page = vec![0u8; page_bytes];
            // Bytes 0x11, 0x12, ... so byte order and width both show.
            let value: Vec<u8> = (0..*width).map(|i| 0x11 + i as u8).collect();
            put(&mut page, *offset, &value);
            let mut expected = [0u8; 16];
            expected[..*width].copy_from_slice(&value);
            let expected = u128::from_le_bytes(expected);
            let decoded = decode(&page).unwrap();
            for (other, _, _, get) in fields {
                let want = if other == name { expected } else { 0 };
                assert_eq!(get(&decoded), want, "{other} with only {name} set");
            }
        }
    }

    #[test]
    fn smart_log_offsets_field_by_field() {
        // NVM Express Base Specification 2.0, figure 207.
        let fields: &[Field<SmartLog>] = &[
            ("critical_warning", 0, 1, |l| l.critical_warning.into()),
            ("composite_temperature", 1, 2, |l| {
                l.composite_temperature_kelvin.into()
            }),
            ("available_spare", 3, 1, |l| {
                l.available_spare_percent.into()
            }),
            ("available_spare_threshold", 4, 1, |l| {
                l.available_spare_threshold_percent.into()
            }),
            ("percentage_used", 5, 1, |l| l.percentage_used.into()),
            ("endurance_group_warning", 6, 1, |l| {
                l.endurance_group_warning_summary.into()
            }),
            ("data_units_read", 32, 16, |l| l.data_units_read),
            ("data_units_written", 48, 16, |l| l.data_units_written),
            ("host_read_commands", 64, 16, |l| l.host_read_commands),
            ("host_write_commands", 80, 16, |l| l.host_write_commands),
            ("controller_busy_time", 96, 16, |l| {
                l.controller_busy_time_minutes
            }),
            ("power_cycles", 112, 16, |l| l.power_cycles),
            ("power_on_hours", 128, 16, |l| l.power_on_hours),
            ("unsafe_shutdowns", 144, 16, |l| l.unsafe_shutdowns),
            ("media_errors", 160, 16, |l| l.media_errors),
            ("error_log_entries", 176, 16, |l| l.error_log_entries),
            ("warning_temperature_time", 192, 4, |l| {
                l.warning_temperature_time_minutes.into()
            }),
            ("critical_temperature_time", 196, 4, |l| {
                l.critical_temperature_time_minutes.into()
            }),
            ("sensor_1", 200, 2, |l| {
                l.temperature_sensors_kelvin[0].into()
            }),
            ("sensor_2", 202, 2, |l| {
                l.temperature_sensors_kelvin[1].into()
            }),
            ("sensor_3", 204, 2, |l| {
                l.temperature_sensors_kelvin[2].into()
            }),
            ("sensor_4", 206, 2, |l| {
                l.temperature_sensors_kelvin[3].into()
            }),
            ("sensor_5", 208, 2, |l| {
                l.temperature_sensors_kelvin[4].into()
            }),
            ("sensor_6", 210, 2, |l| {
                l.temperature_sensors_kelvin[5].into()
            }),
            ("sensor_7", 212, 2, |l| {
                l.temperature_sensors_kelvin[6].into()
            }),
            ("sensor_8", 214, 2, |l| {
                l.temperature_sensors_kelvin[7].into()
            }),
            ("tmt1_transitions", 216, 4, |l| {
                l.thermal_transition_count[0].into()
            }),
            ("tmt2_transitions", 220, 4, |l| {
                l.thermal_transition_count[1].into()
            }),
            ("tmt1_time", 224, 4, |l| l.thermal_time_seconds[0].into()),
            ("tmt2_time", 228, 4, |l| l.thermal_time_seconds[1].into()),
        ];
        field_by_field(SMART_LOG_BYTES, decode_smart_log, fields);
    }

    #[test]
    fn identify_controller_offsets_field_by_field() {
        // NVM Express Base Specification 2.0, figure 275.
        let fields: &[Field<IdentifyController>] = &[
            ("vid", 0, 2, |c| c.vendor_id.into()),
            ("ssvid", 2, 2, |c| c.subsystem_vendor_id.into()),
            ("ieee", 73, 3, |c| c.ieee_oui.into()),
            ("mdts", 77, 1, |c| c.mdts.into()),
            ("cntlid", 78, 2, |c| c.controller_id.into()),
            ("wctemp", 266, 2, |c| c.warning_temperature_kelvin.into()),
            ("cctemp", 268, 2, |c| c.critical_temperature_kelvin.into()),
            ("hmpre", 272, 4, |c| {
                (c.host_memory_buffer_preferred_bytes / 4096).into()
            }),
            ("hmmin", 276, 4, |c| {
                (c.host_memory_buffer_min_bytes / 4096).into()
            }),
            ("tnvmcap", 280, 16, |c| c.total_capacity_bytes),
            ("unvmcap", 296, 16, |c| c.unallocated_capacity_bytes),
            ("mntmt", 324, 2, |c| c.thermal_management_min_kelvin.into()),
            ("mxtmt", 326, 2, |c| c.thermal_management_max_kelvin.into()),
            ("nn", 516, 4, |c| c.namespace_count.into()),
        ];
        field_by_field(IDENTIFY_BYTES, decode_identify_controller, fields);
    }

    #[test]
    fn identify_namespace_offsets_field_by_field() {
        // NVM Command Set Specification 1.0, figure 97.
        let fields: &[Field<IdentifyNamespace>] = &[
            ("nsze", 0, 8, |n| n.size_blocks.into()),
            ("ncap", 8, 8, |n| n.capacity_blocks.into()),
            ("nuse", 16, 8, |n| n.used_blocks.into()),
        ];
        field_by_field(IDENTIFY_BYTES, decode_identify_namespace, fields);
    }

    #[test]
    fn lba_format_descriptors_decode_each_part() {
        // (descriptor: RP bits 25:24, LBADS bits 23:16, MS bits 15:0) -> (data, metadata, rp)
        let cases: [(u32, (u32, u16, u8)); 5] = [
            (9 << 16, (512, 0, 0)),
            ((12 << 16) | 8, (4096, 8, 0)),
            ((3 << 24) | (12 << 16) | 64, (4096, 64, 3)),
            (0xfc00_0000 | (9 << 16), (512, 0, 0)), // reserved bits 31:26 ignored
            (8 << 16, (0, 0, 0)),                   // below 512 bytes: not a valid format
        ];
        for (descriptor, (data, metadata, performance)) in cases {
            let mut page = vec![0u8; IDENTIFY_BYTES];
            put(&mut page, 128, &descriptor.to_le_bytes());
            let format = decode_identify_namespace(&page).unwrap().formats[0];
            assert_eq!(
                (
                    format.data_bytes,
                    format.metadata_bytes,
                    format.relative_performance
                ),
                (data, metadata, performance),
                "descriptor {descriptor:#x}"
            );
            assert!(format.in_use);
        }
    }

    #[test]
    fn short_pages_are_errors_not_panics() {
        for len in [0, 1, 511] {
            assert!(decode_smart_log(&vec![0; len]).is_err());
        }
        for len in [0, 100, 4095] {
            assert!(decode_identify_controller(&vec![0; len]).is_err());
            assert!(decode_identify_namespace(&vec![0xff; len]).is_err());
        }
        let error = decode_smart_log(&[0; 10]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "SMART / Health Information log needs 512 bytes, got 10"
        );
        // All-ones pages decode without panicking (formats with nonsense sizes become 0).
        let ns = decode_identify_namespace(&[0xff; IDENTIFY_BYTES]).unwrap();
        assert!(ns.formats.iter().all(|format| format.data_bytes == 0));
    }
}
