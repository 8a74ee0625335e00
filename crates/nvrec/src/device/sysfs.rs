//! Facts about block devices from sysfs: names, partitions, holders, and the model,
//! serial, firmware, PCIe link and path to the root port that reports show.
//!
//! Everything here is best effort and read-only: a missing or unreadable sysfs file
//! becomes `None` or an empty list, never an error. The sysfs root is a parameter so the
//! tests can run against a small fake tree.

use std::fmt;
use std::path::{Path, PathBuf};

use super::{PcieLink, TargetInfo};

/// A device number split into major and minor, as sysfs and mountinfo write it
/// (`259:3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl DevNum {
    /// Splits a `dev_t` as `st_dev` / `st_rdev` hold it (the glibc encoding the kernel's
    /// `new_encode_dev` matches: 12 low bits of the major at 8..20, the rest above 32).
    pub(crate) fn from_dev_t(dev: u64) -> Self {
        let major = ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff);
        let minor = ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff);
        Self {
            major: major as u32,
            minor: minor as u32,
        }
    }

    /// Parses `major:minor`, surrounding whitespace allowed.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(Self {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }
}

impl fmt::Display for DevNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

/// A block device that belongs to a target: the target itself or one of its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockMember {
    /// Kernel name: `nvme0n1`, `nvme0n1p2`, `loop3`.
    pub name: String,
    pub dev: DevNum,
}

/// A view of sysfs rooted at `root` (`/sys` on a real system).
#[derive(Debug, Clone)]
pub(crate) struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    pub(crate) fn system() -> Self {
        Self::at(Path::new("/sys"))
    }

    pub(crate) fn at(root: &Path) -> Self {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        Self { root }
    }

    /// The canonical sysfs directory of the block device `dev`
    /// (`/sys/devices/.../block/nvme0n1/nvme0n1p1`).
    pub(crate) fn block_dir(&self, dev: DevNum) -> Option<PathBuf> {
        self.root
            .join("dev/block")
            .join(dev.to_string())
            .canonicalize()
            .ok()
    }

    /// Kernel name of the block device `dev`, such as `nvme0n1p1`.
    pub(crate) fn block_name(&self, dev: DevNum) -> Option<String> {
        Some(file_name(&self.block_dir(dev)?))
    }

    /// The whole disk a block device directory belongs to: its parent when it is a
    /// partition, itself otherwise. Returns the disk's name and directory.
    fn disk_of(dir: &Path) -> (String, PathBuf) {
        match dir.parent() {
            Some(parent) if dir.join("partition").is_file() => {
                (file_name(parent), parent.to_path_buf())
            }
            _ => (file_name(dir), dir.to_path_buf()),
        }
    }

    /// The device `dev` and, when it is a whole disk, its partitions. When sysfs does not
    /// know the device, a single member with a placeholder name is returned so the caller
    /// still checks the device number itself.
    pub(crate) fn members(&self, dev: DevNum) -> Vec<BlockMember> {
        let Some(dir) = self.block_dir(dev) else {
            return vec![BlockMember {
                name: format!("block device {dev}"),
                dev,
            }];
        };
        let mut members = vec![BlockMember {
            name: file_name(&dir),
            dev,
        }];
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return members;
        };
        let mut partitions: Vec<BlockMember> = entries
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.join("partition").is_file())
            .filter_map(|path| {
                let dev = DevNum::parse(&std::fs::read_to_string(path.join("dev")).ok()?)?;
                Some(BlockMember {
                    name: file_name(&path),
                    dev,
                })
            })
            .collect();
        partitions.sort_by(|a, b| a.name.cmp(&b.name));
        members.extend(partitions);
        members
    }

    /// What holds the block device `name` open from inside the kernel (device-mapper, md
    /// RAID, bcache), from `/sys/class/block/<name>/holders`. Device-mapper holders carry
    /// their mapped name: `dm-0 (vg0-data)`.
    pub(crate) fn holders(&self, name: &str) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.class_block(name).join("holders")) else {
            return Vec::new();
        };
        let mut holders: Vec<String> = entries
            .flatten()
            .map(|entry| {
                let holder = entry.file_name().to_string_lossy().into_owned();
                match read_trimmed(&self.class_block(&holder).join("dm/name")) {
                    Some(dm_name) => format!("{holder} ({dm_name})"),
                    None => holder,
                }
            })
            .collect();
        holders.sort();
        holders
    }

    fn class_block(&self, name: &str) -> PathBuf {
        self.root.join("class/block").join(name)
    }

    /// Facts about the block device `dev` for reports. For a partition, the model, serial
    /// and link are those of its disk.
    pub(crate) fn describe_block(&self, dev: DevNum) -> TargetInfo {
        let Some(dir) = self.block_dir(dev) else {
            return TargetInfo {
                transport: "block".to_string(),
                ..TargetInfo::default()
            };
        };
        let (disk_name, disk_dir) = Self::disk_of(&dir);
        let device = disk_dir.join("device");
        let mut info = TargetInfo::default();
        if disk_name.starts_with("nvme") {
            info.transport = "nvme".to_string();
            info.model = read_trimmed(&device.join("model"));
            info.serial = read_trimmed(&device.join("serial"));
            info.firmware = read_trimmed(&device.join("firmware_rev"));
            if let Some(function_dir) = self.pcie_function(&device) {
                info.pcie_link = link_at(&function_dir);
                info.pcie_path = super::pcie::path_to_root_port(&function_dir);
            }
        } else if disk_name.starts_with("loop") {
            info.transport = "loop".to_string();
            info.loop_backing_file = std::fs::read_to_string(disk_dir.join("loop/backing_file"))
                .ok()
                .map(|text| text.trim_end_matches('\n').to_string())
                .filter(|text| !text.is_empty())
                .map(PathBuf::from);
            info.loop_direct_io = match read_trimmed(&disk_dir.join("loop/dio")).as_deref() {
                Some("1") => Some(true),
                Some("0") => Some(false),
                _ => None,
            };
        } else {
            info.transport = if disk_name.starts_with("vd") {
                "virtio".to_string()
            } else {
                "block".to_string()
            };
            info.model = read_trimmed(&device.join("model"));
            info.serial = read_trimmed(&device.join("serial"))
                .or_else(|| read_trimmed(&disk_dir.join("serial")));
            info.firmware = read_trimmed(&device.join("firmware_rev"))
                .or_else(|| read_trimmed(&device.join("rev")));
        }
        info
    }

    /// The PCIe link of the function an NVMe namespace's `device` link leads to (see
    /// [`Sysfs::pcie_function`]).
    pub(crate) fn pcie_link(&self, device_link: &Path) -> Option<PcieLink> {
        link_at(&self.pcie_function(device_link)?)
    }

    /// The PCI function an NVMe namespace's `device` link leads to: the nearest ancestor
    /// directory that has `current_link_speed`. A namespace of a multipath subsystem links
    /// to the subsystem, which is not on the PCI bus; then the first controller listed in it
    /// (`nvme0`, ...) is followed instead. The `device` link of an NVMe controller
    /// (`/sys/class/nvme/nvme0/device`) works the same way.
    pub(crate) fn pcie_function(&self, device_link: &Path) -> Option<PathBuf> {
        let start = device_link.canonicalize().ok()?;
        if let Some(dir) = self.pcie_function_above(&start) {
            return Some(dir);
        }
        let mut controllers: Vec<PathBuf> = std::fs::read_dir(&start)
            .ok()?
            .flatten()
            .filter(|entry| is_nvme_controller_name(&entry.file_name().to_string_lossy()))
            .filter_map(|entry| entry.path().canonicalize().ok())
            .collect();
        controllers.sort();
        controllers
            .iter()
            .find_map(|controller| self.pcie_function_above(controller))
    }

    fn pcie_function_above(&self, start: &Path) -> Option<PathBuf> {
        let dir = start
            .ancestors()
            .take_while(|dir| dir.starts_with(&self.root) && *dir != self.root)
            .find(|dir| dir.join("current_link_speed").is_file())?;
        link_at(dir).map(|_| dir.to_path_buf())
    }
}

/// The link a PCI function's directory reports (its four link files).
pub(crate) fn link_at(dir: &Path) -> Option<PcieLink> {
    Some(PcieLink {
        current_speed: read_trimmed(&dir.join("current_link_speed"))?,
        current_width: read_trimmed(&dir.join("current_link_width"))?
            .parse()
            .ok()?,
        max_speed: read_trimmed(&dir.join("max_link_speed"))?,
        max_width: read_trimmed(&dir.join("max_link_width"))?.parse().ok()?,
    })
}

/// `nvme` followed by digits only: a controller, not a namespace (`nvme0n1`).
fn is_nvme_controller_name(name: &str) -> bool {
    name.strip_prefix("nvme")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Contents of a sysfs attribute with surrounding whitespace removed; `None` when it is
/// missing, unreadable or blank.
pub(crate) fn read_trimmed(path: &Path) -> Option<String> {
    let text = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&text).trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// The entries of a sysfs directory by name, numbers in numeric order (nvme2 before
/// nvme10); none where it cannot be read.
pub(crate) fn sorted_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    // nvme2 before nvme10.
    names.sort_by_key(|name| {
        let digits: String = name.chars().filter(char::is_ascii_digit).collect();
        (
            name.trim_end_matches(|c: char| c.is_ascii_digit())
                .to_string(),
            digits.len(),
            digits,
            name.clone(),
        )
    });
    names
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A throwaway directory removed on drop.
    struct TempTree(PathBuf);

    impl TempTree {
        fn new(tag: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("nvrec-sysfs-test-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create temp tree");
            Self(dir)
        }

        fn write(&self, rel: &str, contents: &str) {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, contents).expect("write");
        }

        fn mkdir(&self, rel: &str) {
            std::fs::create_dir_all(self.0.join(rel)).expect("mkdir");
        }

        /// `rel` becomes a symlink to `target` (relative to the link's directory).
        fn link(&self, rel: &str, target: &str) {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            symlink(target, path).expect("symlink");
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    const ROOT_PORT: &str = "devices/pci0000:00/0000:00:01.1";
    const PCI_FN: &str = "devices/pci0000:00/0000:00:01.1/0000:01:00.0";

    /// A fake sysfs with one NVMe drive (nvme0n1 with partition p1) behind a PCIe
    /// function, a loop device held by device-mapper, and a virtio disk.
    fn fake_sysfs(tag: &str) -> TempTree {
        let t = TempTree::new(tag);
        // The root port above the function also has link files: the nearest one must win
        // for the drive's link, and the root port's is read as the far end of its path.
        for (dir, speed, width, max_width) in [
            (ROOT_PORT, "32.0 GT/s PCIe", "16", "16"),
            (PCI_FN, "16.0 GT/s PCIe", "4", "4"),
        ] {
            t.write(&format!("{dir}/current_link_speed"), &format!("{speed}\n"));
            t.write(&format!("{dir}/current_link_width"), &format!("{width}\n"));
            t.write(&format!("{dir}/max_link_speed"), "32.0 GT/s PCIe\n");
            t.write(&format!("{dir}/max_link_width"), &format!("{max_width}\n"));
        }
        let ctrl = format!("{PCI_FN}/nvme/nvme0");
        t.write(
            &format!("{ctrl}/model"),
            "Samsung SSD 990 PRO 2TB                 \n",
        );
        t.write(&format!("{ctrl}/serial"), "  S7DNNJ0W123456X    \n");
        t.write(&format!("{ctrl}/firmware_rev"), "4B2QJXD7\n");
        let ns = format!("{ctrl}/nvme0n1");
        t.write(&format!("{ns}/dev"), "259:0\n");
        t.link(&format!("{ns}/device"), "..");
        t.mkdir(&format!("{ns}/holders"));
        t.write(&format!("{ns}/nvme0n1p1/dev"), "259:1\n");
        t.write(&format!("{ns}/nvme0n1p1/partition"), "1\n");
        t.mkdir(&format!("{ns}/nvme0n1p1/holders"));
        t.link("class/block/nvme0n1", &format!("../../{ns}"));
        t.link("class/block/nvme0n1p1", &format!("../../{ns}/nvme0n1p1"));
        t.link("dev/block/259:0", &format!("../../{ns}"));
        t.link("dev/block/259:1", &format!("../../{ns}/nvme0n1p1"));

        let lp = "devices/virtual/block/loop3";
        t.write(&format!("{lp}/dev"), "7:3\n");
        t.write(&format!("{lp}/loop/backing_file"), "/tmp/disk image.img\n");
        t.write(&format!("{lp}/loop/dio"), "1\n");
        t.link(&format!("{lp}/holders/dm-0"), "../../dm-0");
        t.write("devices/virtual/block/dm-0/dm/name", "vg0-data\n");
        t.link("class/block/loop3", &format!("../../{lp}"));
        t.link("class/block/dm-0", "../../devices/virtual/block/dm-0");
        t.link("dev/block/7:3", &format!("../../{lp}"));

        let vd = "devices/pci0000:00/0000:00:04.0/virtio1/block/vda";
        t.write(&format!("{vd}/dev"), "254:0\n");
        t.write(&format!("{vd}/serial"), "disk-1\n");
        t.mkdir("devices/pci0000:00/0000:00:04.0/virtio1/block/vda");
        t.link(&format!("{vd}/device"), "../..");
        t.link("dev/block/254:0", &format!("../../{vd}"));
        t
    }

    #[test]
    fn device_dev_num_splits_and_parses() {
        // glibc's makedev, written out.
        fn makedev(major: u64, minor: u64) -> u64 {
            ((major & 0xfff) << 8)
                | ((major & 0xffff_f000) << 32)
                | (minor & 0xff)
                | ((minor & 0xffff_ff00) << 12)
        }
        assert_eq!(makedev(259, 3), 0x1_0303);
        for (major, minor) in [
            (259, 3),
            (7, 0),
            (0x1fff, 0x107),
            (0xffff_ffff, 0xffff_ffff),
        ] {
            assert_eq!(
                DevNum::from_dev_t(makedev(u64::from(major), u64::from(minor))),
                DevNum { major, minor }
            );
        }
        assert_eq!(DevNum::parse("7:3\n"), Some(DevNum { major: 7, minor: 3 }));
        assert_eq!(DevNum::parse("7"), None);
        assert_eq!(
            DevNum {
                major: 259,
                minor: 1
            }
            .to_string(),
            "259:1"
        );
    }

    #[test]
    fn device_sysfs_nvme_describe_members_and_link() {
        let tree = fake_sysfs("nvme");
        let sysfs = Sysfs::at(&tree.0);
        let disk = DevNum {
            major: 259,
            minor: 0,
        };
        let part = DevNum {
            major: 259,
            minor: 1,
        };
        assert_eq!(sysfs.block_name(disk).as_deref(), Some("nvme0n1"));
        assert_eq!(
            sysfs.members(disk),
            vec![
                BlockMember {
                    name: "nvme0n1".into(),
                    dev: disk
                },
                BlockMember {
                    name: "nvme0n1p1".into(),
                    dev: part
                },
            ]
        );
        // A partition has no partitions of its own.
        assert_eq!(sysfs.members(part).len(), 1);
        for dev in [disk, part] {
            let info = sysfs.describe_block(dev);
            assert_eq!(info.transport, "nvme");
            assert_eq!(info.model.as_deref(), Some("Samsung SSD 990 PRO 2TB"));
            assert_eq!(info.serial.as_deref(), Some("S7DNNJ0W123456X"));
            assert_eq!(info.firmware.as_deref(), Some("4B2QJXD7"));
            let link = info.pcie_link.clone().expect("pcie link");
            assert_eq!(link.current_speed, "16.0 GT/s PCIe");
            assert_eq!(link.current_width, 4);
            assert_eq!(link.max_speed, "32.0 GT/s PCIe");
            assert_eq!(link.max_width, 4);
            // The path from the drive to its root port, and the root port's own link.
            let addresses: Vec<&str> = info.pcie_path.iter().map(|h| h.address.as_str()).collect();
            assert_eq!(addresses, ["0000:01:00.0", "0000:00:01.1"]);
            let root_port = info.pcie_root_port().expect("a root port");
            assert_eq!(root_port.address, "0000:00:01.1");
            assert_eq!(
                (root_port.link.current_width, root_port.link.max_width),
                (16, 16)
            );
            assert_eq!(root_port.link.current_speed, "32.0 GT/s PCIe");
        }
        assert!(sysfs.holders("nvme0n1").is_empty());
    }

    #[test]
    fn device_sysfs_multipath_namespace_follows_a_controller() {
        let t = fake_sysfs("multipath");
        let subsys = "devices/virtual/nvme-subsystem/nvme-subsys0";
        t.write(&format!("{subsys}/model"), "Fabric Drive\n");
        t.link(
            &format!("{subsys}/nvme0"),
            &format!("../../../../{PCI_FN}/nvme/nvme0"),
        );
        let ns = format!("{subsys}/nvme0n2");
        t.write(&format!("{ns}/dev"), "259:7\n");
        t.link(&format!("{ns}/device"), "..");
        t.link("dev/block/259:7", &format!("../../{ns}"));
        let info = Sysfs::at(&t.0).describe_block(DevNum {
            major: 259,
            minor: 7,
        });
        assert_eq!(info.transport, "nvme");
        assert_eq!(info.model.as_deref(), Some("Fabric Drive"));
        assert_eq!(info.serial, None);
        assert_eq!(info.pcie_link.map(|l| l.current_width), Some(4));
    }

    #[test]
    fn device_sysfs_paths_to_the_root_port_in_the_captured_switch_tree() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs-pcie-switch");
        let sysfs = Sysfs::at(&root);
        let path = |controller: &str| -> Vec<String> {
            let function = sysfs
                .pcie_function(
                    &sysfs
                        .root
                        .join("class/nvme")
                        .join(controller)
                        .join("device"),
                )
                .expect("the drive's function");
            super::super::pcie::path_to_root_port(&function)
                .into_iter()
                .map(|hop| hop.address)
                .collect()
        };
        // Behind the switch: the drive, the switch's downstream and upstream ports, the root
        // port.
        assert_eq!(
            path("nvme2"),
            [
                "0000:05:00.0",
                "0000:02:03.0",
                "0000:01:00.0",
                "0000:00:01.0"
            ]
        );
        // On a root port of its own.
        assert_eq!(path("nvme4"), ["0000:07:00.0", "0000:00:02.0"]);
    }

    #[test]
    fn device_sysfs_a_drive_on_the_host_bridge_has_no_root_port() {
        let t = TempTree::new("host-bridge");
        let function = "devices/pci0000:00/0000:00:02.0";
        t.write(&format!("{function}/current_link_speed"), "8.0 GT/s PCIe\n");
        t.write(&format!("{function}/current_link_width"), "4\n");
        t.write(&format!("{function}/max_link_speed"), "8.0 GT/s PCIe\n");
        t.write(&format!("{function}/max_link_width"), "4\n");
        let ns = format!("{function}/nvme/nvme0/nvme0n1");
        t.write(&format!("{ns}/dev"), "259:0\n");
        t.link(&format!("{ns}/device"), "..");
        t.link("dev/block/259:0", &format!("../../{ns}"));
        let info = Sysfs::at(&t.0).describe_block(DevNum {
            major: 259,
            minor: 0,
        });
        assert_eq!(info.pcie_path.len(), 1);
        assert_eq!(info.pcie_path[0].address, "0000:00:02.0");
        assert!(info.pcie_root_port().is_none());
        assert_eq!(info.pcie_link.map(|link| link.current_width), Some(4));
    }

    #[test]
    fn device_sysfs_loop_virtio_holders_and_unknown() {
        let tree = fake_sysfs("loop");
        let sysfs = Sysfs::at(&tree.0);
        let info = sysfs.describe_block(DevNum { major: 7, minor: 3 });
        assert_eq!(info.transport, "loop");
        assert_eq!(
            info.loop_backing_file.as_deref(),
            Some(Path::new("/tmp/disk image.img"))
        );
        assert_eq!(info.loop_direct_io, Some(true));
        assert_eq!(info.model, None);
        assert_eq!(sysfs.holders("loop3"), vec!["dm-0 (vg0-data)".to_string()]);

        let info = sysfs.describe_block(DevNum {
            major: 254,
            minor: 0,
        });
        assert_eq!(info.transport, "virtio");
        assert_eq!(info.serial.as_deref(), Some("disk-1"));
        assert_eq!(info.model, None);
        assert!(info.pcie_link.is_none() && info.pcie_path.is_empty());

        let unknown = DevNum { major: 8, minor: 0 };
        let info = sysfs.describe_block(unknown);
        assert_eq!(info.transport, "block");
        assert_eq!(info.model, None);
        assert_eq!(sysfs.block_name(unknown), None);
        assert_eq!(sysfs.members(unknown).len(), 1);
        assert_eq!(sysfs.members(unknown)[0].dev, unknown);
        assert!(sysfs.holders("sda").is_empty());
    }

    #[test]
    fn device_nvme_controller_names() {
        assert!(is_nvme_controller_name("nvme0"));
        assert!(is_nvme_controller_name("nvme12"));
        assert!(!is_nvme_controller_name("nvme0n1"));
        assert!(!is_nvme_controller_name("nvme"));
        assert!(!is_nvme_controller_name("nvme-subsys0"));
    }
}
