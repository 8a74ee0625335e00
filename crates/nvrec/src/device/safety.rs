//! The checks that stand between `nvrec` and someone's data before a block device is
//! opened for writing: is it (or a partition of it) mounted, active swap, held by
//! device-mapper / md / bcache, and do its first blocks hold a known signature.
//!
//! They run only for block devices opened with `Access::Write` and `Safety::Check`.
//! Failing to read the facts they need (mountinfo, the device's first blocks) refuses
//! the open rather than waving it through; `--force` skips all of them.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::procfs::{self, MountEntry};
use super::signature::{detect_signature, Signature, SIGNATURE_PROBE_BYTES};
use super::sys::AlignedBuf;
use super::sysfs::{BlockMember, DevNum, Sysfs};
use super::DeviceError;

/// Refuses when the block device `dev` (opened as `path`) or one of its partitions is
/// mounted, is active swap, or has holders.
pub(crate) fn check_not_in_use(path: &Path, dev: DevNum) -> Result<(), DeviceError> {
    let sysfs = Sysfs::system();
    let members = sysfs.members(dev);

    let mounts = procfs::read_mountinfo().map_err(|source| DeviceError::Probe {
        path: path.to_path_buf(),
        what: format!(
            "read {} to check whether the device is mounted (--force skips this check)",
            procfs::mountinfo_path().display()
        ),
        source,
    })?;
    if let Some((member, mount)) = find_mounted(&members, &mounts, block_dev_of) {
        return Err(DeviceError::Mounted {
            path: path.to_path_buf(),
            device: dev_path(member),
            mount_point: mount.mount_point.clone(),
        });
    }

    let swaps = procfs::read_swaps().map_err(|source| DeviceError::Probe {
        path: path.to_path_buf(),
        what: format!(
            "read {} to check whether the device is swap (--force skips this check)",
            procfs::swaps_path().display()
        ),
        source,
    })?;
    if let Some(member) = find_swap(&members, &swaps, block_dev_of) {
        return Err(DeviceError::Swap {
            path: path.to_path_buf(),
            device: dev_path(member),
        });
    }

    let holders = collect_holders(&members, |name| sysfs.holders(name));
    if !holders.is_empty() {
        return Err(DeviceError::Held {
            path: path.to_path_buf(),
            holders,
        });
    }
    Ok(())
}

/// Holders of every member. Those of the device itself are listed bare
/// (`dm-0 (vg0-data)`), those of a partition say which one (`md127 on nvme0n1p2`).
fn collect_holders(
    members: &[BlockMember],
    holders_of: impl Fn(&str) -> Vec<String>,
) -> Vec<String> {
    members
        .iter()
        .enumerate()
        .flat_map(|(index, member)| {
            holders_of(&member.name)
                .into_iter()
                .map(move |holder| match index {
                    0 => holder,
                    _ => format!("{holder} on {}", member.name),
                })
        })
        .collect()
}

/// `/dev/<name>` for a member, the path users know it by.
fn dev_path(member: &BlockMember) -> PathBuf {
    Path::new("/dev").join(&member.name)
}

/// The device number of `path` when it is a block device (following symlinks).
fn block_dev_of(path: &Path) -> Option<DevNum> {
    let meta = std::fs::metadata(path).ok()?;
    meta.file_type()
        .is_block_device()
        .then(|| DevNum::from_dev_t(meta.rdev()))
}

/// The first member that a mount uses: by the mount's device number, or, for
/// filesystems that report an anonymous device number (btrfs), by the block device its
/// source path names.
fn find_mounted<'m, 'e>(
    members: &'m [BlockMember],
    mounts: &'e [MountEntry],
    dev_of: impl Fn(&Path) -> Option<DevNum>,
) -> Option<(&'m BlockMember, &'e MountEntry)> {
    mounts.iter().find_map(|mount| {
        let by_number = members.iter().find(|m| m.dev == mount.dev);
        let by_source = || {
            if !mount.source.starts_with("/dev") {
                return None;
            }
            let source_dev = dev_of(&mount.source)?;
            members.iter().find(|m| m.dev == source_dev)
        };
        by_number.or_else(by_source).map(|member| (member, mount))
    })
}

/// The first member that is an active swap device.
fn find_swap<'m>(
    members: &'m [BlockMember],
    swaps: &[PathBuf],
    dev_of: impl Fn(&Path) -> Option<DevNum>,
) -> Option<&'m BlockMember> {
    swaps.iter().find_map(|swap| {
        let swap_dev = dev_of(swap)?;
        members.iter().find(|m| m.dev == swap_dev)
    })
}

/// Reads the device's first blocks through the O_DIRECT descriptor and refuses when
/// they hold a known signature.
pub(crate) fn check_no_signature(
    path: &Path,
    file: &File,
    capacity_bytes: u64,
    logical_block_bytes: u32,
) -> Result<(), DeviceError> {
    let head = read_head(file, capacity_bytes, logical_block_bytes).map_err(|source| {
        DeviceError::Probe {
            path: path.to_path_buf(),
            what: "read the first blocks to look for an existing filesystem or partition table \
                   (--force skips this check)"
                .to_string(),
            source,
        }
    })?;
    match detect_signature(&head.0.as_slice()[..head.1]) {
        Some(Signature { kind, offset_bytes }) => Err(DeviceError::Signature {
            path: path.to_path_buf(),
            what: kind,
            offset_bytes,
        }),
        None => Ok(()),
    }
}

/// What uses a block device, for listings (`nvrec devices`): the same facts the safety checks
/// refuse on, gathered instead of stopping at the first.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Usage {
    /// `nvme0n1p2 on /data (ext4)`.
    pub mounted: Vec<String>,
    pub swap: Vec<String>,
    pub holders: Vec<String>,
    /// What the first blocks hold (`ext4 filesystem`, `GPT partition table`).
    pub signature: Option<String>,
    /// Why the first blocks could not be read, when they could not.
    pub signature_unknown: Option<String>,
}

impl Usage {
    /// Whether writing to the device would destroy something.
    pub fn in_use(&self) -> bool {
        !(self.mounted.is_empty() && self.swap.is_empty() && self.holders.is_empty())
            || self.signature.is_some()
    }
}

/// Gathers [`Usage`] for the block device at `path`; never fails (what cannot be read is
/// left out, or said in `signature_unknown`).
pub fn usage(path: &Path) -> Usage {
    let mut usage = Usage::default();
    let Some(dev) = block_dev_of(path) else {
        usage.signature_unknown = Some("not a block device".to_string());
        return usage;
    };
    let sysfs = Sysfs::system();
    let members = sysfs.members(dev);
    if let Ok(mounts) = procfs::read_mountinfo() {
        for mount in &mounts {
            let member = members.iter().find(|member| {
                member.dev == mount.dev
                    || (mount.source.starts_with("/dev")
                        && block_dev_of(&mount.source) == Some(member.dev))
            });
            if let Some(member) = member {
                usage.mounted.push(format!(
                    "{} on {} ({})",
                    member.name,
                    mount.mount_point.display(),
                    mount.fs_type
                ));
            }
        }
    }
    if let Ok(swaps) = procfs::read_swaps() {
        for swap in &swaps {
            if let Some(swap_dev) = block_dev_of(swap) {
                if let Some(member) = members.iter().find(|member| member.dev == swap_dev) {
                    usage.swap.push(member.name.clone());
                }
            }
        }
    }
    usage.holders = collect_holders(&members, |name| sysfs.holders(name));
    let head = File::open(path).and_then(|file| {
        let mut buf = vec![0u8; SIGNATURE_PROBE_BYTES];
        let mut filled = 0;
        while filled < buf.len() {
            match file.read_at(&mut buf[filled..], filled as u64) {
                Ok(0) => break,
                Ok(count) => filled += count,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        buf.truncate(filled);
        Ok(buf)
    });
    match head {
        Ok(head) => {
            usage.signature =
                detect_signature(&head).map(|found| found.kind.description().to_string())
        }
        Err(error) => usage.signature_unknown = Some(error.to_string()),
    }
    usage
}

/// Reads up to [`SIGNATURE_PROBE_BYTES`] from the start of the device into an aligned
/// buffer, in whole logical blocks. Returns the buffer and how many bytes were read.
fn read_head(
    file: &File,
    capacity_bytes: u64,
    logical_block_bytes: u32,
) -> io::Result<(AlignedBuf, usize)> {
    let block_bytes = u64::from(logical_block_bytes.max(1));
    let want_bytes = capacity_bytes.min(SIGNATURE_PROBE_BYTES as u64);
    // Whole blocks only: O_DIRECT refuses partial ones. A device smaller than one block
    // cannot be read this way; then nothing is read and nothing is found.
    let want_bytes =
        usize::try_from(want_bytes - want_bytes % block_bytes).unwrap_or(SIGNATURE_PROBE_BYTES);
    let align_bytes = (logical_block_bytes as usize).max(4096);
    let mut buf = AlignedBuf::zeroed(want_bytes.max(align_bytes), align_bytes)?;
    let mut filled = 0usize;
    while filled < want_bytes {
        match file.read_at(&mut buf.as_mut_slice()[filled..want_bytes], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok((buf, filled))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::procfs::parse_mountinfo;

    fn members() -> Vec<BlockMember> {
        vec![
            BlockMember {
                name: "nvme0n1".into(),
                dev: DevNum {
                    major: 259,
                    minor: 0,
                },
            },
            BlockMember {
                name: "nvme0n1p2".into(),
                dev: DevNum {
                    major: 259,
                    minor: 2,
                },
            },
        ]
    }

    /// Pretends `/dev/nvme0n1p2` is 259:2 and nothing else is a block device.
    fn fake_dev_of(path: &Path) -> Option<DevNum> {
        (path == Path::new("/dev/nvme0n1p2")).then_some(DevNum {
            major: 259,
            minor: 2,
        })
    }

    #[test]
    fn device_find_mounted_by_number_and_by_source() {
        let members = members();
        let by_number = parse_mountinfo(b"1 0 254:0 / / rw - ext4 /dev/vda rw\n2 1 259:2 / /data rw shared:1 - xfs /dev/nvme0n1p2 rw\n");
        let (member, mount) = find_mounted(&members, &by_number, fake_dev_of).expect("mounted");
        assert_eq!(member.name, "nvme0n1p2");
        assert_eq!(mount.mount_point, Path::new("/data"));

        // btrfs: anonymous device number, found through the source path.
        let by_source = parse_mountinfo(b"2 1 0:51 / /srv rw - btrfs /dev/nvme0n1p2 rw\n");
        let (member, mount) = find_mounted(&members, &by_source, fake_dev_of).expect("mounted");
        assert_eq!(member.name, "nvme0n1p2");
        assert_eq!(mount.mount_point, Path::new("/srv"));

        let elsewhere = parse_mountinfo(
            b"1 0 254:0 / / rw - ext4 /dev/vda rw\n3 1 0:22 / /tmp rw - tmpfs tmpfs rw\n",
        );
        assert!(find_mounted(&members, &elsewhere, fake_dev_of).is_none());
    }

    #[test]
    fn device_find_swap_matches_partitions() {
        let members = members();
        let swaps = vec![PathBuf::from("/swapfile"), PathBuf::from("/dev/nvme0n1p2")];
        assert_eq!(
            find_swap(&members, &swaps, fake_dev_of).map(|m| m.name.as_str()),
            Some("nvme0n1p2")
        );
        assert!(find_swap(&members, &swaps[..1], fake_dev_of).is_none());
    }

    #[test]
    fn device_holder_labels_name_the_partition() {
        let members = members();
        let holders = collect_holders(&members, |name| match name {
            "nvme0n1" => vec!["dm-0 (vg-a)".to_string()],
            "nvme0n1p2" => vec!["md127".to_string()],
            _ => Vec::new(),
        });
        assert_eq!(holders, vec!["dm-0 (vg-a)", "md127 on nvme0n1p2"]);
        assert!(collect_holders(&members, |_| Vec::new()).is_empty());
    }
}
