//! Power cuts through a loop device with O_DIRECT, with unflushed writes tracked: what an
//! fsync made durable survives, what came after is lost (or, torn, kept in a seeded subset
//! of its 4 KiB sectors), and the bound on unflushed data fails writes loudly.

mod common;

use common::{errno, read, rig, write, write_bytes, AlignedBuf};
use nvrec_faultydisk::{torn_keep, Durability, Error, SECTOR_BYTES};

const MIB: u64 = 1 << 20;
const KIB: usize = 1 << 10;

fn tracking(max_bytes: u64) -> Durability {
    Durability::TrackUnflushed { max_bytes }
}

#[test]
fn flushed_data_survives_a_power_cut_and_unflushed_data_does_not() {
    let Some(rig) = rig("power-cut", 16 * MIB, tracking(8 * MIB)) else {
        return;
    };
    let dev = &rig.device;
    write(dev, 0, 64 * KIB, 0xA1).unwrap();
    dev.sync_all().unwrap();
    assert_eq!(rig.disk.stats().unflushed_bytes, 0);
    // Unflushed: half over the flushed data, half over never-written zeros.
    write(dev, 32 * KIB as u64, 64 * KIB, 0xB2).unwrap();
    assert_eq!(rig.disk.stats().unflushed_bytes, 64 * KIB as u64);
    let before = read(dev, 0, 96 * KIB).unwrap();
    assert!(before[..32 * KIB].iter().all(|b| *b == 0xA1));
    assert!(
        before[32 * KIB..].iter().all(|b| *b == 0xB2),
        "read-your-writes"
    );

    let cut = rig.disk.power_cut(None).unwrap();
    assert_eq!(cut.sectors_dropped, 16);
    let after = read(dev, 0, 96 * KIB).unwrap();
    assert!(
        after[..64 * KIB].iter().all(|b| *b == 0xA1),
        "flushed data lost"
    );
    assert!(
        after[64 * KIB..].iter().all(|b| *b == 0),
        "unflushed data kept"
    );
    let stats = rig.disk.stats();
    assert_eq!((stats.power_cuts, stats.unflushed_bytes), (1, 0));
    assert!(stats.fsyncs >= 1, "{stats:?}");
    rig.finish();
}

#[test]
fn a_seeded_torn_cut_keeps_a_deterministic_subset_of_sectors() {
    let Some(rig) = rig("power-cut-torn", 16 * MIB, tracking(8 * MIB)) else {
        return;
    };
    let dev = &rig.device;
    let sector_count = 32;
    let offset = 4 * MIB;
    write(dev, offset, sector_count * SECTOR_BYTES as usize, 0x11).unwrap();
    dev.sync_all().unwrap();
    // Each unflushed sector carries its index, so a kept sector is told from a lost one.
    let mut data = vec![0u8; sector_count * SECTOR_BYTES as usize];
    for (index, sector) in data.chunks_mut(SECTOR_BYTES as usize).enumerate() {
        sector.fill(0x80 | index as u8);
    }
    write_bytes(dev, offset, &AlignedBuf::from_slice(&data)).unwrap();

    let cut = rig.disk.power_cut(Some(7)).unwrap();
    let keep = torn_keep(7, sector_count);
    let kept = keep.iter().filter(|k| **k).count() as u64;
    assert_eq!(
        (cut.sectors_kept, cut.sectors_dropped),
        (kept, sector_count as u64 - kept)
    );
    assert!(
        kept > 0 && kept < sector_count as u64,
        "seed 7 tears: {keep:?}"
    );
    let after = read(dev, offset, sector_count * SECTOR_BYTES as usize).unwrap();
    for (index, sector) in after.chunks(SECTOR_BYTES as usize).enumerate() {
        let want = if keep[index] {
            0x80 | index as u8
        } else {
            0x11
        };
        assert!(sector.iter().all(|b| *b == want), "sector {index}");
    }
    rig.finish();
}

#[test]
fn writes_past_the_unflushed_bound_fail_and_are_counted() {
    let Some(rig) = rig("power-cut-bound", 16 * MIB, tracking(256 * KIB as u64)) else {
        return;
    };
    let dev = &rig.device;
    write(dev, 0, 256 * KIB, 1).unwrap();
    assert_eq!(errno(&write(dev, MIB, 4 * KIB, 2)), libc::EIO);
    assert_eq!(rig.disk.stats().overlay_overflows, 1);
    dev.sync_all().unwrap();
    assert_eq!(
        errno(&write(dev, MIB, 4 * KIB, 2)),
        0,
        "room again after a flush"
    );
    rig.finish();
}

#[test]
fn a_power_cut_needs_tracking() {
    let Some(rig) = rig("power-cut-untracked", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    assert!(matches!(rig.disk.power_cut(None), Err(Error::NotTracking)));
    rig.finish();
}
