//! `nvrec-faultydisk`: serves a faulty disk in the foreground until SIGINT or SIGTERM.
//!
//! Prints one line once `MOUNT/disk` and `MOUNT/ctl` are ready, so that scripts can wait for
//! it; write commands to `MOUNT/ctl`, read it for the counters as JSON. On the signal it
//! clears the faults and unmounts (lazily if a loop device is still attached).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nvrec_faultydisk::{
    parse_size, Durability, FaultyDisk, Options, Unmount, FUSE_THREADS_DEFAULT,
    UNFLUSHED_MAX_BYTES_DEFAULT,
};

/// Serve a file as a faulty disk over FUSE, for a loop device to sit on.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The file holding the disk's data (created sparse if missing).
    #[arg(long)]
    backing: PathBuf,
    /// The disk's size: 64M, 1G, ... (a multiple of 4096).
    #[arg(long, value_parser = parse_size)]
    size: u64,
    /// Where to mount: an existing empty directory, or one to create (and remove on exit)
    /// in an existing directory.
    #[arg(long)]
    mount: PathBuf,
    /// Keep writes in memory until flushed, so that `power-cut` can lose them.
    #[arg(long)]
    track_unflushed: bool,
    /// With --track-unflushed: the most unflushed data held before writes fail.
    #[arg(long, value_parser = parse_size, default_value_t = UNFLUSHED_MAX_BYTES_DEFAULT)]
    unflushed_max: u64,
    /// FUSE threads reading requests.
    #[arg(long, default_value_t = FUSE_THREADS_DEFAULT)]
    threads: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let signals = match block_signals() {
        Ok(signals) => signals,
        Err(err) => return fail(&format!("blocking SIGINT and SIGTERM: {err}")),
    };
    let created_mount = !args.mount.exists();
    if created_mount {
        if let Err(err) = std::fs::create_dir(&args.mount) {
            return fail(&format!("creating {}: {err}", args.mount.display()));
        }
    }
    let options = Options {
        durability: match args.track_unflushed {
            false => Durability::WriteThrough,
            true => Durability::TrackUnflushed {
                max_bytes: args.unflushed_max,
            },
        },
        mount_dir: Some(args.mount.clone()),
        fuse_threads: args.threads.max(1),
    };
    let status = serve(&args, options, &signals);
    if created_mount {
        let _ = std::fs::remove_dir(&args.mount);
    }
    status
}

fn serve(args: &Args, options: Options, signals: &libc::sigset_t) -> ExitCode {
    let disk = match FaultyDisk::start(&args.backing, args.size, options) {
        Ok(disk) => disk,
        Err(err) => return fail(&err.to_string()),
    };
    println!(
        "ready: disk {} ({} bytes), ctl {}",
        disk.disk_path().display(),
        disk.size_bytes(),
        disk.ctl_path().display()
    );
    let signal = wait_for_signal(signals);
    eprintln!("nvrec-faultydisk: signal {signal}: unmounting");
    match disk.unmount() {
        Ok(Unmount::Clean) => ExitCode::SUCCESS,
        Ok(Unmount::Lazy) => {
            eprintln!(
                "nvrec-faultydisk: {} was busy (a loop device still attached?): unmounted \
                 lazily; I/O through it fails from now on",
                args.mount.display()
            );
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err.to_string()),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("nvrec-faultydisk: {message}");
    ExitCode::FAILURE
}

/// Blocks SIGINT and SIGTERM in this thread, before any other starts, so that every thread
/// inherits the mask and `sigwait` here is the only place they arrive.
fn block_signals() -> std::io::Result<libc::sigset_t> {
    // SAFETY: sigemptyset and sigaddset initialize and fill a set on our stack;
    // pthread_sigmask reads it. No other thread exists yet.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(set)
    }
}

fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut signal = 0;
    // SAFETY: sigwait reads the set and writes the signal number into a local.
    while unsafe { libc::sigwait(set, &mut signal) } != 0 {}
    signal
}
