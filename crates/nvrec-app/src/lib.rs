//! nvrec's application layer: the use cases the `nvrec` command and the `nvrec serve`
//! service both front, each from what was asked to a typed outcome.
//!
//! The layers, bottom up: the `nvrec` library (formats, engines, the writer and reader,
//! devices, benches), `nvrec-archive` (recordings in object storage), this crate, and the
//! front ends (the CLI's commands, the service's API), which parse, call and print. Every
//! outcome comes to one [`Class`]; the CLI takes its exit status from it
//! ([`Class::exit_status`]) and the service its HTTP status. Nothing here parses a command
//! line, prints, or knows HTTP.
//!
//! - [`outcome`]: [`Class`], the typed usage error, and the class of an error chain.
//! - [`sources`]: what a use case reads from, as users name it, opened.
//! - [`record`]: a recording from a request to a plan, a handle, a run and its class.
//! - [`archiving`]: a set's recordings into object storage, and their space freed after.
//! - [`chunks`]: where a reader's chunks come from: a volume set or an archive.
//! - [`window`]: `--from`/`--to` as offsets or UTC times, resolved against a recording.
//! - [`replay`]: the replay pipeline into a writer: window, pace, gap fill, PcapNg.
//! - [`resend`]: the replay pipeline onto the network.
//! - [`export`]: a recording as PcapNg, SigMF or MCAP, whole or in numbered parts.
//! - [`find`]: the flows of a packet recording's window that a Community ID or an
//!   expression names.
//! - [`repairing`]: a damaged set's metadata made whole, and whether it is.
//! - [`verify`]: every chunk read and checked; an archive's objects checked in the store.
//! - [`listing`]: what `ls` and the service show of a set, as JSON and as lines.
//! - [`losses`]: losses inside a recording of network records, counted by cause.

pub mod archiving;
pub mod chunks;
pub mod export;
pub mod find;
pub mod flow_index;
pub mod indexing;
pub mod listing;
pub mod losses;
pub mod marking;
pub mod outcome;
pub mod record;
pub mod repairing;
pub mod replay;
pub mod resend;
pub mod retaining;
pub mod sources;
pub mod stream_out;
pub mod verify;
pub mod window;

pub use outcome::{error_text, recording_failure, Class, UsageError};
