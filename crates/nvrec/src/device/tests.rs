//! Tests of `open` and `describe` against real files and loop devices.
//!
//! Loop-device tests need root and `losetup`; without them they print why and pass. They
//! only ever touch loop devices they attached themselves, to backing files they created,
//! and detach them (and unmount what they mounted) through drop guards, also when an
//! assertion fails. Names are unique per process and test so tests can run in parallel.

use super::*;
use std::os::unix::fs::MetadataExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

const MIB: u64 = 1024 * 1024;

/// A fresh directory under the system temp dir, removed with its contents on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "nvrec-device-test-{}-{}-{tag}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        Self(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn write_opts(create_len_bytes: Option<u64>, safety: Safety) -> OpenOptions {
    OpenOptions {
        access: Access::Write,
        create_len_bytes,
        safety,
    }
}

fn read_opts() -> OpenOptions {
    OpenOptions {
        access: Access::Read,
        create_len_bytes: None,
        safety: Safety::Check,
    }
}

fn open_err(path: &Path, options: &OpenOptions) -> DeviceError {
    match open(path, options) {
        Ok(target) => panic!("expected open({}) to fail, got {target:?}", path.display()),
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------------------------
// Regular files
// ---------------------------------------------------------------------------------------

#[test]
fn device_file_create_preallocates_and_never_shrinks() {
    let dir = TempDir::new("create");
    let path = dir.path("rec.bin");
    let target = open(&path, &write_opts(Some(3 * MIB), Safety::Check)).expect("create");
    assert_eq!(target.kind, TargetKind::File);
    assert_eq!(target.path, path);
    assert_eq!(target.capacity_bytes, 3 * MIB);
    assert!(target.logical_block_bytes.is_power_of_two());
    assert!(target.logical_block_bytes >= 512);
    let meta = std::fs::metadata(&path).expect("stat");
    assert_eq!(meta.len(), 3 * MIB);
    assert_eq!(meta.mode() & 0o777, 0o644 & !current_umask());
    // Preallocated, not sparse: st_blocks counts 512-byte units.
    assert!(
        meta.blocks() * 512 >= 3 * MIB,
        "only {} bytes allocated",
        meta.blocks() * 512
    );
    drop(target);

    // A smaller size leaves a longer file alone; a larger one grows it.
    let target = open(&path, &write_opts(Some(MIB), Safety::Check)).expect("reopen");
    assert_eq!(target.capacity_bytes, 3 * MIB);
    drop(target);
    let target = open(&path, &write_opts(Some(5 * MIB), Safety::Check)).expect("grow");
    assert_eq!(target.capacity_bytes, 5 * MIB);
    assert!(std::fs::metadata(&path).expect("stat").blocks() * 512 >= 5 * MIB);

    // The descriptor is O_DIRECT and writable: an aligned write goes through.
    let align = target.logical_block_bytes as usize;
    let mut buf = sys::AlignedBuf::zeroed(align, align.max(4096)).expect("buffer");
    buf.as_mut_slice().fill(0xa5);
    use std::os::unix::fs::FileExt;
    target
        .file
        .write_all_at(buf.as_slice(), 0)
        .expect("aligned O_DIRECT write");
    let flags = fd_flags(&target.file);
    assert_ne!(flags & libc::O_DIRECT, 0, "O_DIRECT missing");
    assert_eq!(flags & libc::O_ACCMODE, libc::O_RDWR);
}

#[test]
fn device_file_read_probes_capacity_and_alignment() {
    let dir = TempDir::new("probe");
    let path = dir.path("data.bin");
    std::fs::write(&path, vec![7u8; (MIB + 4096) as usize]).expect("write");
    let target = open(&path, &read_opts()).expect("open for read");
    assert_eq!(target.kind, TargetKind::File);
    assert_eq!(target.capacity_bytes, MIB + 4096);
    assert!(target.logical_block_bytes.is_power_of_two());
    if let Some(dio_bytes) = sys::dio_alignment_bytes(&target.file) {
        assert_eq!(target.logical_block_bytes, dio_bytes);
    } else {
        assert_eq!(target.logical_block_bytes, DEFAULT_FILE_ALIGN_BYTES);
    }
    let flags = fd_flags(&target.file);
    assert_ne!(flags & libc::O_DIRECT, 0, "O_DIRECT missing");
    assert_eq!(flags & libc::O_ACCMODE, libc::O_RDONLY);
    assert_ne!(fd_cloexec(&target.file), 0, "O_CLOEXEC missing");

    // Read access ignores create_len: it neither creates nor grows.
    let grown = open(
        &path,
        &OpenOptions {
            access: Access::Read,
            create_len_bytes: Some(8 * MIB),
            safety: Safety::Check,
        },
    )
    .expect("open for read with a length");
    assert_eq!(grown.capacity_bytes, MIB + 4096);

    let info = describe(&target);
    assert_eq!(info.transport, "file");
    assert!(info.pcie_link.is_none() && info.loop_backing_file.is_none());
    let st_dev = std::fs::metadata(&path).expect("stat").dev();
    let sysfs_name = Sysfs::system().block_name(DevNum::from_dev_t(st_dev));
    if sysfs_name.is_some() {
        assert_eq!(info.backing_device, sysfs_name);
    }
    eprintln!("file on backing device {:?}", info.backing_device);
}

#[test]
fn device_missing_file_errors_clearly_and_is_not_created() {
    let dir = TempDir::new("missing");
    let path = dir.path("nope.bin");

    let err = open_err(&path, &read_opts());
    assert!(
        matches!(
            err,
            DeviceError::NotFound {
                can_create: false,
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains(&*path.to_string_lossy()), "{message}");
    assert!(message.contains("does not exist"), "{message}");
    assert!(!message.contains("--size"), "{message}");

    let err = open_err(&path, &write_opts(None, Safety::Check));
    assert!(
        matches!(
            err,
            DeviceError::NotFound {
                can_create: true,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("--size"), "{err}");
    assert!(!err.is_safety_refusal());
    assert!(!path.exists(), "a failed open must not create the file");

    // A missing parent directory is an open error, not a panic.
    let err = open_err(
        &dir.path("no/such/dir/rec.bin"),
        &write_opts(Some(MIB), Safety::Check),
    );
    assert!(matches!(err, DeviceError::Open { .. }), "{err:?}");
}

#[test]
fn a_missing_name_under_dev_is_never_created_as_a_file() {
    // Safety::Force too: --force skips the checks of what a target holds, not this one.
    for safety in [Safety::Check, Safety::Force] {
        let path = Path::new("/dev/nvrec-no-such-device-p1");
        let err = open_err(path, &write_opts(Some(MIB), safety));
        assert!(matches!(err, DeviceError::NoSuchDevice { .. }), "{err:?}");
        assert!(err.is_safety_refusal());
        assert!(err.to_string().contains("under /dev"), "{err}");
        assert!(!path.exists(), "nothing created under /dev");
    }
    // The same through a link to /dev from elsewhere.
    let dir = TempDir::new("devlink");
    let link = dir.path("devlink");
    std::os::unix::fs::symlink("/dev", &link).unwrap();
    let err = open_err(
        &link.join("nvrec-no-such-device"),
        &write_opts(Some(MIB), Safety::Check),
    );
    assert!(matches!(err, DeviceError::NoSuchDevice { .. }), "{err:?}");
}

#[test]
fn device_directory_and_char_device_are_refused() {
    let dir = TempDir::new("dir");
    let err = open_err(&dir.0, &write_opts(Some(MIB), Safety::Check));
    assert!(
        matches!(
            err,
            DeviceError::NotFileOrBlockDevice {
                found: "a directory",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("is a directory"), "{err}");

    let err = open_err(Path::new("/dev/null"), &read_opts());
    assert!(
        matches!(
            err,
            DeviceError::NotFileOrBlockDevice {
                found: "a character device",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("/dev/null is a character device"),
        "{err}"
    );
}

#[test]
fn device_error_messages_and_safety_classification() {
    let path = PathBuf::from("/dev/loop3");
    let signature = DeviceError::Signature {
        path: path.clone(),
        what: SignatureKind::Ext4,
        offset_bytes: 1080,
    };
    assert_eq!(
        signature.to_string(),
        "/dev/loop3 holds an ext4 filesystem (magic at byte 1080); refusing to overwrite it \
         (use --force to override)"
    );
    let mounted = DeviceError::Mounted {
        path: path.clone(),
        device: PathBuf::from("/dev/loop3p1"),
        mount_point: PathBuf::from("/mnt/data"),
    };
    assert_eq!(
        mounted.to_string(),
        "/dev/loop3: /dev/loop3p1 is mounted on /mnt/data; refusing to overwrite a mounted \
         filesystem (unmount it first; --force does not override this)"
    );
    let mounted_itself = DeviceError::Mounted {
        path: path.clone(),
        device: path.clone(),
        mount_point: PathBuf::from("/mnt/data"),
    };
    assert!(mounted_itself
        .to_string()
        .starts_with("/dev/loop3 is mounted on /mnt/data; refusing"));
    let held = DeviceError::Held {
        path: path.clone(),
        holders: vec!["dm-0 (vg-a)".into(), "md127 on loop3p2".into()],
    };
    assert!(held
        .to_string()
        .contains("in use by dm-0 (vg-a), md127 on loop3p2"));
    let swap = DeviceError::Swap {
        path: path.clone(),
        device: path.clone(),
    };
    assert!(swap
        .to_string()
        .starts_with("/dev/loop3 is in use as swap; refusing"));
    let busy = DeviceError::Busy { path: path.clone() };
    for refusal in [&signature, &mounted, &held, &swap, &busy] {
        assert!(refusal.is_safety_refusal(), "{refusal:?}");
    }
    assert!(signature.to_string().contains("use --force to override"));
    for in_use in [&mounted, &held, &swap, &busy] {
        assert!(
            in_use.to_string().contains("--force does not override"),
            "{in_use}"
        );
    }
    let others = [
        DeviceError::NotFound {
            path: path.clone(),
            can_create: false,
        },
        DeviceError::ZeroCapacity { path: path.clone() },
        DeviceError::DirectIoUnsupported { path: path.clone() },
        DeviceError::Open {
            path: path.clone(),
            source: io::Error::from_raw_os_error(libc::EACCES),
        },
        DeviceError::Probe {
            path: path.clone(),
            what: "x".into(),
            source: io::Error::from_raw_os_error(libc::EIO),
        },
    ];
    for other in &others {
        assert!(!other.is_safety_refusal(), "{other:?}");
        assert!(other.to_string().contains("/dev/loop3"), "{other}");
    }
}

fn current_umask() -> u32 {
    // Read from /proc (Linux 4.7+) rather than calling umask(2), which would change it
    // for every thread while it is being read.
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Umask:"))
                .and_then(|value| u32::from_str_radix(value.trim(), 8).ok())
        })
        .unwrap_or(0o022)
}

fn fd_flags(file: &File) -> libc::c_int {
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETFL on a descriptor `file` keeps open; no pointers involved.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    assert!(flags >= 0, "fcntl(F_GETFL): {}", io::Error::last_os_error());
    flags
}

fn fd_cloexec(file: &File) -> libc::c_int {
    use std::os::fd::AsRawFd;
    // SAFETY: F_GETFD on a descriptor `file` keeps open; no pointers involved.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFD) };
    assert!(flags >= 0, "fcntl(F_GETFD): {}", io::Error::last_os_error());
    flags & libc::FD_CLOEXEC
}

// ---------------------------------------------------------------------------------------
// Loop devices
// ---------------------------------------------------------------------------------------

/// A loop device this test attached; detached on drop.
struct LoopDevice {
    path: PathBuf,
}

impl LoopDevice {
    /// Attaches a new loop device to `backing` (a file the test created). `None`, with
    /// the reason printed, when this environment cannot: not root, no losetup, no loop
    /// support.
    fn attach(backing: &Path, test: &str) -> Option<Self> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            nvrec_testkit::skip(
                nvrec_testkit::ROOT,
                format_args!("{test}: loop devices need root"),
            );
            return None;
        }
        let output = match Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(backing)
            .output()
        {
            Ok(output) => output,
            Err(e) => {
                nvrec_testkit::skip(
                    nvrec_testkit::LOSETUP,
                    format_args!("{test}: cannot run losetup: {e}"),
                );
                return None;
            }
        };
        if !output.status.success() {
            nvrec_testkit::skip(
                nvrec_testkit::LOSETUP,
                format_args!(
                    "{test}: losetup failed: {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            );
            return None;
        }
        let printed = String::from_utf8_lossy(&output.stdout).trim().to_string();
        // Guard first, so the device is detached even if the check below fails.
        let device = Self {
            path: PathBuf::from(&printed),
        };
        assert!(
            printed.starts_with("/dev/loop"),
            "losetup printed {printed:?}"
        );
        Some(device)
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let status = Command::new("losetup").arg("-d").arg(&self.path).status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!(
                "warning: could not detach {}: {status:?}",
                self.path.display()
            );
        }
    }
}

/// A mount this test made; unmounted on drop (declare it after the loop device so it
/// drops first).
struct Mount {
    mount_point: PathBuf,
}

impl Mount {
    fn new(device: &Path, mount_point: &Path, test: &str) -> Option<Self> {
        let output = Command::new("mount")
            .args(["-t", "ext4"])
            .arg(device)
            .arg(mount_point)
            .output();
        match output {
            Ok(output) if output.status.success() => Some(Self {
                mount_point: mount_point.to_path_buf(),
            }),
            Ok(output) => {
                nvrec_testkit::skip(
                    nvrec_testkit::MOUNT_EXT4,
                    format_args!(
                        "{test}: mount failed: {}",
                        String::from_utf8_lossy(&output.stderr).trim()
                    ),
                );
                None
            }
            Err(e) => {
                nvrec_testkit::skip(
                    nvrec_testkit::MOUNT_EXT4,
                    format_args!("{test}: cannot run mount: {e}"),
                );
                None
            }
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let status = Command::new("umount").arg(&self.mount_point).status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!(
                "warning: could not unmount {}: {status:?}",
                self.mount_point.display()
            );
        }
    }
}

/// A sparse backing file of `len_bytes` in `dir`.
fn backing_file(dir: &TempDir, len_bytes: u64) -> PathBuf {
    let path = dir.path("backing.img");
    let file = File::create(&path).expect("create backing file");
    file.set_len(len_bytes).expect("size backing file");
    path
}

/// Runs a command that must succeed, or returns false (printing why) when it is not
/// installed.
fn run_tool(program: &str, args: &[&std::ffi::OsStr], test: &str) -> bool {
    match Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .output()
    {
        Ok(output) => {
            assert!(
                output.status.success(),
                "{program} {args:?} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            true
        }
        Err(e) => {
            nvrec_testkit::skip(
                nvrec_testkit::MOUNT_EXT4,
                format_args!("{test}: cannot run {program}: {e}"),
            );
            false
        }
    }
}

fn mkfs_ext4(device: &Path, test: &str) -> bool {
    run_tool(
        "mkfs.ext4",
        &["-q".as_ref(), "-F".as_ref(), device.as_os_str()],
        test,
    )
}

#[test]
fn device_loop_probe_describe_exclusive_and_ext4_refusal() {
    const TEST: &str = "device_loop_probe_describe_exclusive_and_ext4_refusal";
    let dir = TempDir::new("loop-ext4");
    let backing = backing_file(&dir, 32 * MIB);
    let Some(lo) = LoopDevice::attach(&backing, TEST) else {
        return;
    };

    // Read: probes, no checks.
    let target = open(&lo.path, &read_opts()).expect("open loop for read");
    assert_eq!(target.kind, TargetKind::BlockDevice);
    assert_eq!(target.capacity_bytes, 32 * MIB);
    assert_eq!(target.logical_block_bytes, 512);
    let info = describe(&target);
    assert_eq!(info.transport, "loop");
    let reported = info.loop_backing_file.expect("backing file");
    assert_eq!(
        reported.canonicalize().expect("canonical reported"),
        backing.canonicalize().expect("canonical backing")
    );
    assert!(info.loop_direct_io.is_some());
    eprintln!("loop direct I/O: {:?}", info.loop_direct_io);
    assert!(info.backing_device.is_none() && info.pcie_link.is_none());
    drop(target);

    // Blank device: a checked write open succeeds and holds the device exclusively.
    let held = open(&lo.path, &write_opts(None, Safety::Check)).expect("checked write open");
    assert_eq!(fd_flags(&held.file) & libc::O_ACCMODE, libc::O_RDWR);
    let err = open_err(&lo.path, &write_opts(None, Safety::Check));
    eprintln!("refused as it should be: {err}");
    assert!(matches!(err, DeviceError::Busy { .. }), "{err:?}");
    assert!(err.is_safety_refusal());
    // --force does not make a device someone holds writable.
    let err = open_err(&lo.path, &write_opts(None, Safety::Force));
    assert!(matches!(err, DeviceError::Busy { .. }), "{err:?}");
    drop(held);

    if !mkfs_ext4(&lo.path, TEST) {
        return;
    }
    let err = open_err(&lo.path, &write_opts(None, Safety::Check));
    match &err {
        DeviceError::Signature {
            what, offset_bytes, ..
        } => {
            assert_eq!(*what, SignatureKind::Ext4);
            assert_eq!(*offset_bytes, 1080);
        }
        other => panic!("expected a signature refusal, got {other:?}"),
    }
    let message = err.to_string();
    eprintln!("refused as it should be: {message}");
    assert!(
        message.contains("ext4") && message.contains("--force"),
        "{message}"
    );
    assert!(message.contains(&*lo.path.to_string_lossy()), "{message}");
    assert!(err.is_safety_refusal());

    let forced = open(&lo.path, &write_opts(None, Safety::Force)).expect("forced write open");
    assert_eq!(forced.capacity_bytes, 32 * MIB);
    drop(forced);
    // Reading never refuses.
    drop(open(&lo.path, &read_opts()).expect("read open of a formatted device"));
}

#[test]
fn device_loop_mbr_signature_is_refused() {
    const TEST: &str = "device_loop_mbr_signature_is_refused";
    let dir = TempDir::new("loop-mbr");
    let backing = backing_file(&dir, 4 * MIB);
    let Some(lo) = LoopDevice::attach(&backing, TEST) else {
        return;
    };
    drop(open(&lo.path, &write_opts(None, Safety::Check)).expect("blank device opens"));

    let mut dd = match Command::new("dd")
        .arg(format!("of={}", lo.path.display()))
        .args(["bs=1", "seek=510", "conv=notrunc,fsync", "status=none"])
        .stdin(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            nvrec_testkit::skip(
                nvrec_testkit::DD,
                format_args!("{TEST}: cannot run dd: {e}"),
            );
            return;
        }
    };
    {
        use std::io::Write;
        let mut stdin = dd.stdin.take().expect("dd stdin");
        stdin.write_all(&[0x55, 0xaa]).expect("feed dd");
    }
    assert!(dd.wait().expect("wait for dd").success(), "dd failed");

    let err = open_err(&lo.path, &write_opts(None, Safety::Check));
    assert!(
        matches!(
            err,
            DeviceError::Signature {
                what: SignatureKind::DosPartitionTable,
                offset_bytes: 510,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("partition table"), "{err}");
    drop(open(&lo.path, &write_opts(None, Safety::Force)).expect("forced open"));
}

#[test]
fn device_loop_swap_signature_is_refused() {
    const TEST: &str = "device_loop_swap_signature_is_refused";
    let dir = TempDir::new("loop-swap");
    let backing = backing_file(&dir, 8 * MIB);
    let Some(lo) = LoopDevice::attach(&backing, TEST) else {
        return;
    };
    if !run_tool("mkswap", &[lo.path.as_os_str()], TEST) {
        return;
    }
    let err = open_err(&lo.path, &write_opts(None, Safety::Check));
    match err {
        DeviceError::Signature {
            what: SignatureKind::Swap,
            offset_bytes,
            ..
        } => assert_eq!(offset_bytes % 1024, 1014, "swap magic ends a page"),
        other => panic!("expected a swap signature refusal, got {other:?}"),
    }
}

#[test]
fn device_loop_mounted_is_refused_with_mount_point() {
    const TEST: &str = "device_loop_mounted_is_refused_with_mount_point";
    let dir = TempDir::new("loop-mount");
    let backing = backing_file(&dir, 32 * MIB);
    let mount_point = dir.path("mnt");
    std::fs::create_dir(&mount_point).expect("mount point");
    let Some(lo) = LoopDevice::attach(&backing, TEST) else {
        return;
    };
    if !mkfs_ext4(&lo.path, TEST) {
        return;
    }
    // Declared after `lo`: unmounts before the loop device is detached.
    let Some(mount) = Mount::new(&lo.path, &mount_point, TEST) else {
        return;
    };
    let err = open_err(&lo.path, &write_opts(None, Safety::Check));
    eprintln!("refused as it should be: {err}");
    match &err {
        DeviceError::Mounted {
            device,
            mount_point: reported,
            ..
        } => {
            assert_eq!(device, &lo.path);
            assert_eq!(
                reported.canonicalize().expect("canonical reported"),
                mount
                    .mount_point
                    .canonicalize()
                    .expect("canonical mount point")
            );
            assert!(err.to_string().contains("is mounted on"), "{err}");
        }
        DeviceError::Busy { .. } => {}
        other => panic!("expected a mounted refusal, got {other:?}"),
    }
    assert!(err.is_safety_refusal());
    // Reading a mounted device is allowed.
    drop(open(&lo.path, &read_opts()).expect("read open of a mounted device"));
    drop(mount);
    drop(lo);
}
