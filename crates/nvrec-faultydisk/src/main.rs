//! `nvrec-faultydisk`: serves a faulty disk in the foreground until SIGINT or SIGTERM.
//!
//! Prints one line once `MOUNT/disk` and `MOUNT/ctl` are ready, so that scripts can wait for
//! it; write commands to `MOUNT/ctl` (`--help` lists them: failing ranges, `fail flush`,
//! `dying`, stalls, `slow`, power cuts, `clear`), read it for the counters as JSON. On the
//! signal it clears the faults and unmounts (lazily if a loop device is still attached).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nvrec_faultydisk::{
    parse_size, Durability, FaultyDisk, Options, Unmount, FUSE_THREADS_DEFAULT,
    UNFLUSHED_MAX_BYTES_DEFAULT,
};

/// Control lines for `MOUNT/ctl`, shown after the options in `--help`.
const CONTROL_HELP: &str = "\
Control (one command a line, written to MOUNT/ctl; reading it gives counters as JSON):
  fail read|write|any START LEN [eio|enospc]
                      requests touching [START, START+LEN) fail (EIO by default)
  fail flush [after=N]
                      flushes (fsync/fdatasync of the loop device, O_DSYNC writes: FUSE FSYNC)
                      fail with EIO, after N more succeed (0 by default); writes work
  dying [reads=eio]   a dying drive: every write, discard and flush fails with EIO; reads
                      work, or fail too with reads=eio
  stall [DURATION]    hold every request until resume (or for DURATION: 3000ms, 3s)
  resume              end a stall
  slow RATE           reads and writes together at most RATE bytes/s (10M, 5MB/s)
  power-cut [seed=N]  lose (or, seeded, tear) unflushed writes (needs --track-unflushed)
  clear               remove every fault: the disk works again

Example:
  dev=$(losetup --find --show --direct-io=on MOUNT/disk)
  echo dying > MOUNT/ctl; echo clear > MOUNT/ctl";

/// Serve a file as a faulty disk over FUSE, for a loop device to sit on.
#[derive(Parser, Debug)]
#[command(version, after_help = CONTROL_HELP)]
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
