//! What is attached: every NVMe controller with its namespaces, and every other block device,
//! from sysfs (a root path, so tests can use a fake tree). Optional probes add what sysfs does
//! not know: LBA formats through Identify Namespace, and whether a device is mounted or holds
//! a filesystem or partition table.

use super::admin::{Admin, CNS_NAMESPACE};
use super::page::{decode_identify_namespace, LbaFormat};
use crate::device::sysfs::sorted_names;
use crate::device::{self, read_trimmed, PcieLink, Sysfs};
use std::path::{Path, PathBuf};

/// Which probes beyond sysfs to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probes {
    /// Identify Namespace for LBA formats (needs root).
    pub identify: bool,
    /// Mounts, swap, holders and signatures of each device.
    pub usage: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Namespace {
    pub name: String,
    pub path: PathBuf,
    pub capacity_bytes: u64,
    pub logical_block_bytes: u32,
    /// From Identify Namespace, when it could be read.
    pub lba_formats: Vec<LbaFormat>,
    pub usage: Option<device::Usage>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Controller {
    pub name: String,
    pub path: PathBuf,
    pub model: Option<String>,
    pub serial: Option<String>,
    pub firmware: Option<String>,
    /// "pcie", "tcp", "rdma", "fc", "loop".
    pub transport: Option<String>,
    /// The PCI address for PCIe controllers.
    pub address: Option<String>,
    pub numa_node: Option<i32>,
    pub pcie_link: Option<PcieLink>,
    /// Composite temperature from the kernel's hwmon sensor, when it has one.
    pub temperature_celsius: Option<f64>,
    pub namespaces: Vec<Namespace>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct BlockDevice {
    pub name: String,
    pub path: PathBuf,
    pub capacity_bytes: u64,
    pub logical_block_bytes: u32,
    pub model: Option<String>,
    /// For loop devices.
    pub backing_file: Option<String>,
    pub rotational: Option<bool>,
    pub removable: Option<bool>,
    pub usage: Option<device::Usage>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Inventory {
    pub controllers: Vec<Controller>,
    pub block_devices: Vec<BlockDevice>,
}

/// The first hwmon temperature under a controller (millidegrees in sysfs).
fn hwmon_temperature(controller_dir: &Path) -> Option<f64> {
    let entries = std::fs::read_dir(controller_dir).ok()?;
    let mut hwmons: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with("hwmon"))
        })
        .collect();
    if let Ok(entries) = std::fs::read_dir(controller_dir.join("hwmon")) {
        hwmons.extend(entries.flatten().map(|entry| entry.path()));
    }
    hwmons.sort();
    hwmons.iter().find_map(|dir| {
        read_trimmed(&dir.join("temp1_input"))?
            .parse::<f64>()
            .ok()
            .map(|milli| milli / 1000.0)
    })
}

fn block_facts(sys_block: &Path, name: &str) -> (u64, u32) {
    let dir = sys_block.join(name);
    let sectors: u64 = read_trimmed(&dir.join("size"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let logical_block_bytes = read_trimmed(&dir.join("queue/logical_block_size"))
        .and_then(|s| s.parse().ok())
        .unwrap_or(512);
    // sysfs counts 512-byte sectors whatever the logical block size.
    (sectors * 512, logical_block_bytes)
}

/// Everything attached, per sysfs under `sysfs_root` (normally `/sys`); device nodes are
/// named under `/dev`.
pub fn inventory(sysfs_root: &Path, probes: Probes) -> Inventory {
    let mut scan = Scan {
        sys_block: sysfs_root.join("block"),
        sysfs: Sysfs::at(sysfs_root),
        probes,
        namespace_names: Vec::new(),
    };
    let class_nvme = sysfs_root.join("class/nvme");
    let controllers = sorted_names(&class_nvme)
        .into_iter()
        .map(|name| scan.controller(&class_nvme, name))
        .collect();
    // After the controllers: a block device that is one of their namespaces is not listed
    // again.
    let block_devices = scan.block_devices();
    Inventory {
        controllers,
        block_devices,
    }
}

/// What an inventory looks at, and the namespaces it has found so far.
struct Scan {
    sys_block: PathBuf,
    sysfs: Sysfs,
    probes: Probes,
    /// Block device names of the namespaces found: each listed once, under its first
    /// controller.
    namespace_names: Vec<String>,
}

impl Scan {
    fn usage(&self, path: &Path) -> Option<device::Usage> {
        self.probes.usage.then(|| device::usage(path))
    }

    /// The controller `name` under `class_nvme`, with the namespaces not seen before.
    fn controller(&mut self, class_nvme: &Path, name: String) -> Controller {
        let dir = class_nvme.join(&name);
        let function_dir = dir.join("device").canonicalize().ok();
        let namespaces = self.namespaces(&dir, &name);
        Controller {
            path: PathBuf::from("/dev").join(&name),
            model: read_trimmed(&dir.join("model")),
            serial: read_trimmed(&dir.join("serial")),
            firmware: read_trimmed(&dir.join("firmware_rev")),
            transport: read_trimmed(&dir.join("transport")),
            address: read_trimmed(&dir.join("address")),
            numa_node: read_trimmed(&dir.join("numa_node"))
                .or_else(|| {
                    function_dir
                        .as_ref()
                        .and_then(|f| read_trimmed(&f.join("numa_node")))
                })
                .and_then(|s| s.parse().ok()),
            // The nearest ancestor of the PCI function with link files, as for namespaces.
            pcie_link: self.sysfs.pcie_link(&dir.join("device")),
            temperature_celsius: hwmon_temperature(&dir),
            namespaces,
            name,
        }
    }

    /// The namespaces of the controller `name` (its sysfs directory `dir`) not seen before.
    fn namespaces(&mut self, dir: &Path, name: &str) -> Vec<Namespace> {
        let mut namespaces = Vec::new();
        for entry in sorted_names(dir) {
            let Some(block_name) = namespace_block_name(name, &entry) else {
                continue;
            };
            if !self.sys_block.join(&block_name).exists()
                || self.namespace_names.contains(&block_name)
            {
                continue;
            }
            let (capacity_bytes, logical_block_bytes) = block_facts(&self.sys_block, &block_name);
            let path = PathBuf::from("/dev").join(&block_name);
            let lba_formats = if self.probes.identify {
                self.lba_formats(&block_name, &path)
            } else {
                Vec::new()
            };
            self.namespace_names.push(block_name.clone());
            namespaces.push(Namespace {
                name: block_name,
                usage: self.usage(&path),
                path,
                capacity_bytes,
                logical_block_bytes,
                lba_formats,
            });
        }
        namespaces
    }

    /// The LBA formats Identify Namespace reports for the namespace; none where it fails.
    fn lba_formats(&self, block_name: &str, path: &Path) -> Vec<LbaFormat> {
        let nsid: u32 = read_trimmed(&self.sys_block.join(block_name).join("nsid"))
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        Admin::open(path)
            .ok()
            .and_then(|admin| admin.identify(CNS_NAMESPACE, nsid).ok())
            .and_then(|bytes| decode_identify_namespace(&bytes).ok())
            .map(|ns| ns.formats)
            .unwrap_or_default()
    }

    /// The block devices that are no namespace of a controller found, no RAM disk and no
    /// unused loop device.
    fn block_devices(&self) -> Vec<BlockDevice> {
        let mut block_devices = Vec::new();
        for name in sorted_names(&self.sys_block) {
            if self.namespace_names.contains(&name)
                || name.starts_with("nvme")
                || name.starts_with("ram")
            {
                continue;
            }
            let dir = self.sys_block.join(&name);
            let backing_file = read_trimmed(&dir.join("loop/backing_file"));
            if name.starts_with("loop") && backing_file.is_none() {
                continue; // an unused loop device
            }
            let (capacity_bytes, logical_block_bytes) = block_facts(&self.sys_block, &name);
            let path = PathBuf::from("/dev").join(&name);
            block_devices.push(BlockDevice {
                model: read_trimmed(&dir.join("device/model")),
                backing_file,
                rotational: read_trimmed(&dir.join("queue/rotational")).map(|s| s == "1"),
                removable: read_trimmed(&dir.join("removable")).map(|s| s == "1"),
                usage: self.usage(&path),
                path,
                capacity_bytes,
                logical_block_bytes,
                name,
            });
        }
        block_devices
    }
}

/// The block device name of the controller `name`'s directory entry `entry`, where it is a
/// namespace. Namespaces appear in the controller directory (nvme0n1) or, with native
/// multipath, as nvme0c0n1 path devices whose block device is nvme0n1.
fn namespace_block_name(name: &str, entry: &str) -> Option<String> {
    let rest = entry.strip_prefix(name)?;
    if rest.starts_with('n') {
        return Some(entry.to_string());
    }
    let position = rest.find('n').filter(|_| rest.starts_with('c'))?;
    Some(format!("{name}{}", &rest[position..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    struct Tree(PathBuf);

    impl Tree {
        fn new() -> Tree {
            static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let root = std::env::temp_dir().join(format!(
                "nvrec-discover-{}-{}",
                std::process::id(),
                COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&root).unwrap();
            Tree(root)
        }

        fn write(&self, rel: &str, text: &str) {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("{text}\n")).unwrap();
        }

        fn link(&self, rel: &str, target: &str) {
            let path = self.0.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            symlink(target, path).unwrap();
        }
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn finds_controllers_namespaces_and_other_devices() {
        let tree = Tree::new();
        let pci = "devices/pci0000:00/0000:00:04.0";
        tree.write(&format!("{pci}/current_link_speed"), "8.0 GT/s PCIe");
        tree.write(&format!("{pci}/current_link_width"), "2");
        tree.write(&format!("{pci}/max_link_speed"), "16.0 GT/s PCIe");
        tree.write(&format!("{pci}/max_link_width"), "4");
        tree.write(&format!("{pci}/numa_node"), "1");
        // The root port above the function has link files too: the function's own must win.
        tree.write("devices/pci0000:00/current_link_speed", "2.5 GT/s PCIe");
        tree.write("devices/pci0000:00/current_link_width", "1");
        tree.write("devices/pci0000:00/max_link_speed", "2.5 GT/s PCIe");
        tree.write("devices/pci0000:00/max_link_width", "1");
        let controller = format!("{pci}/nvme/nvme0");
        for (file, text) in [
            ("model", "QEMU NVMe Ctrl"),
            ("serial", "NVREC0001"),
            ("firmware_rev", "7.2.22"),
            ("transport", "pcie"),
            ("address", "0000:00:04.0"),
            ("hwmon1/temp1_input", "49850"),
        ] {
            tree.write(&format!("{controller}/{file}"), text);
        }
        tree.link(&format!("{controller}/device"), "../../../0000:00:04.0");
        tree.write(&format!("{controller}/nvme0n1/size"), "2097152");
        tree.write(
            &format!("{controller}/nvme0n1/queue/logical_block_size"),
            "512",
        );
        tree.link("class/nvme/nvme0", &format!("../../{controller}"));
        tree.link("block/nvme0n1", &format!("../{controller}/nvme0n1"));
        tree.write("devices/virtual/block/vda/size", "41943040");
        tree.write("devices/virtual/block/vda/queue/logical_block_size", "512");
        tree.write("devices/virtual/block/vda/queue/rotational", "0");
        tree.link("block/vda", "../devices/virtual/block/vda");
        tree.write("devices/virtual/block/loop0/size", "0");
        tree.link("block/loop0", "../devices/virtual/block/loop0");
        tree.write("devices/virtual/block/loop1/size", "2048");
        tree.write(
            "devices/virtual/block/loop1/loop/backing_file",
            "/dev/shm/x.img",
        );
        tree.link("block/loop1", "../devices/virtual/block/loop1");
        tree.write("devices/virtual/block/zram0/size", "16384");
        tree.write(
            "devices/virtual/block/zram0/queue/logical_block_size",
            "4096",
        );
        tree.link("block/zram0", "../devices/virtual/block/zram0");
        tree.write("devices/virtual/block/ram0/size", "8192");
        tree.link("block/ram0", "../devices/virtual/block/ram0");

        let found = inventory(
            &tree.0,
            Probes {
                identify: false,
                usage: false,
            },
        );
        assert_eq!(found.controllers.len(), 1);
        let nvme = &found.controllers[0];
        assert_eq!(nvme.name, "nvme0");
        assert_eq!(nvme.model.as_deref(), Some("QEMU NVMe Ctrl"));
        assert_eq!(nvme.numa_node, Some(1));
        assert_eq!(nvme.temperature_celsius, Some(49.85));
        let link = nvme.pcie_link.as_ref().unwrap();
        assert_eq!((link.current_width, link.max_width), (2, 4));
        assert_eq!(link.current_speed, "8.0 GT/s PCIe");
        assert_eq!(link.max_speed, "16.0 GT/s PCIe");
        assert_eq!(nvme.namespaces.len(), 1);
        assert_eq!(nvme.namespaces[0].capacity_bytes, 1 << 30);
        let names: Vec<&str> = found
            .block_devices
            .iter()
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(names, ["loop1", "vda", "zram0"]);
        assert_eq!(found.block_devices[2].logical_block_bytes, 4096);
        assert_eq!(found.block_devices[1].capacity_bytes, 20 << 30);
        assert_eq!(
            found.block_devices[0].backing_file.as_deref(),
            Some("/dev/shm/x.img")
        );
    }

    #[test]
    fn an_empty_tree_finds_nothing() {
        let tree = Tree::new();
        let found = inventory(
            &tree.0,
            Probes {
                identify: false,
                usage: false,
            },
        );
        assert!(found.controllers.is_empty() && found.block_devices.is_empty());
    }
}
