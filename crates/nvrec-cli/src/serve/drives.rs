//! Drive health for the service: the allowed targets' SMART logs, read on a thread of its
//! own every few seconds, so that `/v1/drives`, `/metrics` and the dashboard read a copy and
//! never wait for a drive. A target that is not NVMe (a file, a loop device) is listed as
//! such, with the reason, instead of failing.

use nvrec::nvme::{self, HealthReport, NvmeError};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often the drives are asked.
pub const POLL_INTERVAL: Duration = Duration::from_secs(5);

/// One allowed target, as last seen.
#[derive(Debug, Clone)]
pub enum DriveStatus {
    Nvme(Box<HealthReport>),
    /// Not an NVMe device, or its log could not be read: why.
    NotNvme {
        path: String,
        message: String,
    },
    Error {
        path: String,
        message: String,
    },
}

pub type Drives = Arc<Mutex<Vec<DriveStatus>>>;

/// Reads every target once.
pub fn read_all(paths: &[PathBuf]) -> Vec<DriveStatus> {
    paths.iter().map(|path| read_one(path)).collect()
}

fn read_one(path: &std::path::Path) -> DriveStatus {
    let shown = path.display().to_string();
    if !nvme::is_nvme_path(path) {
        use std::os::unix::fs::FileTypeExt;
        let what = match std::fs::metadata(path) {
            Ok(metadata) if metadata.is_file() => "a file",
            Ok(metadata) if metadata.file_type().is_block_device() => "a block device",
            Ok(_) => "not a block device",
            Err(_) => "not there (yet)",
        };
        return DriveStatus::NotNvme {
            message: format!(
                "{shown} is {what}, not an NVMe device: no SMART data (temperatures, wear) to show"
            ),
            path: shown,
        };
    }
    match nvme::read_health(path) {
        Ok(report) => DriveStatus::Nvme(Box::new(report)),
        Err(NvmeError::NotNvme { why, .. }) => DriveStatus::NotNvme {
            message: format!("{shown} is not an NVMe device ({why})"),
            path: shown,
        },
        Err(error) => DriveStatus::Error {
            message: format!("reading the health log of {shown}: {error}"),
            path: shown,
        },
    }
}

/// Starts the polling thread; it ends with the process.
pub fn start(paths: Vec<PathBuf>) -> Drives {
    let drives: Drives = Arc::new(Mutex::new(read_all(&paths)));
    let shared = Arc::clone(&drives);
    let _ = std::thread::Builder::new()
        .name("nvrec-drives".into())
        .spawn(move || loop {
            std::thread::sleep(POLL_INTERVAL);
            let statuses = read_all(&paths);
            *shared.lock().expect("drive statuses") = statuses;
        });
    drives
}

/// The drives as the API shows them.
pub fn snapshot(drives: &Drives) -> Vec<Value> {
    let statuses = drives.lock().expect("drive statuses").clone();
    statuses
        .iter()
        .map(|status| match status {
            DriveStatus::Nvme(report) => {
                let mut value = serde_json::to_value(report.as_ref()).unwrap_or(Value::Null);
                value["nvme"] = json!(true);
                value["temperature_celsius"] = json!(report.smart.composite_temperature_celsius);
                value["throttled_seconds"] = json!(throttled_seconds(report));
                value["percentage_used"] = json!(report.smart.percentage_used);
                value
            }
            DriveStatus::NotNvme { path, message } => {
                json!({ "device": path, "nvme": false, "message": message })
            }
            DriveStatus::Error { path, message } => {
                json!({ "device": path, "nvme": true, "error": message })
            }
        })
        .collect()
}

/// Seconds the drive has spent throttled for temperature, as its log counts them.
pub fn throttled_seconds(report: &HealthReport) -> u64 {
    report
        .smart
        .thermal_time_seconds
        .iter()
        .map(|&s| s as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_not_nvme_and_says_so() {
        let file = std::env::temp_dir().join(format!("nvrec-drives-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let statuses = read_all(std::slice::from_ref(&file));
        let _ = std::fs::remove_file(&file);
        match &statuses[0] {
            DriveStatus::NotNvme { message, .. } => {
                assert!(
                    message.contains("is a file, not an NVMe device"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
}
