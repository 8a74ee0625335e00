//! Flows: which connection a recorded packet belongs to, named the way an alert names it
//! (a Community ID as Zeek and Suricata print it, or two addresses, a protocol and ports).
//!
//! `key` finds a packet's [`FlowKey`] from what a network source recorded (a captured
//! Ethernet frame, or a datagram's or a TCP read's addresses); `community` computes its
//! Community ID (version 1); `expr` parses the tcpdump spellings of a flow expression and
//! matches keys against it; `table` gathers the flows of a stretch of a recording (times,
//! packets, bytes, the chunks they lie in); `scan` fills a table from the chunks of a read,
//! naming what it could not key; `index` is the flow index a recorder writes into the
//! recording as it goes. All pure: tested without a drive.

mod community;
mod expr;
pub mod index;
mod key;
mod scan;
mod table;

pub use community::{CommunityId, CommunityIdError};
pub use expr::{End, Family, FlowExpr, FlowExprError, Test};
pub use key::{
    key_of_frame, key_of_packet, protocol_name, FlowKey, IpFlow, ETHERTYPE_IPV4, ETHERTYPE_IPV6,
    PROTO_ICMP, PROTO_ICMPV6, PROTO_SCTP, PROTO_TCP, PROTO_UDP,
};
pub use scan::FlowScan;
pub use table::{FlowEntry, FlowFilter, FlowQuery, FlowTable};
