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
//! A link is judged at each end by [`training`]: trained below what it can do when its
//! current speed or width is below the lower of its two ends' maxima (the self-test's TEST
//! #00 and #11 judge the drive's end and the root port's end so, as the NVMe Streamer's
//! checks its root port's link and its SSD's).
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
    let gt_per_s = speed_gt_per_s(speed)?;
    let encoding = if gt_per_s < 8.0 { 0.8 } else { 128.0 / 130.0 };
    (width > 0).then(|| gt_per_s * 1e9 * encoding * width as f64 / 8.0)
}

/// The transfer rate of a speed as sysfs writes it (`8.0 GT/s PCIe`): GT/s, or `None` for
/// `Unknown` and anything else that is not a rate.
pub fn speed_gt_per_s(speed: &str) -> Option<f64> {
    let gt_per_s: f64 = speed.split_whitespace().next()?.parse().ok()?;
    (gt_per_s > 0.0).then_some(gt_per_s)
}

/// The PCIe generation of a rate: 2.5 GT/s is Gen1, 5 Gen2, 8 Gen3, 16 Gen4, 32 Gen5, 64
/// Gen6 (PCI Express Base Specification, the data rates of each revision).
pub fn generation(speed: &str) -> Option<u32> {
    let gt_per_s = speed_gt_per_s(speed)?;
    [2.5, 5.0, 8.0, 16.0, 32.0, 64.0]
        .iter()
        .position(|rate| (gt_per_s - rate).abs() < 0.01)
        .map(|index| index as u32 + 1)
}

/// Whether a function reports its link at all. Emulated functions and some virtual ones
/// report the speeds as `Unknown` and the widths as 0 (current) or 255 (maximum): there is
/// no link to judge.
pub fn link_reported(link: &PcieLink) -> bool {
    speed_gt_per_s(&link.current_speed).is_some()
        && speed_gt_per_s(&link.max_speed).is_some()
        && link.current_width != 0
        && link.max_width != 0
        && link.max_width != 255
}

/// How one end of a PCIe link trained, judged against what the link can do: the lower of
/// this end's maximum and its partner's (the function at the link's other end), speed and
/// width apart. A Gen4 drive in a Gen3 slot runs at Gen3 and that is all its link can do; a
/// drive trained at x2 where both ends have four lanes is below it.
#[derive(Debug, Clone, PartialEq)]
pub enum Training {
    /// Current speed and width are what both ends can do.
    Full { speed: String, width: u32 },
    /// The link runs below what both ends can do (`speed`, `width`).
    Below { speed: String, width: u32 },
    /// The function does not report its link (see [`link_reported`]).
    NotReported,
}

/// Judges `end`'s link against its own maximum and, where it reports one, `partner`'s.
pub fn training(end: &PcieLink, partner: Option<&PcieLink>) -> Training {
    if !link_reported(end) {
        return Training::NotReported;
    }
    let partner = partner.filter(|partner| link_reported(partner));
    let mut speed = end.max_speed.clone();
    let mut width = end.max_width;
    if let Some(partner) = partner {
        if speed_gt_per_s(&partner.max_speed) < speed_gt_per_s(&speed) {
            speed = partner.max_speed.clone();
        }
        width = width.min(partner.max_width);
    }
    let current_gt_per_s = speed_gt_per_s(&end.current_speed).unwrap_or(0.0);
    let capable_gt_per_s = speed_gt_per_s(&speed).unwrap_or(0.0);
    if current_gt_per_s + 0.01 < capable_gt_per_s || end.current_width < width {
        Training::Below { speed, width }
    } else {
        Training::Full { speed, width }
    }
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

/// The PCI functions from `function_dir` (canonical) up to the one directly under the host
/// bridge: the function itself first.
fn functions_up(function_dir: &Path) -> Vec<&Path> {
    function_dir
        .ancestors()
        .take_while(|dir| {
            dir.file_name()
                .is_some_and(|n| is_pci_address(&n.to_string_lossy()))
        })
        .collect()
}

/// The hops from a drive's PCI function directory (canonical) up to its root port: the drive
/// first, the root port last; only the drive where it sits on the host bridge itself (no
/// root port, as QEMU's q35 machine places its NVMe controller). Functions that report no
/// link are left out; empty where the drive reports none.
pub(crate) fn path_to_root_port(function_dir: &Path) -> Vec<PcieHop> {
    let functions = functions_up(function_dir);
    let Some(drive) = functions.first().and_then(|dir| hop(dir)) else {
        return Vec::new();
    };
    let mut hops = vec![drive];
    if functions.len() >= 2 {
        // The path's far end stands for the root port only when that is what it is.
        let Some(root_port) = hop(functions[functions.len() - 1]) else {
            return hops;
        };
        hops.extend(
            functions[1..functions.len() - 1]
                .iter()
                .filter_map(|dir| hop(dir)),
        );
        hops.push(root_port);
    }
    hops
}

/// The drive's path from its PCI function directory (canonical) up to the root port, and
/// the directory of its uplink.
fn drive_path(controller: &str, function_dir: &Path) -> Option<(DrivePath, PathBuf)> {
    let functions = functions_up(function_dir);
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

    fn link(current: (&str, u32), max: (&str, u32)) -> PcieLink {
        PcieLink {
            current_speed: current.0.to_string(),
            current_width: current.1,
            max_speed: max.0.to_string(),
            max_width: max.1,
        }
    }

    #[test]
    fn a_link_end_is_judged_against_the_lower_of_both_ends_maxima() {
        const GEN3: &str = "8.0 GT/s PCIe";
        const GEN4: &str = "16.0 GT/s PCIe";
        const GEN5: &str = "32.0 GT/s PCIe";
        let full = |speed: &str, width| Training::Full {
            speed: speed.to_string(),
            width,
        };
        let below = |speed: &str, width| Training::Below {
            speed: speed.to_string(),
            width,
        };
        let cases = [
            // (end, partner, training)
            (link((GEN3, 4), (GEN3, 4)), None, full(GEN3, 4)),
            (link((GEN3, 4), (GEN4, 4)), None, below(GEN4, 4)),
            (link((GEN3, 2), (GEN3, 4)), None, below(GEN3, 4)),
            // A Gen4 x4 drive in a Gen3 x16 slot: Gen3 x4 is all the link can do.
            (
                link((GEN3, 4), (GEN4, 4)),
                Some(link((GEN3, 4), (GEN3, 16))),
                full(GEN3, 4),
            ),
            (
                link((GEN3, 4), (GEN3, 16)),
                Some(link((GEN3, 4), (GEN4, 4))),
                full(GEN3, 4),
            ),
            (
                link((GEN4, 2), (GEN5, 16)),
                Some(link((GEN4, 2), (GEN4, 4))),
                below(GEN4, 4),
            ),
            // A partner that reports nothing leaves the end's own maximum.
            (
                link((GEN3, 4), (GEN4, 4)),
                Some(link(("Unknown", 0), ("Unknown", 255))),
                below(GEN4, 4),
            ),
            (
                link(("Unknown", 0), ("Unknown", 255)),
                Some(link((GEN3, 4), (GEN3, 4))),
                Training::NotReported,
            ),
            (link((GEN3, 0), (GEN3, 4)), None, Training::NotReported),
        ];
        for (end, partner, expected) in cases {
            assert_eq!(
                training(&end, partner.as_ref()),
                expected,
                "{end:?} with {partner:?}"
            );
        }
        let generations: Vec<Option<u32>> = ["2.5 GT/s PCIe", "5.0 GT/s", GEN3, GEN4, GEN5]
            .iter()
            .chain(&["64.0 GT/s PCIe", "Unknown", "3.0 GT/s"])
            .map(|speed| generation(speed))
            .collect();
        assert_eq!(
            generations,
            [
                Some(1),
                Some(2),
                Some(3),
                Some(4),
                Some(5),
                Some(6),
                None,
                None
            ]
        );
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
