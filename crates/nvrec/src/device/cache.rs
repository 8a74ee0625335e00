//! Emptying the page cache of a range before a transfer through it (`--buffered`), so that a
//! read measures the drive and not memory, and a write starts where `dd` starts after
//! `sync; echo 3 > /proc/sys/vm/drop_caches`.
//!
//! The target is flushed first (fdatasync: dirty pages cannot be dropped), then the range is
//! dropped with `posix_fadvise(POSIX_FADV_DONTNEED)`, which touches this file alone. mincore
//! then says what is still cached. Where something is and the process is root, `sync` and `1`
//! written to `/proc/sys/vm/drop_caches` (the page cache of the whole machine) follow, and
//! mincore looks again. [`CacheDrop`] says which was done and what stayed cached, so that a
//! report never claims a drop that did not happen.
//!
//! What it deliberately does not do: drop the whole machine's cache when the range's own drop
//! worked (other programs' files stay cached), fail a run because the machine-wide drop was
//! refused (the bytes still cached say so), or touch a target opened for direct I/O beyond its
//! flush (its transfers never meet the page cache).

use super::{sys, DeviceError, Target};

/// How the page cache was emptied of a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheDropMethod {
    /// fdatasync, then `posix_fadvise(POSIX_FADV_DONTNEED)` over the range.
    Fadvise,
    /// That, then (pages of the range still cached, running as root) `sync` and `1` written
    /// to `/proc/sys/vm/drop_caches`: the page cache of the whole machine.
    DropCaches,
}

impl CacheDropMethod {
    /// How the drop is named in text.
    pub fn describe(self) -> &'static str {
        match self {
            CacheDropMethod::Fadvise => "fdatasync + posix_fadvise(DONTNEED) of the range",
            CacheDropMethod::DropCaches => {
                "fdatasync + posix_fadvise(DONTNEED), then sync + /proc/sys/vm/drop_caches"
            }
        }
    }
}

/// What [`drop_cached`] did, for reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CacheDrop {
    pub method: CacheDropMethod,
    /// Bytes of the range in the page cache afterwards (mincore): what a transfer could
    /// still find in memory. 0 when the drop worked.
    pub cached_bytes_after: u64,
}

impl CacheDrop {
    /// Several drops (a sweep's, one before each transfer) as one: the strongest method any
    /// needed and the most any left cached.
    pub fn merge(self, other: CacheDrop) -> CacheDrop {
        CacheDrop {
            method: self.method.max(other.method),
            cached_bytes_after: self.cached_bytes_after.max(other.cached_bytes_after),
        }
    }
}

/// Where the machine-wide drop is asked for.
const DROP_CACHES_PATH: &str = "/proc/sys/vm/drop_caches";

/// Flushes `target` and empties the page cache of `[offset_bytes, offset_bytes + len_bytes)`
/// of it, as the module doc says. A failed flush, fadvise or mincore is an error (the drop
/// cannot be trusted); a refused machine-wide drop is not (the bytes left cached say so).
pub fn drop_cached(
    target: &Target,
    offset_bytes: u64,
    len_bytes: u64,
) -> Result<CacheDrop, DeviceError> {
    let probe = |what: &str| {
        let path = target.path.clone();
        let what = what.to_string();
        move |source| DeviceError::Probe { path, what, source }
    };
    sys::fdatasync(&target.file).map_err(probe("flush it before dropping its page cache"))?;
    sys::fadvise_dont_need(&target.file, offset_bytes, len_bytes)
        .map_err(probe("drop its range from the page cache (posix_fadvise)"))?;
    let cached = || {
        sys::cached_bytes(&target.file, offset_bytes, len_bytes)
            .map_err(probe("see what of it is in the page cache (mincore)"))
    };
    let cached_bytes_after = cached()?;
    if cached_bytes_after == 0 || !sys::is_root() {
        return Ok(CacheDrop {
            method: CacheDropMethod::Fadvise,
            cached_bytes_after,
        });
    }
    sys::sync_everything();
    if std::fs::write(DROP_CACHES_PATH, "1").is_err() {
        // Refused (a container's read-only /proc/sys): what stayed cached is reported.
        return Ok(CacheDrop {
            method: CacheDropMethod::Fadvise,
            cached_bytes_after,
        });
    }
    Ok(CacheDrop {
        method: CacheDropMethod::DropCaches,
        cached_bytes_after: cached()?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::{open_buffered, Access, OpenOptions, Safety};
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn a_buffered_write_is_cached_until_dropped() {
        let path =
            std::env::temp_dir().join(format!("nvrec-cache-drop-test-{}.img", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let options = OpenOptions {
            access: Access::Write,
            create_len_bytes: Some(4 << 20),
            safety: Safety::Check,
        };
        let target = open_buffered(&path, &options).unwrap();
        assert_eq!(target.io_path, super::super::IoPath::Buffered);
        target
            .file
            .write_all_at(&vec![7u8; 1 << 20], 1 << 20)
            .unwrap();
        let cached = sys::cached_bytes(&target.file, 1 << 20, 1 << 20).unwrap();
        // What was just written through the page cache is in it (a page or two may have
        // gone already under memory pressure, never most of it).
        assert!(cached >= 512 << 10, "{cached}");
        // Nothing was written outside the range, so nothing of it is cached.
        assert_eq!(
            sys::cached_bytes(&target.file, 3 << 20, 1 << 20).unwrap(),
            0
        );
        let dropped = drop_cached(&target, 0, 4 << 20).unwrap();
        assert_eq!(dropped.cached_bytes_after, 0, "{dropped:?}");
        assert_eq!(dropped.method, CacheDropMethod::Fadvise);
        drop(target);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn merged_drops_keep_the_strongest_method_and_the_most_left() {
        let fadvise = CacheDrop {
            method: CacheDropMethod::Fadvise,
            cached_bytes_after: 8192,
        };
        let machine = CacheDrop {
            method: CacheDropMethod::DropCaches,
            cached_bytes_after: 0,
        };
        assert_eq!(
            fadvise.merge(machine),
            CacheDrop {
                method: CacheDropMethod::DropCaches,
                cached_bytes_after: 8192
            }
        );
    }
}
