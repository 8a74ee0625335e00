//! A traffic generator for testing and measuring nvrec's network sources.
//!
//! - [`datagram`]: the datagram format: a sequence number, a stream number and a payload
//!   pattern derived from both, so that a receiver can tell loss, reordering, duplicates and
//!   damage apart.
//! - [`mod@send`]: a paced sender (sendmmsg with UDP GSO, UDP_SEGMENT), at a rate in bits/s, for a
//!   duration or a count.
//! - [`mod@recv`]: a receiver (recvmmsg with UDP GRO) and the [`check::Checker`] it feeds, which
//!   also checks datagrams read back from a recording.
//! - [`mix`]: a realistic mix of Ethernet frames (thousands of flows, TCP, UDP and ICMP,
//!   IPv4 and IPv6, VLAN tags, 64 to 1518 bytes) sent onto an interface, and its ground
//!   truth per flow in the spelling `nvrec find` uses.
//! - [`sink`]: the reference receiver of the UDP bench: recvmmsg into O_DIRECT writes,
//!   nothing else.
//! - [`netns`]: two network namespaces joined by a veth pair, with addresses only inside
//!   them, removed on drop: the test network of the tests and benchmarks.
//!
//! It deliberately knows nothing of nvrec's on-disk format: it checks what arrives on the
//! wire or what a replay writes out, as any other client would.

pub mod check;
pub mod datagram;
pub mod mix;
pub mod netns;
pub mod recv;
pub mod send;
pub mod sink;

pub use check::{CheckReport, Checker};
pub use netns::{Side, TestNet};
pub use recv::{receive, ReceiveOptions, ReceiveReport};
pub use send::{send, SendOptions, SendReport};
