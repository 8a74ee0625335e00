//! Failed byte ranges through a loop device with O_DIRECT: writes and reads that touch the
//! range fail with the chosen errno, everything else succeeds.

mod common;

use common::{errno, read, rig, write};
use nvrec_faultydisk::{Durability, Errno, Op};

const MIB: u64 = 1 << 20;

#[test]
fn a_failed_write_range_fails_writes_touching_it_and_nothing_else() {
    let Some(rig) = rig("fail-write", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    rig.disk.fail(Op::Write, MIB..MIB + 65536, Errno::Eio);
    let dev = &rig.device;
    assert_eq!(
        errno(&write(dev, MIB, 65536, 1)),
        libc::EIO,
        "the range itself"
    );
    assert_eq!(
        errno(&write(dev, MIB + 65536 - 4096, 8192, 1)),
        libc::EIO,
        "its end"
    );
    assert_eq!(
        errno(&write(dev, MIB - 4096, 8192, 1)),
        libc::EIO,
        "its start"
    );
    assert_eq!(errno(&write(dev, MIB - 65536, 65536, 2)), 0, "just before");
    assert_eq!(errno(&write(dev, MIB + 65536, 65536, 3)), 0, "just after");
    assert_eq!(errno(&write(dev, 8 * MIB, 1 << 20, 4)), 0, "far away");
    assert_eq!(
        errno(&read(dev, MIB, 65536)),
        0,
        "reads of the range still work"
    );
    assert_eq!(read(dev, 8 * MIB, 4096).unwrap(), vec![4u8; 4096]);
    let stats = rig.disk.stats();
    assert_eq!(stats.failed, 3, "{stats:?}");
    assert_eq!(stats.faults, vec!["fail write 1048576 65536 eio"]);

    rig.disk.clear();
    assert_eq!(errno(&write(dev, MIB, 65536, 5)), 0, "cleared");
    assert_eq!(read(dev, MIB, 65536).unwrap(), vec![5u8; 65536]);
    rig.finish();
}

#[test]
fn a_failed_read_range_fails_reads_touching_it() {
    let Some(rig) = rig("fail-read", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    let dev = &rig.device;
    write(dev, 2 * MIB, 1 << 20, 7).unwrap();
    rig.disk.fail(Op::Read, 2 * MIB..2 * MIB + 4096, Errno::Eio);
    assert_eq!(errno(&read(dev, 2 * MIB, 4096)), libc::EIO);
    assert_eq!(errno(&read(dev, 2 * MIB - 4096, 1 << 20)), libc::EIO);
    assert_eq!(read(dev, 2 * MIB + 4096, 4096).unwrap(), vec![7u8; 4096]);
    assert_eq!(errno(&write(dev, 2 * MIB, 4096, 8)), 0, "writes still work");
    rig.disk.clear();
    assert_eq!(read(dev, 2 * MIB, 4096).unwrap(), vec![8u8; 4096]);
    rig.finish();
}

#[test]
fn enospc_is_selectable_and_any_fails_both_ways() {
    let Some(rig) = rig("fail-enospc", 16 * MIB, Durability::WriteThrough) else {
        return;
    };
    let dev = &rig.device;
    rig.disk.fail(Op::Write, 4 * MIB..5 * MIB, Errno::Enospc);
    assert_eq!(errno(&write(dev, 4 * MIB, 4096, 1)), libc::ENOSPC);
    assert_eq!(errno(&read(dev, 4 * MIB, 4096)), 0);
    rig.disk.fail(Op::Any, 6 * MIB..7 * MIB, Errno::Eio);
    assert_eq!(errno(&write(dev, 6 * MIB, 4096, 1)), libc::EIO);
    assert_eq!(errno(&read(dev, 6 * MIB, 4096)), libc::EIO);
    rig.finish();
}
