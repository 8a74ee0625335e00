//! A test network: two network namespaces joined by a veth pair, removed on drop.
//!
//! Side A holds `veth0` with [`TestNet::address`]`(Side::A)`, side B `veth1` with the other
//! address, both in a /24 that exists only inside the two namespaces (each namespace has
//! its own routing table, so the addresses clash with nothing on the machine).
//!
//! The network is quiet: IPv6 is off in both namespaces and each side knows the other's MAC
//! address (a permanent neighbour entry), so no router solicitation, neighbour discovery or
//! ARP frame ever crosses the pair, and a capture on it sees exactly what a test sent. Built with
//! iproute2 (`ip netns add`, `ip link add ... type veth`), which needs root (CAP_SYS_ADMIN
//! and CAP_NET_ADMIN). Code runs on a side either as a thread that entered the namespace
//! ([`TestNet::enter`], [`TestNet::run_in`]) or as a process started there
//! ([`TestNet::command`]).

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// One end of the pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    A,
    B,
}

impl Side {
    fn index(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }

    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Settings of the veth pair.
#[derive(Debug, Clone, Copy)]
pub struct TestNetOptions {
    pub mtu: u32,
}

impl Default for TestNetOptions {
    fn default() -> Self {
        TestNetOptions { mtu: 1500 }
    }
}

/// The two namespaces and the veth pair between them; dropping it deletes both namespaces
/// (and with them the pair).
#[derive(Debug)]
pub struct TestNet {
    names: [String; 2],
}

static COUNTER: AtomicU32 = AtomicU32::new(0);
const INTERFACES: [&str; 2] = ["veth0", "veth1"];
const MACS: [&str; 2] = ["02:00:0a:e7:00:01", "02:00:0a:e7:00:02"];
const ADDRESSES: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 231, 0, 1), Ipv4Addr::new(10, 231, 0, 2)];

impl TestNet {
    /// Why a test network cannot be made here (not root, no iproute2), or None.
    pub fn unavailable() -> Option<String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Some("network namespaces need root".into());
        }
        match Command::new("ip").arg("-V").output() {
            Ok(output) if output.status.success() => None,
            _ => Some("no ip command (iproute2)".into()),
        }
    }

    pub fn new() -> io::Result<TestNet> {
        TestNet::with_options(TestNetOptions::default())
    }

    pub fn with_options(options: TestNetOptions) -> io::Result<TestNet> {
        let id = COUNTER.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let names = [
            format!("nvrec-netgen-{pid}-{id}-a"),
            format!("nvrec-netgen-{pid}-{id}-b"),
        ];
        ip(&["netns", "add", &names[0]])?;
        // From here on, drop removes whatever was made.
        let net = TestNet { names };
        ip(&["netns", "add", &net.names[1]])?;
        let [a, b] = &net.names;
        ip(&[
            "-n",
            a,
            "link",
            "add",
            INTERFACES[0],
            "type",
            "veth",
            "peer",
            "name",
            INTERFACES[1],
            "netns",
            b,
        ])?;
        let mtu = options.mtu.to_string();
        for side in [Side::A, Side::B] {
            let name = &net.names[side.index()];
            let interface = INTERFACES[side.index()];
            let address = format!("{}/24", ADDRESSES[side.index()]);
            ip(&["-n", name, "addr", "add", &address, "dev", interface])?;
            ip(&[
                "netns",
                "exec",
                name,
                "sh",
                "-c",
                &format!("echo 1 > /proc/sys/net/ipv6/conf/{interface}/disable_ipv6"),
            ])?;
            let mac = MACS[side.index()];
            ip(&["-n", name, "link", "set", interface, "address", mac])?;
            ip(&["-n", name, "link", "set", interface, "mtu", &mtu, "up"])?;
            ip(&["-n", name, "link", "set", "lo", "up"])?;
            let other = side.other().index();
            ip(&[
                "-n",
                name,
                "neigh",
                "replace",
                &ADDRESSES[other].to_string(),
                "lladdr",
                MACS[other],
                "dev",
                interface,
                "nud",
                "permanent",
            ])?;
        }
        Ok(net)
    }

    /// The namespace's name (for `ip netns exec NAME`).
    pub fn namespace(&self, side: Side) -> &str {
        &self.names[side.index()]
    }

    /// The side's interface (`veth0` on A, `veth1` on B).
    pub fn interface(&self, side: Side) -> &'static str {
        INTERFACES[side.index()]
    }

    pub fn address(&self, side: Side) -> Ipv4Addr {
        ADDRESSES[side.index()]
    }

    /// Moves the calling thread into the side's namespace (threads started from it after
    /// inherit it; other threads of the process stay where they are).
    pub fn enter(&self, side: Side) -> io::Result<()> {
        enter_namespace(self.namespace(side))
    }

    /// Runs `work` on a new thread inside the side's namespace and returns its result.
    pub fn run_in<T: Send + 'static>(
        &self,
        side: Side,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<std::thread::JoinHandle<T>> {
        let name = self.namespace(side).to_string();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let handle = std::thread::spawn(move || {
            let entered = enter_namespace(&name);
            let ok = entered.is_ok();
            let _ = ready_tx.send(entered);
            assert!(ok, "entering the namespace {name}");
            work()
        });
        ready_rx
            .recv()
            .map_err(|_| io::Error::other("the namespace thread ended early"))??;
        Ok(handle)
    }

    /// A command that runs `program` inside the side's namespace (`ip netns exec`, which
    /// execs it: the child's pid is the program's).
    pub fn command(&self, side: Side, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", self.namespace(side)])
            .arg(program);
        command
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

/// Moves the calling thread into the named namespace (`/run/netns/NAME`).
pub fn enter_namespace(name: &str) -> io::Result<()> {
    let file = std::fs::File::open(format!("/run/netns/{name}"))?;
    // SAFETY: setns with a namespace file we hold open; it affects the calling thread only.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn ip(args: &[&str]) -> io::Result<()> {
    let output = Command::new("ip").args(args).output()?;
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    Ok(())
}
