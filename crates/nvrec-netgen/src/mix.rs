//! A realistic mix of traffic as Ethernet frames, and its ground truth.
//!
//! Thousands of flows of TCP, UDP and ICMP over IPv4 and IPv6, a fifth of them VLAN-tagged,
//! both directions, frames from 60 to 1514 bytes (64 to 1518 on the wire) with most at the
//! two ends, a few flows carrying most of the frames. Every frame is made from the seed
//! alone ([`Mix`]), so a run repeats exactly; [`send_mix`] sends them onto an interface
//! through an AF_PACKET socket, paced, in batches of `sendmmsg`; [`Truth`] says for each
//! flow, one direction each, how many frames and bytes were sent, in the spelling `nvrec
//! find` prints a flow (`udp 10.1.2.3:40000 -> 10.200.0.7:53 vlan 120`).

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

const PROTO_ICMP: u8 = 1;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;
/// The shortest frame without its FCS (64 bytes on the wire) and the longest untagged one.
pub const FRAME_MIN_BYTES: usize = 60;
pub const FRAME_MAX_BYTES: usize = 1514;
const SERVER_PORTS: [u16; 8] = [80, 443, 53, 123, 22, 5060, 8080, 3306];

/// xorshift64* (Vigna): deterministic for a seed, and fast.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).max(1))
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// One connection of the mix: `client` opens it, `server` answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub protocol: u8,
    pub client: SocketAddr,
    pub server: SocketAddr,
    pub vlan: Option<u16>,
}

impl Flow {
    fn made(rng: &mut Rng, index: u32) -> Flow {
        let protocol = match rng.below(100) {
            0..55 => PROTO_TCP,
            55..92 => PROTO_UDP,
            _ => PROTO_ICMP,
        };
        let v6 = rng.below(5) == 0;
        let (client, server): (IpAddr, IpAddr) = if v6 {
            let host = |net: u16, id: u32| {
                IpAddr::V6(Ipv6Addr::new(
                    0x2001,
                    0xdb8,
                    net,
                    0,
                    0,
                    0,
                    (id >> 16) as u16,
                    id as u16,
                ))
            };
            (host(1, index + 1), host(2, rng.below(200) as u32 + 1))
        } else {
            let [_, b, c, d] = (index + 1).to_be_bytes();
            let server = rng.below(200) as u8 + 1;
            (
                IpAddr::V4(Ipv4Addr::new(10, b, c, d)),
                IpAddr::V4(Ipv4Addr::new(10, 200, 0, server)),
            )
        };
        let protocol = match (protocol, v6) {
            (PROTO_ICMP, true) => PROTO_ICMPV6,
            (protocol, _) => protocol,
        };
        let client_port = 32768 + (index % 28000) as u16;
        let server_port = SERVER_PORTS[rng.below(SERVER_PORTS.len() as u64) as usize];
        Flow {
            protocol,
            client: SocketAddr::new(client, client_port),
            server: SocketAddr::new(server, server_port),
            vlan: (rng.below(5) == 0).then(|| 100 + rng.below(50) as u16),
        }
    }

    fn icmp(&self) -> bool {
        matches!(self.protocol, PROTO_ICMP | PROTO_ICMPV6)
    }

    /// ICMP's type for a direction: echo request from the client, reply from the server.
    fn icmp_type(&self, reply: bool) -> u8 {
        match (self.protocol, reply) {
            (PROTO_ICMP, false) => 8,
            (PROTO_ICMP, true) => 0,
            (_, false) => 128,
            (_, true) => 129,
        }
    }

    /// The direction as `nvrec find` prints it.
    pub fn text(&self, reply: bool) -> String {
        let (from, to) = match reply {
            false => (self.client, self.server),
            true => (self.server, self.client),
        };
        let name = match self.protocol {
            PROTO_TCP => "tcp",
            PROTO_UDP => "udp",
            PROTO_ICMP => "icmp",
            _ => "icmp6",
        };
        let vlan = self
            .vlan
            .map_or(String::new(), |vlan| format!(" vlan {vlan}"));
        match self.icmp() {
            true => format!(
                "{name} {} -> {} type {} code 0{vlan}",
                from.ip(),
                to.ip(),
                self.icmp_type(reply)
            ),
            false => format!("{name} {from} -> {to}{vlan}"),
        }
    }
}

/// The mix: its flows, and the frames drawn from them one after the other.
pub struct Mix {
    flows: Vec<Flow>,
    rng: Rng,
    sequence: u32,
    /// Every frame this long (without its FCS) instead of the mix of lengths.
    frame_len: Option<usize>,
}

/// One frame of the mix: its flow (an index into [`Mix::flows`]), its direction, the bytes.
pub struct Frame {
    pub flow: usize,
    pub reply: bool,
    pub bytes: Vec<u8>,
}

impl Mix {
    /// `flows` connections (at least one) from `seed`.
    pub fn new(seed: u64, flows: u32) -> Mix {
        let mut rng = Rng::new(seed);
        let flows = (0..flows.max(1)).map(|i| Flow::made(&mut rng, i)).collect();
        Mix {
            flows,
            rng,
            sequence: 0,
            frame_len: None,
        }
    }

    /// Every frame `wire_bytes` long on the wire (its FCS included: 64 to 1518), or no
    /// shorter than its headers.
    pub fn of_wire_bytes(self, wire_bytes: usize) -> Mix {
        Mix {
            frame_len: Some(wire_bytes.saturating_sub(4).max(FRAME_MIN_BYTES)),
            ..self
        }
    }

    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }

    /// The next frame: half of them from the busiest tenth of the flows, a third of them
    /// replies; 40 % of the shortest length, 25 % of the longest, the rest between.
    pub fn frame(&mut self) -> Frame {
        let count = self.flows.len() as u64;
        let flow = match self.rng.below(2) {
            0 => self.rng.below(count.div_ceil(10)),
            _ => self.rng.below(count),
        } as usize;
        let reply = self.rng.below(3) == 0;
        let len = match (self.frame_len, self.rng.below(100)) {
            (Some(len), _) => len,
            (None, 0..40) => FRAME_MIN_BYTES,
            (None, 40..65) => FRAME_MAX_BYTES,
            (None, _) => {
                FRAME_MIN_BYTES
                    + self.rng.below((FRAME_MAX_BYTES - FRAME_MIN_BYTES) as u64) as usize
            }
        };
        self.sequence = self.sequence.wrapping_add(1);
        let bytes = frame_bytes(&self.flows[flow], reply, len, self.sequence);
        Frame { flow, reply, bytes }
    }
}

/// An Ethernet frame of `flow` in one direction, `len` bytes before its VLAN tag (at least
/// the headers), the payload a counter.
fn frame_bytes(flow: &Flow, reply: bool, len: usize, sequence: u32) -> Vec<u8> {
    let (from, to) = match reply {
        false => (flow.client, flow.server),
        true => (flow.server, flow.client),
    };
    let mut transport = match flow.protocol {
        PROTO_TCP => {
            let mut header = ports(from.port(), to.port());
            header.extend_from_slice(&sequence.to_be_bytes());
            header.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
            header
        }
        PROTO_UDP => {
            let mut header = ports(from.port(), to.port());
            header.extend_from_slice(&[0, 0, 0, 0]);
            header
        }
        _ => {
            let mut header = vec![flow.icmp_type(reply), 0, 0, 0, 0, 1];
            header.extend_from_slice(&(sequence as u16).to_be_bytes());
            header
        }
    };
    let ip_header = if from.is_ipv4() { 20 } else { 40 };
    let payload = len.saturating_sub(14 + ip_header + transport.len());
    transport.extend((0..payload).map(|i| (sequence as usize + i) as u8));
    if flow.protocol == PROTO_UDP {
        let udp_len = (transport.len() as u16).to_be_bytes();
        transport[4..6].copy_from_slice(&udp_len);
    }
    let mut frame = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
    if let Some(vlan) = flow.vlan {
        frame.extend_from_slice(&[0x81, 0x00]);
        frame.extend_from_slice(&vlan.to_be_bytes());
    }
    match (from.ip(), to.ip()) {
        (IpAddr::V4(source), IpAddr::V4(destination)) => {
            frame.extend_from_slice(&[0x08, 0x00]);
            frame.extend(ipv4_header(
                flow.protocol,
                source,
                destination,
                transport.len(),
            ));
        }
        (IpAddr::V6(source), IpAddr::V6(destination)) => {
            frame.extend_from_slice(&[0x86, 0xdd]);
            frame.extend(ipv6_header(
                flow.protocol,
                source,
                destination,
                transport.len(),
            ));
        }
        _ => unreachable!("a flow's ends are of one family"),
    }
    frame.extend_from_slice(&transport);
    frame
}

fn ports(from: u16, to: u16) -> Vec<u8> {
    let mut header = from.to_be_bytes().to_vec();
    header.extend_from_slice(&to.to_be_bytes());
    header
}

fn ipv4_header(protocol: u8, source: Ipv4Addr, destination: Ipv4Addr, len: usize) -> Vec<u8> {
    let total = ((20 + len) as u16).to_be_bytes();
    let mut header = vec![
        0x45, 0, total[0], total[1], 0, 0, 0x40, 0, 64, protocol, 0, 0,
    ];
    header.extend_from_slice(&source.octets());
    header.extend_from_slice(&destination.octets());
    let sum = header
        .chunks(2)
        .map(|word| u32::from(u16::from_be_bytes([word[0], word[1]])))
        .sum::<u32>();
    let folded = (sum & 0xffff) + (sum >> 16);
    let checksum = !((folded & 0xffff) + (folded >> 16)) as u16;
    header[10..12].copy_from_slice(&checksum.to_be_bytes());
    header
}

fn ipv6_header(protocol: u8, source: Ipv6Addr, destination: Ipv6Addr, len: usize) -> Vec<u8> {
    let mut header = vec![0x60, 0, 0, 0];
    header.extend_from_slice(&(len as u16).to_be_bytes());
    header.extend_from_slice(&[protocol, 64]);
    header.extend_from_slice(&source.octets());
    header.extend_from_slice(&destination.octets());
    header
}

/// What was sent of one direction of one flow.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowTruth {
    /// As `nvrec find` prints it.
    pub flow: String,
    pub packets: u64,
    pub bytes: u64,
}

/// The ground truth of a run: every frame sent, by flow and direction.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Truth {
    pub seed: u64,
    pub frames: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    /// Directions that carried frames, in the order of their text.
    pub flows: Vec<FlowTruth>,
}

/// What a run of [`send_mix`] is asked to do.
#[derive(Debug, Clone)]
pub struct MixOptions {
    pub interface: String,
    pub seed: u64,
    pub flows: u32,
    pub frames: u64,
    /// Frames per second; none: as fast as the socket takes them.
    pub rate_fps: Option<u64>,
    /// Every frame this long on the wire (64 to 1518) instead of the mix of lengths.
    pub wire_bytes: Option<usize>,
}

/// Frames handed to the kernel at once.
const BATCH: usize = 64;

/// Sends `options.frames` frames of the mix onto `options.interface` and returns the truth.
pub fn send_mix(options: &MixOptions) -> io::Result<Truth> {
    let socket = PacketSocket::open(&options.interface)?;
    let mut mix = Mix::new(options.seed, options.flows);
    if let Some(wire_bytes) = options.wire_bytes {
        mix = mix.of_wire_bytes(wire_bytes);
    }
    let mut counts = vec![[(0u64, 0u64); 2]; mix.flows().len()];
    let started = Instant::now();
    let mut sent = 0u64;
    let mut bytes = 0u64;
    while sent < options.frames {
        let batch: Vec<Frame> = (0..BATCH.min((options.frames - sent) as usize))
            .map(|_| mix.frame())
            .collect();
        socket.send_all(&batch)?;
        for frame in &batch {
            let count = &mut counts[frame.flow][usize::from(frame.reply)];
            count.0 += 1;
            count.1 += frame.bytes.len() as u64;
            bytes += frame.bytes.len() as u64;
        }
        sent += batch.len() as u64;
        if let Some(rate) = options.rate_fps.filter(|&rate| rate > 0) {
            let due = started + Duration::from_secs_f64(sent as f64 / rate as f64);
            std::thread::sleep(due.saturating_duration_since(Instant::now()));
        }
    }
    let mut flows: Vec<FlowTruth> = mix
        .flows()
        .iter()
        .zip(&counts)
        .flat_map(|(flow, directions)| {
            [false, true].into_iter().filter_map(move |reply| {
                let (packets, bytes) = directions[usize::from(reply)];
                (packets > 0).then(|| FlowTruth {
                    flow: flow.text(reply),
                    packets,
                    bytes,
                })
            })
        })
        .collect();
    flows.sort_by(|a, b| a.flow.cmp(&b.flow));
    Ok(Truth {
        seed: options.seed,
        frames: sent,
        bytes,
        elapsed_s: started.elapsed().as_secs_f64(),
        flows,
    })
}

/// An AF_PACKET socket bound to one interface, frames given whole (with their Ethernet
/// header).
struct PacketSocket {
    fd: libc::c_int,
}

impl PacketSocket {
    fn open(interface: &str) -> io::Result<PacketSocket> {
        let name = std::ffi::CString::new(interface).map_err(io::Error::other)?;
        // SAFETY: a NUL-terminated name.
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if index == 0 {
            return Err(io::Error::other(format!("no interface {interface}")));
        }
        let protocol = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain arguments.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(protocol)) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let socket = PacketSocket { fd };
        // SAFETY: a zeroed sockaddr_ll, filled below, of its own size.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = protocol;
        address.sll_ifindex = index as i32;
        let bound = unsafe {
            libc::bind(
                fd,
                (&address as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if bound != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(socket)
    }

    /// Every frame of `frames`, in order: a full socket buffer (ENOBUFS) is waited out.
    fn send_all(&self, frames: &[Frame]) -> io::Result<()> {
        let mut done = 0;
        while done < frames.len() {
            let mut iovecs: Vec<libc::iovec> = frames[done..]
                .iter()
                .map(|frame| libc::iovec {
                    iov_base: frame.bytes.as_ptr() as *mut libc::c_void,
                    iov_len: frame.bytes.len(),
                })
                .collect();
            let mut messages: Vec<libc::mmsghdr> = iovecs
                .iter_mut()
                .map(|iovec| {
                    // SAFETY: a zeroed header, pointing at one iovec that outlives the call.
                    let mut message: libc::mmsghdr = unsafe { std::mem::zeroed() };
                    message.msg_hdr.msg_iov = iovec;
                    message.msg_hdr.msg_iovlen = 1;
                    message
                })
                .collect();
            // SAFETY: the headers and their buffers live until the call returns.
            let n =
                unsafe { libc::sendmmsg(self.fd, messages.as_mut_ptr(), messages.len() as u32, 0) };
            if n < 0 {
                let error = io::Error::last_os_error();
                match error.raw_os_error() {
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                        std::thread::sleep(Duration::from_micros(50));
                        continue;
                    }
                    _ => return Err(error),
                }
            }
            done += n as usize;
        }
        Ok(())
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_makes_the_same_mix_and_the_mix_is_the_one_asked_for() {
        let frames = |seed| {
            let mut mix = Mix::new(seed, 2000);
            (0..20_000).map(|_| mix.frame()).collect::<Vec<_>>()
        };
        let (a, b) = (frames(7), frames(7));
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| x.bytes == y.bytes && x.flow == y.flow));
        let mix = Mix::new(7, 2000);
        let flows = mix.flows();
        let share = |keep: &dyn Fn(&Flow) -> bool| flows.iter().filter(|f| keep(f)).count();
        assert!(share(&|f| f.protocol == PROTO_TCP) > 900);
        assert!(share(&|f| f.protocol == PROTO_UDP) > 500);
        assert!(share(&|f| f.icmp()) > 50);
        assert!(share(&|f| f.client.is_ipv6()) > 250);
        assert!(share(&|f| f.vlan.is_some()) > 250);
        let lens: Vec<usize> = a.iter().map(|f| f.bytes.len()).collect();
        assert!(lens
            .iter()
            .all(|&len| (FRAME_MIN_BYTES..=FRAME_MAX_BYTES + 4).contains(&len)));
        let shortest = lens
            .iter()
            .filter(|&&len| len <= FRAME_MIN_BYTES + 4)
            .count();
        assert!(shortest > 5000, "{shortest} of the shortest frames");
        let busiest = a.iter().filter(|f| f.flow < 200).count();
        assert!(busiest > 10_000, "{busiest} frames of the busiest tenth");
    }

    #[test]
    fn a_mix_of_one_length_has_frames_of_that_length() {
        let mut mix = Mix::new(3, 100).of_wire_bytes(1518);
        assert!((0..1000).all(|_| {
            let frame = mix.frame();
            let tag = if mix.flows()[frame.flow].vlan.is_some() {
                4
            } else {
                0
            };
            frame.bytes.len() == FRAME_MAX_BYTES + tag
        }));
    }

    #[test]
    fn frames_carry_their_flows_headers() {
        let flow = Flow {
            protocol: PROTO_UDP,
            client: "10.0.0.1:40000".parse().unwrap(),
            server: "10.200.0.9:53".parse().unwrap(),
            vlan: Some(120),
        };
        let frame = frame_bytes(&flow, true, 100, 1);
        assert_eq!(frame.len(), 104);
        assert_eq!(&frame[12..16], &[0x81, 0x00, 0, 120]);
        assert_eq!(&frame[16..18], &[0x08, 0x00]);
        let ip = &frame[18..38];
        assert_eq!(ip[9], PROTO_UDP);
        assert_eq!(
            &ip[12..16],
            &[10, 200, 0, 9],
            "a reply comes from the server"
        );
        // The header's checksum sums to all ones.
        let sum: u32 = ip
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff);
        assert_eq!(&frame[38..42], &[0, 53, 0x9c, 0x40]);
        assert_eq!(
            u16::from_be_bytes([frame[42], frame[43]]) as usize,
            104 - 38
        );
        assert_eq!(
            flow.text(true),
            "udp 10.200.0.9:53 -> 10.0.0.1:40000 vlan 120"
        );
        let ping = Flow {
            protocol: PROTO_ICMPV6,
            client: "[2001:db8:1::1]:32768".parse().unwrap(),
            server: "[2001:db8:2::9]:80".parse().unwrap(),
            vlan: None,
        };
        assert_eq!(
            ping.text(false),
            "icmp6 2001:db8:1::1 -> 2001:db8:2::9 type 128 code 0"
        );
        let frame = frame_bytes(&ping, false, 60, 3);
        assert_eq!(frame.len(), 14 + 40 + 8, "no shorter than its headers");
        assert_eq!(&frame[12..14], &[0x86, 0xdd]);
        assert_eq!(frame[54], 128);
    }
}
