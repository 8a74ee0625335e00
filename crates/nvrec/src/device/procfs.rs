//! Reading `/proc/self/mountinfo` and `/proc/swaps`: which block devices are mounted
//! where, and which are active swap.
//!
//! The parsers are pure functions over the file contents, so they are tested without
//! touching the system. Paths in both files escape space, tab, newline and backslash as
//! `\ooo` octal; the parsers undo that and keep non-UTF-8 bytes intact.

use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use super::sysfs::DevNum;

/// One line of mountinfo, reduced to what the safety checks and `describe` need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MountEntry {
    /// `st_dev` of the mounted filesystem (field 3). Real block devices for most
    /// filesystems; an anonymous `0:N` for btrfs, overlay, tmpfs and the like.
    pub dev: DevNum,
    pub mount_point: PathBuf,
    pub fs_type: String,
    /// The "mount source" after the separator: `/dev/nvme0n1p2`, `tmpfs`, `host:/export`.
    pub source: PathBuf,
}

const MOUNTINFO_PATH: &str = "/proc/self/mountinfo";
const SWAPS_PATH: &str = "/proc/swaps";

pub(crate) fn read_mountinfo() -> io::Result<Vec<MountEntry>> {
    Ok(parse_mountinfo(&std::fs::read(MOUNTINFO_PATH)?))
}

/// Active swap areas (files and devices). A kernel without swap support has no
/// `/proc/swaps`, which means none.
pub(crate) fn read_swaps() -> io::Result<Vec<PathBuf>> {
    match std::fs::read(SWAPS_PATH) {
        Ok(text) => Ok(parse_swaps(&text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Where [`read_mountinfo`] and [`read_swaps`] read from, for messages.
pub(crate) fn mountinfo_path() -> &'static Path {
    Path::new(MOUNTINFO_PATH)
}

pub(crate) fn swaps_path() -> &'static Path {
    Path::new(SWAPS_PATH)
}

/// Parses mountinfo text. Lines that do not have the documented shape are skipped.
///
/// Shape: `id parent major:minor root mount_point options [optional...] - fstype source
/// super_options`.
pub(crate) fn parse_mountinfo(text: &[u8]) -> Vec<MountEntry> {
    text.split(|&b| b == b'\n')
        .filter_map(parse_mountinfo_line)
        .collect()
}

fn parse_mountinfo_line(line: &[u8]) -> Option<MountEntry> {
    let fields: Vec<&[u8]> = line
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty())
        .collect();
    if fields.len() < 6 {
        return None;
    }
    let dev = DevNum::parse(std::str::from_utf8(fields[2]).ok()?)?;
    let mount_point = PathBuf::from(OsString::from_vec(unescape_octal(fields[4])));
    let separator = fields.iter().skip(6).position(|&f| f == b"-")? + 6;
    let fs_type = String::from_utf8_lossy(&unescape_octal(fields.get(separator + 1)?)).into_owned();
    let source = fields
        .get(separator + 2)
        .map(|raw| PathBuf::from(OsString::from_vec(unescape_octal(raw))))
        .unwrap_or_default();
    Some(MountEntry {
        dev,
        mount_point,
        fs_type,
        source,
    })
}

/// Parses `/proc/swaps`: a header line, then `filename type size used priority`.
pub(crate) fn parse_swaps(text: &[u8]) -> Vec<PathBuf> {
    text.split(|&b| b == b'\n')
        .skip(1)
        .filter_map(|line| {
            let name = line
                .split(|&b| b == b' ' || b == b'\t')
                .find(|f| !f.is_empty())?;
            Some(PathBuf::from(OsString::from_vec(unescape_octal(name))))
        })
        .collect()
}

/// Undoes the kernel's `\ooo` escaping (three octal digits); anything else is kept.
pub(crate) fn unescape_octal(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'\\' && i + 3 < raw.len() && raw[i + 1..=i + 3].iter().all(is_octal) {
            let value = raw[i + 1..=i + 3]
                .iter()
                .fold(0u32, |acc, &d| acc * 8 + u32::from(d - b'0'));
            if let Ok(byte) = u8::try_from(value) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(raw[i]);
        i += 1;
    }
    out
}

fn is_octal(b: &u8) -> bool {
    (b'0'..=b'7').contains(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &[u8] = b"\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue
40 27 0:45 / /srv rw,relatime shared:9 - btrfs /dev/nvme0n1p3 rw,ssd
garbage line
41 27 7:3 / /weird rw - xfs
";

    #[test]
    fn device_mountinfo_parses_fields_optional_tags_and_escapes() {
        let entries = parse_mountinfo(MOUNTINFO);
        assert_eq!(entries.len(), 5, "{entries:#?}");
        assert_eq!(
            entries[1].dev,
            DevNum {
                major: 254,
                minor: 0
            }
        );
        assert_eq!(entries[1].mount_point, Path::new("/"));
        assert_eq!(entries[1].source, Path::new("/dev/vda"));
        assert_eq!(entries[1].fs_type, "ext4");
        assert_eq!(
            entries[2].dev,
            DevNum {
                major: 98,
                minor: 0
            }
        );
        assert_eq!(entries[2].mount_point, Path::new("/mnt/with space"));
        assert_eq!(entries[2].fs_type, "ext3");
        assert_eq!(
            entries[3].dev,
            DevNum {
                major: 0,
                minor: 45
            }
        );
        assert_eq!(entries[3].source, Path::new("/dev/nvme0n1p3"));
        // No source field at all: kept, with an empty source.
        assert_eq!(entries[4].fs_type, "xfs");
        assert_eq!(entries[4].source, Path::new(""));
    }

    #[test]
    fn device_swaps_parses_names_after_the_header() {
        let text = b"Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n\
/dev/nvme0n1p2                          partition\t8388604\t\t0\t\t-2\n\
/swap\\040file                            file\t\t1048572\t\t0\t\t-3\n";
        assert_eq!(
            parse_swaps(text),
            vec![PathBuf::from("/dev/nvme0n1p2"), PathBuf::from("/swap file")]
        );
        assert!(parse_swaps(b"Filename Type Size Used Priority\n").is_empty());
    }

    #[test]
    fn device_unescape_octal_handles_edges() {
        assert_eq!(unescape_octal(b"a\\040b"), b"a b");
        assert_eq!(unescape_octal(b"tab\\011"), b"tab\t");
        assert_eq!(unescape_octal(b"back\\134slash"), b"back\\slash");
        assert_eq!(unescape_octal(b"short\\04"), b"short\\04");
        assert_eq!(unescape_octal(b"notoctal\\089"), b"notoctal\\089");
        assert_eq!(unescape_octal(b"big\\777"), b"big\\777");
        assert_eq!(unescape_octal(b"\\"), b"\\");
    }
}
