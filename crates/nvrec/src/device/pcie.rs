//! The PCIe tree above NVMe drives, from sysfs: each drive's link and every link above it to
//! its root port, and the drives grouped by the link they share on the way (a switch's
//! uplink), with what that link carries at most.
//!
//! A PCI function's sysfs directory sits inside its parent bridge's
//! (`/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/...`), so the path from a drive to its
//! root port is the drive's canonical directory and its ancestors; the functions among them
//! with `current_link_speed` are the hops. The root port is the function directly under the
//! host bridge (`pci0000:00`); the *uplink* of a drive is the function directly under its
//! root port: the drive itself when it sits on the root port, a switch's upstream port when
//! a switch is between. Drives with the same uplink share its bandwidth.
//!
//! Best effort and read-only, like the rest of sysfs here: a drive whose tree cannot be read
//! is left out. Rates are the raw link rate after line encoding (8b/10b below 8 GT/s,
//! 128b/130b from 8 GT/s on); packet headers take several percent more, which this does not
//! model.

use super::sysfs::link_at;
use super::PcieLink;
use std::path::{Path, PathBuf};

/// One PCI function on the way from a drive to its root port, with the link it reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PcieHop {
    /// `0000:01:00.0`.
    pub address: String,
    pub link: PcieLink,
    /// What the link carries at its current speed and width, bytes per second.
    pub bytes_per_s: Option<f64>,
}

/// A drive (an NVMe controller) and the hops above it, the drive first, the root port last.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DrivePath {
    /// `nvme0`.
    pub controller: String,
    pub hops: Vec<PcieHop>,
}

impl DrivePath {
    /// The drive's own link rate.
    pub fn bytes_per_s(&self) -> Option<f64> {
        self.hops.first().and_then(|hop| hop.bytes_per_s)
    }
}

/// Drives that share one uplink.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UplinkGroup {
    /// The function under the root port: a switch's upstream port, or the drive itself.
    pub uplink: PcieHop,
    pub root_port: Option<String>,
    pub drives: Vec<DrivePath>,
    /// What the uplink carries (its current speed and width).
    pub limit_bytes_per_s: Option<f64>,
    /// The drives' own links added up: what they could move without the uplink.
    pub drives_bytes_per_s: f64,
    /// Whether the uplink carries less than the drives' links together.
    pub caps_drives: bool,
}

/// Bytes a second a link moves at `speed` (`8.0 GT/s PCIe`) over `width` lanes.
pub fn link_bytes_per_s(speed: &str, width: u32) -> Option<f64> {
    let gt_per_s: f64 = speed.split_whitespace().next()?.parse().ok()?;
    let encoding = if gt_per_s < 8.0 { 0.8 } else { 128.0 / 130.0 };
    (gt_per_s > 0.0 && width > 0).then(|| gt_per_s * 1e9 * encoding * width as f64 / 8.0)
}

/// `0000:01:00.0`: domain, bus, device and function.
fn is_pci_address(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes.len() == 12
        && bytes[4] == b':'
        && bytes[7] == b':'
        && bytes[10] == b'.'
        && bytes
            .iter()
            .enumerate()
            .all(|(i, b)| matches!(i, 4 | 7 | 10) || b.is_ascii_hexdigit())
}

fn hop(dir: &Path) -> Option<PcieHop> {
    let link = link_at(dir)?;
    Some(PcieHop {
        address: dir.file_name()?.to_string_lossy().into_owned(),
        bytes_per_s: link_bytes_per_s(&link.current_speed, link.current_width),
        link,
    })
}

/// The drive's path from its PCI function directory (canonical) up to the root port, and
/// the directory of its uplink.
fn drive_path(controller: &str, function_dir: &Path) -> Option<(DrivePath, PathBuf)> {
    let functions: Vec<&Path> = function_dir
        .ancestors()
        .take_while(|dir| {
            dir.file_name()
                .is_some_and(|n| is_pci_address(&n.to_string_lossy()))
        })
        .collect();
    let uplink = if functions.len() >= 2 {
        functions[functions.len() - 2]
    } else {
        *functions.first()?
    };
    let hops: Vec<PcieHop> = functions.iter().filter_map(|dir| hop(dir)).collect();
    (!hops.is_empty()).then(|| {
        let path = DrivePath {
            controller: controller.to_string(),
            hops,
        };
        (path, uplink.to_path_buf())
    })
}

/// Every NVMe controller under `sysfs_root/class/nvme` on the PCI bus, grouped by uplink,
/// groups and drives in name order.
pub fn uplink_groups(sysfs_root: &Path) -> Vec<UplinkGroup> {
    let names = super::sysfs::sorted_names(&sysfs_root.join("class/nvme"));
    let mut groups: Vec<(PathBuf, UplinkGroup)> = Vec::new();
    for name in names {
        let device = sysfs_root.join("class/nvme").join(&name).join("device");
        let Some((path, uplink_dir)) = device
            .canonicalize()
            .ok()
            .and_then(|dir| drive_path(&name, &dir))
        else {
            continue;
        };
        match groups.iter_mut().find(|(dir, _)| *dir == uplink_dir) {
            Some((_, group)) => group.drives.push(path),
            None => {
                let Some(uplink) = hop(&uplink_dir) else {
                    continue;
                };
                let root_port = path.hops.last().map(|hop| hop.address.clone());
                groups.push((
                    uplink_dir,
                    UplinkGroup {
                        limit_bytes_per_s: uplink.bytes_per_s,
                        uplink,
                        root_port,
                        drives: vec![path],
                        drives_bytes_per_s: 0.0,
                        caps_drives: false,
                    },
                ));
            }
        }
    }
    groups
        .into_iter()
        .map(|(_, mut group)| {
            group.drives_bytes_per_s = group.drives.iter().filter_map(DrivePath::bytes_per_s).sum();
            group.caps_drives = group
                .limit_bytes_per_s
                .is_some_and(|limit| limit < group.drives_bytes_per_s * (1.0 - 1e-9));
            group
        })
        .collect()
}

/// A shared uplink that caps a recording: `share_bytes_per_s` to each of the group's drives
/// in `wanted` (controller names) adds up to more than the uplink carries.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct UplinkCap {
    pub uplink: String,
    pub drives: Vec<String>,
    pub limit_bytes_per_s: f64,
    pub wanted_bytes_per_s: f64,
}

/// The uplinks that carry less than `share_bytes_per_s` times the drives of `wanted` behind
/// them (every drive when `wanted` is empty).
pub fn uplink_caps(
    groups: &[UplinkGroup],
    wanted: &[String],
    share_bytes_per_s: f64,
) -> Vec<UplinkCap> {
    groups
        .iter()
        .filter_map(|group| {
            let drives: Vec<String> = group
                .drives
                .iter()
                .map(|drive| drive.controller.clone())
                .filter(|name| wanted.is_empty() || wanted.contains(name))
                .collect();
            let limit = group.limit_bytes_per_s?;
            let wanted_bytes_per_s = share_bytes_per_s * drives.len() as f64;
            (wanted_bytes_per_s > limit).then(|| UplinkCap {
                uplink: group.uplink.address.clone(),
                drives,
                limit_bytes_per_s: limit,
                wanted_bytes_per_s,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The captured tree: a root port with a switch (an x4 Gen3 uplink) and four Gen3 x4
    /// drives behind it, and a Gen4 x4 drive on a root port of its own (its README says more).
    fn switch_with_four_drives() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs-pcie-switch")
    }

    #[test]
    fn link_rates_by_generation() {
        // (speed, width, GB/s): Gen1 x1, Gen3 x4 (the seed's 3.94), Gen4 x4, Gen3 x8 uplink.
        for (speed, width, gb_per_s) in [
            ("2.5 GT/s PCIe", 1, 0.25),
            ("8.0 GT/s PCIe", 4, 3.938),
            ("16.0 GT/s PCIe", 4, 7.877),
            ("8.0 GT/s", 8, 7.877),
        ] {
            let rate = link_bytes_per_s(speed, width).unwrap() / 1e9;
            assert!((rate - gb_per_s).abs() < 1e-3, "{speed} x{width}: {rate}");
        }
        assert_eq!(link_bytes_per_s("Unknown", 4), None);
        assert_eq!(link_bytes_per_s("8.0 GT/s PCIe", 0), None);
    }

    #[test]
    fn four_drives_behind_one_x4_uplink_are_one_group_it_caps() {
        let groups = uplink_groups(&switch_with_four_drives());
        assert_eq!(groups.len(), 2, "{groups:#?}");
        let switch = &groups[0];
        assert_eq!(switch.uplink.address, "0000:01:00.0");
        assert_eq!(switch.root_port.as_deref(), Some("0000:00:01.0"));
        let names: Vec<&str> = switch
            .drives
            .iter()
            .map(|d| d.controller.as_str())
            .collect();
        assert_eq!(names, ["nvme0", "nvme1", "nvme2", "nvme3"]);
        // Each drive's path: its own link, the switch's downstream and upstream ports, the
        // root port.
        let hops: Vec<&str> = switch.drives[2]
            .hops
            .iter()
            .map(|h| h.address.as_str())
            .collect();
        assert_eq!(
            hops,
            [
                "0000:05:00.0",
                "0000:02:03.0",
                "0000:01:00.0",
                "0000:00:01.0"
            ]
        );
        let gen3_x4 = 8e9 * 128.0 / 130.0 * 4.0 / 8.0;
        assert!((switch.limit_bytes_per_s.unwrap() - gen3_x4).abs() < 1.0);
        assert!((switch.drives_bytes_per_s - 4.0 * gen3_x4).abs() < 1.0);
        assert!(switch.caps_drives);
        let direct = &groups[1];
        assert_eq!(
            direct.uplink.address, "0000:07:00.0",
            "the drive is its own uplink"
        );
        assert_eq!(direct.drives.len(), 1);
        assert!(!direct.caps_drives);

        // 2 GB/s to each of the four is 8 GB/s through a 3.94 GB/s uplink; to two of them,
        // 4 GB/s, still too much; 1.5 GB/s to two fits.
        let all = uplink_caps(&groups, &[], 2e9);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].drives.len(), 4);
        assert_eq!(all[0].wanted_bytes_per_s, 8e9);
        let two = ["nvme0".to_string(), "nvme1".to_string()];
        assert_eq!(uplink_caps(&groups, &two, 2e9).len(), 1);
        assert!(uplink_caps(&groups, &two, 1.5e9).is_empty());
        assert!(uplink_caps(&groups, &["nvme4".to_string()], 7e9).is_empty());
    }

    #[test]
    fn a_tree_without_nvme_is_empty() {
        let root = std::env::temp_dir().join(format!("nvrec-pcie-none-{}", std::process::id()));
        assert!(uplink_groups(&root).is_empty());
        assert!(is_pci_address("0000:01:00.0") && !is_pci_address("pci0000:00"));
    }
}
