//! Targets of one bench on several drives must be different drives: not the same file or
//! device twice (under two names, a link or a hard link), not a disk and one of its
//! partitions, not a loop device and the file behind it, and not simulated drives beside real
//! ones (their clocks are not one time line). Checked before any target is opened, so a
//! refusal writes nothing.
//!
//! What it deliberately does not do: the safety checks of each target (a filesystem, a mount,
//! a recording on it), which opening does for every target as for one.

use super::TargetSpec;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Why the targets of one bench are not distinct drives.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotDistinct {
    #[error("{first} and {second} are the same target: name each drive once")]
    Same { first: String, second: String },
    #[error(
        "{partition} is a partition of {disk}: a bench on both writes over one with the other"
    )]
    Partition { partition: String, disk: String },
    #[error("{device} is a loop device over {file}: both name the same data")]
    LoopOverFile { device: String, file: String },
    #[error("{first} and {second} are loop devices over the same file: both name the same data")]
    SameBacking { first: String, second: String },
    #[error(
        "{sim} is a simulated drive and {real} is not: the simulated drive runs on a virtual \
         clock, so their rates cannot be added; bench them apart"
    )]
    SimWithReal { sim: String, real: String },
}

/// What a target is, as far as telling drives apart goes.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Identity {
    Sim,
    /// A file not made yet: its absolute path.
    Missing(PathBuf),
    File {
        device: u64,
        inode: u64,
    },
    Block {
        device: u64,
        /// The whole disk's device number, for a partition.
        disk: Option<u64>,
        /// The file behind a loop device: its device and inode.
        backing: Option<(u64, u64)>,
    },
}

/// Refuses targets that name the same drive twice; see the module's doc.
pub fn check_distinct(names: &[String], specs: &[TargetSpec]) -> Result<(), NotDistinct> {
    let identities: Vec<Identity> = specs.iter().map(identity).collect();
    for (second, later) in identities.iter().enumerate() {
        for (first, earlier) in identities[..second].iter().enumerate() {
            clash(
                (&names[first], earlier),
                (&names[second], later),
                Order::AsGiven,
            )?;
        }
    }
    Ok(())
}

/// Which of a pair [`clash`] looks at first; each check runs both ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    AsGiven,
    Swapped,
}

fn clash(
    (first_name, first): (&String, &Identity),
    (second_name, second): (&String, &Identity),
    order: Order,
) -> Result<(), NotDistinct> {
    let names = || (first_name.clone(), second_name.clone());
    match (first, second) {
        (Identity::Sim, Identity::Sim) => {}
        (Identity::Sim, _) => {
            let (sim, real) = names();
            return Err(NotDistinct::SimWithReal { sim, real });
        }
        (Identity::Block { device: a, .. }, Identity::Block { device: b, .. }) if a == b => {
            let (first, second) = names();
            return Err(NotDistinct::Same { first, second });
        }
        (
            Identity::Block {
                disk: Some(disk), ..
            },
            Identity::Block { device, .. },
        ) if disk == device => {
            let (partition, disk) = names();
            return Err(NotDistinct::Partition { partition, disk });
        }
        (
            Identity::Block {
                backing: Some(a), ..
            },
            Identity::Block {
                backing: Some(b), ..
            },
        ) if a == b => {
            let (first, second) = names();
            return Err(NotDistinct::SameBacking { first, second });
        }
        (
            Identity::Block {
                backing: Some((device, inode)),
                ..
            },
            Identity::File {
                device: file_device,
                inode: file_inode,
            },
        ) if (device, inode) == (file_device, file_inode) => {
            let (device, file) = names();
            return Err(NotDistinct::LoopOverFile { device, file });
        }
        (Identity::File { .. }, Identity::File { .. })
        | (Identity::Missing(_), Identity::Missing(_))
            if first == second =>
        {
            let (first, second) = names();
            return Err(NotDistinct::Same { first, second });
        }
        _ => {}
    }
    match order {
        Order::AsGiven => clash((second_name, second), (first_name, first), Order::Swapped),
        Order::Swapped => Ok(()),
    }
}

fn identity(spec: &TargetSpec) -> Identity {
    let path = match spec {
        TargetSpec::Sim(_) => return Identity::Sim,
        TargetSpec::Path(path) => path,
    };
    let Ok(metadata) = std::fs::metadata(path) else {
        return Identity::Missing(absolute(path));
    };
    if !metadata.file_type().is_block_device() {
        return Identity::File {
            device: metadata.dev(),
            inode: metadata.ino(),
        };
    }
    let device = metadata.rdev();
    let sysfs = PathBuf::from(format!("/sys/dev/block/{}", numbers(device)));
    let disk = sysfs
        .join("partition")
        .exists()
        .then(|| read_numbers(&sysfs.join("../dev")))
        .flatten();
    let backing = std::fs::read_to_string(sysfs.join("loop/backing_file"))
        .ok()
        .and_then(|file| std::fs::metadata(file.trim()).ok())
        .map(|file| (file.dev(), file.ino()));
    Identity::Block {
        device,
        disk,
        backing,
    }
}

/// A path not made yet, from the root: its folder resolved where it exists.
fn absolute(path: &Path) -> PathBuf {
    let folder = path
        .parent()
        .filter(|folder| !folder.as_os_str().is_empty());
    let folder = folder.unwrap_or(Path::new("."));
    match (folder.canonicalize(), path.file_name()) {
        (Ok(folder), Some(name)) => folder.join(name),
        _ => path.to_path_buf(),
    }
}

/// `major:minor` of a device number, as sysfs names it (Linux's encoding, `sys/sysmacros.h`).
fn numbers(device: u64) -> String {
    let major = ((device >> 8) & 0xfff) | ((device >> 32) & !0xfff);
    let minor = (device & 0xff) | ((device >> 12) & !0xff);
    format!("{major}:{minor}")
}

/// A device number from sysfs's `major:minor`.
fn read_numbers(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    let (major, minor) = text.trim().split_once(':')?;
    let (major, minor): (u64, u64) = (major.parse().ok()?, minor.parse().ok()?);
    Some(
        ((major & 0xfff) << 8)
            | ((major & !0xfff) << 32)
            | (minor & 0xff)
            | ((minor & !0xff) << 12),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh folder under the system's temporary one, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Dir {
            let dir =
                std::env::temp_dir().join(format!("nvrec-distinct-{}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn names(count: usize) -> Vec<String> {
        (0..count).map(|index| format!("t{index}")).collect()
    }

    #[test]
    fn device_numbers_read_back_as_written() {
        for (major, minor) in [(7u64, 3u64), (259, 0), (8, 17), (4095, 1 << 19)] {
            let text = format!("{major}:{minor}");
            let dir = Dir::new("numbers");
            std::fs::write(dir.path().join("dev"), format!("{text}\n")).unwrap();
            let device = read_numbers(&dir.path().join("dev")).unwrap();
            assert_eq!(numbers(device), text);
        }
    }

    #[test]
    fn the_same_file_twice_under_two_names_is_refused_and_two_files_are_not() {
        let dir = Dir::new("files");
        let a = dir.path().join("a.img");
        let b = dir.path().join("b.img");
        std::fs::write(&a, b"a").unwrap();
        std::fs::write(&b, b"b").unwrap();
        let link = dir.path().join("link.img");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let spec = |path: &Path| TargetSpec::Path(path.to_path_buf());
        assert_eq!(check_distinct(&names(2), &[spec(&a), spec(&b)]), Ok(()));
        assert!(matches!(
            check_distinct(&names(3), &[spec(&a), spec(&b), spec(&link)]),
            Err(NotDistinct::Same { first, second }) if (first.as_str(), second.as_str()) == ("t0", "t2")
        ));
        // Not made yet: the same path spelled two ways.
        let new = dir.path().join("new.img");
        let spelled = dir.path().join(".").join("new.img");
        assert!(matches!(
            check_distinct(&names(2), &[spec(&new), spec(&spelled)]),
            Err(NotDistinct::Same { .. })
        ));
    }

    #[test]
    fn simulated_drives_go_with_each_other_only() {
        let sim = || TargetSpec::parse("sim:capacity=16M").unwrap();
        assert_eq!(check_distinct(&names(2), &[sim(), sim()]), Ok(()));
        let file = TargetSpec::Path(PathBuf::from("/nonexistent/file.img"));
        for specs in [[sim(), file.clone()], [file.clone(), sim()]] {
            assert!(matches!(
                check_distinct(&names(2), &specs),
                Err(NotDistinct::SimWithReal { .. })
            ));
        }
    }

    #[test]
    fn a_partition_beside_its_disk_and_a_loop_device_beside_its_file_are_refused() {
        let disk = Identity::Block {
            device: 8 << 8,
            disk: None,
            backing: None,
        };
        let partition = Identity::Block {
            device: (8 << 8) | 1,
            disk: Some(8 << 8),
            backing: None,
        };
        let other_partition = Identity::Block {
            device: (8 << 8) | 2,
            disk: Some(8 << 8),
            backing: None,
        };
        let loop_device = Identity::Block {
            device: 7 << 8,
            disk: None,
            backing: Some((1, 42)),
        };
        let file = Identity::File {
            device: 1,
            inode: 42,
        };
        let (a, b) = (String::from("a"), String::from("b"));
        let check = |x: &Identity, y: &Identity| clash((&a, x), (&b, y), Order::AsGiven);
        assert!(matches!(
            check(&disk, &partition),
            Err(NotDistinct::Partition { partition, disk }) if partition == "b" && disk == "a"
        ));
        assert!(matches!(
            check(&partition, &disk),
            Err(NotDistinct::Partition { .. })
        ));
        assert_eq!(check(&partition, &other_partition), Ok(()));
        assert!(matches!(
            check(&file, &loop_device),
            Err(NotDistinct::LoopOverFile { device, file }) if device == "b" && file == "a"
        ));
        assert!(matches!(
            check(&loop_device, &loop_device.clone()),
            Err(NotDistinct::Same { .. })
        ));
        assert_eq!(check(&disk, &loop_device), Ok(()));
    }
}
