//! nvrec against QEMU's emulated NVMe controller: runs `tests/qemu/check-health` with the
//! `nvrec` binary cargo built for this test. Booting a guest takes a minute or so under plain
//! emulation and may install packages (as root), so it runs only with NVREC_QEMU_TESTS=1.

use std::path::Path;
use std::process::Command;

#[test]
fn health_devices_and_selftest_against_the_emulated_controller() {
    if std::env::var("NVREC_QEMU_TESTS").as_deref() != Ok("1") {
        nvrec_testkit::skip(
            nvrec_testkit::QEMU_OPT_IN,
            "tests/qemu/check-health boots QEMU's emulated NVMe controller (HACKING.md)",
        );
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/qemu/check-health");
    let status = Command::new(&script)
        .arg("--nvrec")
        .arg(env!("CARGO_BIN_EXE_nvrec"))
        .status()
        .unwrap_or_else(|error| panic!("{}: {error}", script.display()));
    assert!(status.success(), "{} failed: {status}", script.display());
}
