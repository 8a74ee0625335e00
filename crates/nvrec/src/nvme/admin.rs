//! The NVMe admin passthrough ioctl (`NVME_IOCTL_ADMIN_CMD`, linux/nvme_ioctl.h): Identify and
//! Get Log Page, issued on a controller (`/dev/nvme0`) or a namespace (`/dev/nvme0n1`) opened
//! read-only. The kernel needs CAP_SYS_ADMIN for it.
//!
//! What it deliberately does not do: decode what comes back (that is [`super::page`], pure and
//! fuzzed), open anything for writing, or send any command but these two reads. I/O commands
//! (`NVME_IOCTL_IO_CMD`) and the io_uring passthrough are not used: the data path is `engine`'s.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// `struct nvme_passthru_cmd` (alias `nvme_admin_cmd`) from linux/nvme_ioctl.h: 72 bytes.
#[repr(C)]
#[derive(Debug, Default)]
struct PassthruCmd {
    opcode: u8,
    flags: u8,
    rsvd1: u16,
    nsid: u32,
    cdw2: u32,
    cdw3: u32,
    metadata: u64,
    addr: u64,
    metadata_len: u32,
    data_len: u32,
    cdw10: u32,
    cdw11: u32,
    cdw12: u32,
    cdw13: u32,
    cdw14: u32,
    cdw15: u32,
    timeout_ms: u32,
    result: u32,
}

const _: () = assert!(std::mem::size_of::<PassthruCmd>() == 72);

/// `_IOWR('N', 0x41, struct nvme_admin_cmd)`. The request is a bit pattern; where the libc's
/// `Ioctl` is a signed int (musl) the cast keeps the bits, which is what the kernel reads.
const NVME_IOCTL_ADMIN_CMD: libc::Ioctl =
    ((3u32 << 30) | (72 << 16) | ((b'N' as u32) << 8) | 0x41) as libc::Ioctl;

/// Admin opcodes (Base Specification 2.0, figure 139).
const OPCODE_GET_LOG_PAGE: u8 = 0x02;
const OPCODE_IDENTIFY: u8 = 0x06;
/// Identify CNS values (figure 273).
pub const CNS_NAMESPACE: u32 = 0x00;
pub const CNS_CONTROLLER: u32 = 0x01;
/// The broadcast namespace: log pages for the whole controller.
pub const NSID_ALL: u32 = 0xffff_ffff;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("could not open {path} to ask the controller")]
    Open { path: String, source: io::Error },
    #[error("{command} on {path} failed{hint}")]
    Ioctl {
        command: &'static str,
        path: String,
        source: io::Error,
        hint: &'static str,
    },
    #[error("{command} on {path}: the controller answered with status {status:#x}")]
    Status {
        command: &'static str,
        path: String,
        status: i32,
    },
}

impl AdminError {
    /// ENOTTY/EINVAL: the device does not understand NVMe ioctls (not NVMe).
    pub fn is_not_nvme(&self) -> bool {
        matches!(self, AdminError::Ioctl { source, .. }
            if matches!(source.raw_os_error(), Some(libc::ENOTTY) | Some(libc::EINVAL)))
    }
}

/// An open NVMe controller or namespace.
pub struct Admin {
    file: File,
    path: String,
}

impl Admin {
    pub fn open(path: &Path) -> Result<Admin, AdminError> {
        let file = File::open(path).map_err(|source| AdminError::Open {
            path: path.display().to_string(),
            source,
        })?;
        Ok(Admin {
            file,
            path: path.display().to_string(),
        })
    }

    fn submit(
        &self,
        command: &'static str,
        mut cmd: PassthruCmd,
        buf: &mut [u8],
    ) -> Result<(), AdminError> {
        cmd.addr = buf.as_mut_ptr() as u64;
        cmd.data_len = buf.len() as u32;
        cmd.timeout_ms = 10_000;
        // SAFETY: the command is a correctly laid out nvme_passthru_cmd whose addr/data_len
        // describe `buf`, which stays borrowed mutably for the duration of the call; the
        // kernel writes at most data_len bytes there and fills `result`.
        let status = unsafe { libc::ioctl(self.file.as_raw_fd(), NVME_IOCTL_ADMIN_CMD, &mut cmd) };
        if status < 0 {
            let source = io::Error::last_os_error();
            let hint = match source.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => " (NVMe admin commands need root)",
                Some(libc::ENOTTY) | Some(libc::EINVAL) => " (not an NVMe device)",
                _ => "",
            };
            return Err(AdminError::Ioctl {
                command,
                path: self.path.clone(),
                source,
                hint,
            });
        }
        if status > 0 {
            return Err(AdminError::Status {
                command,
                path: self.path.clone(),
                status,
            });
        }
        Ok(())
    }

    /// Identify with `cns` for namespace `nsid`: 4096 bytes.
    pub fn identify(&self, cns: u32, nsid: u32) -> Result<Vec<u8>, AdminError> {
        let mut buf = vec![0u8; super::page::IDENTIFY_BYTES];
        let cmd = PassthruCmd {
            opcode: OPCODE_IDENTIFY,
            nsid,
            cdw10: cns,
            ..PassthruCmd::default()
        };
        self.submit("Identify", cmd, &mut buf)?;
        Ok(buf)
    }

    /// Get Log Page `log_id` for `nsid`, `len` bytes (a multiple of 4).
    pub fn log_page(&self, log_id: u8, nsid: u32, len: usize) -> Result<Vec<u8>, AdminError> {
        assert!(
            len.is_multiple_of(4) && len > 0,
            "log pages are read in dwords"
        );
        let mut buf = vec![0u8; len];
        let dwords = (len / 4 - 1) as u32; // NUMD is zero-based
        let cmd = PassthruCmd {
            opcode: OPCODE_GET_LOG_PAGE,
            nsid,
            // CDW10: log id in bits 7:0, NUMDL in bits 31:16; CDW11: NUMDU.
            cdw10: log_id as u32 | ((dwords & 0xffff) << 16),
            cdw11: dwords >> 16,
            ..PassthruCmd::default()
        };
        self.submit("Get Log Page", cmd, &mut buf)?;
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ioctl_number_matches_the_kernel_header() {
        // _IOWR('N', 0x41, struct nvme_admin_cmd) as the kernel computes it on x86-64 and arm64.
        assert_eq!(NVME_IOCTL_ADMIN_CMD as u32, 0xC048_4E41);
    }

    #[test]
    fn a_regular_file_is_not_nvme() {
        if crate::under_qemu_user(
            "a_regular_file_is_not_nvme",
            "qemu-user answers an ioctl it does not know with ENOSYS, where Linux says ENOTTY",
        ) {
            return;
        }
        let path = std::env::temp_dir().join(format!("nvrec-admin-{}", std::process::id()));
        std::fs::write(&path, b"not a drive").unwrap();
        let error = Admin::open(&path)
            .unwrap()
            .identify(CNS_CONTROLLER, 0)
            .unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(error.is_not_nvme(), "{error}");
        assert!(error.to_string().contains("not an NVMe device"), "{error}");
    }
}
