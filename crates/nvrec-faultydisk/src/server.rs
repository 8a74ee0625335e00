//! Serving one request on the disk: through the faults, then to the store, then the reply.
//!
//! [`Server`] is shared by the FUSE threads, the delay pool and the controllers (the Rust
//! handle and the control file). Each `serve_*` function answers its request exactly once,
//! whatever happens; counters are bumped here and nowhere else.

use std::cell::RefCell;

use fuser::{ReplyData, ReplyEmpty, ReplyWrite};

use crate::control::{Access, FaultState};
use crate::fault::{Command, Op};
use crate::overlay::{Fill, PowerCut, WriteError};
use crate::stats::{self, Counters, Stats};
use crate::store::Store;
use crate::Result;

thread_local! {
    /// Each serving thread's read buffer, kept between requests: a fresh 1 MiB allocation
    /// per read would be a fresh mapping and 256 page faults.
    static READ_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

#[derive(Debug)]
pub(crate) struct Server {
    pub store: Store,
    pub faults: FaultState,
    pub counters: Counters,
}

impl Server {
    /// Applies one control command.
    pub fn apply(&self, command: Command) -> Result<()> {
        match command {
            Command::Inject(fault) => self.faults.inject(fault),
            Command::Resume => self.faults.resume(),
            Command::Clear => self.faults.clear(),
            Command::PowerCut { seed } => {
                self.power_cut(seed)?;
            }
        }
        Ok(())
    }

    /// Loses (or, with a seed, tears) every write not yet flushed.
    pub fn power_cut(&self, seed: Option<u64>) -> Result<PowerCut> {
        let report = self.store.power_cut(seed)?;
        stats::bump(&self.counters.power_cuts);
        Ok(report)
    }

    pub fn stats(&self) -> Stats {
        Stats {
            unflushed_bytes: self.store.unflushed_bytes(),
            faults: self
                .faults
                .faults()
                .iter()
                .map(ToString::to_string)
                .collect(),
            ..self.counters.snapshot()
        }
    }

    pub fn serve_read(&self, offset: u64, size: u32, reply: ReplyData) {
        stats::bump(&self.counters.reads);
        let len = self.clamp(offset, u64::from(size));
        if let Err(errno) = self.admit(Op::Read, offset, len, len) {
            return reply.error(errno);
        }
        READ_BUF.with_borrow_mut(|buf| {
            buf.resize(len as usize, 0);
            match self.store.read(offset, buf) {
                Ok(()) => {
                    stats::add(&self.counters.bytes_read, len);
                    reply.data(buf);
                }
                Err(err) => reply.error(self.failed(err.into())),
            }
        });
    }

    pub fn serve_write(&self, offset: u64, data: &[u8], reply: ReplyWrite) {
        stats::bump(&self.counters.writes);
        let len = data.len() as u64;
        if offset + len > self.store.size_bytes() {
            return reply.error(self.failed(fuser::Errno::EFBIG));
        }
        if let Err(errno) = self.admit(Op::Write, offset, len, len) {
            return reply.error(errno);
        }
        match self.write(offset, Fill::Bytes(data)) {
            Ok(()) => {
                stats::add(&self.counters.bytes_written, len);
                reply.written(data.len() as u32);
            }
            Err(errno) => reply.error(errno),
        }
    }

    /// A discard or zeroing (`fallocate` punch-hole or zero-range): a write of zeros that
    /// moves no data, so it is failed like a write but not slowed.
    pub fn serve_discard(&self, offset: u64, len: u64, reply: ReplyEmpty) {
        stats::bump(&self.counters.discards);
        let len = self.clamp(offset, len);
        if let Err(errno) = self.admit(Op::Write, offset, len, 0) {
            return reply.error(errno);
        }
        match self.write(offset, Fill::Zeros(len)) {
            Ok(()) => reply.ok(),
            Err(errno) => reply.error(errno),
        }
    }

    /// An FSYNC: the loop device's flush. Commits every write so far, unless a flush rule or
    /// dying fails it: then it commits nothing (unflushed writes stay unflushed, for a power
    /// cut to lose) and answers EIO.
    pub fn serve_fsync(&self, reply: ReplyEmpty) {
        stats::bump(&self.counters.fsyncs);
        let access = Access {
            op: None,
            offset: 0,
            len: 0,
            payload_bytes: 0,
        };
        if let Some(errno) = self.faults.admit(access, &self.counters) {
            return reply.error(self.failed(fuser::Errno::from_i32(errno.code())));
        }
        match self.store.sync() {
            Ok(()) => reply.ok(),
            Err(err) => reply.error(self.failed(err.into())),
        }
    }

    /// The bytes of `[offset, offset + len)` that lie on the disk.
    fn clamp(&self, offset: u64, len: u64) -> u64 {
        len.min(self.store.size_bytes().saturating_sub(offset))
    }

    fn admit(&self, op: Op, offset: u64, len: u64, payload_bytes: u64) -> Result<(), fuser::Errno> {
        let access = Access {
            op: Some(op),
            offset,
            len,
            payload_bytes,
        };
        match self.faults.admit(access, &self.counters) {
            None => Ok(()),
            Some(errno) => Err(self.failed(fuser::Errno::from_i32(errno.code()))),
        }
    }

    fn write(&self, offset: u64, fill: Fill<'_>) -> Result<(), fuser::Errno> {
        match self.store.write(offset, fill) {
            Ok(()) => Ok(()),
            Err(WriteError::Io(err)) => Err(self.failed(err.into())),
            Err(WriteError::Full(full)) => {
                stats::bump(&self.counters.overlay_overflows);
                eprintln!(
                    "nvrec-faultydisk: {}: a write at {offset} fails with EIO: unflushed writes \
                     would take {} bytes, over the limit of {} (flush more often, raise the \
                     limit, or write through)",
                    self.store.path().display(),
                    full.unflushed_bytes + full.needed_bytes,
                    full.max_bytes
                );
                Err(self.failed(fuser::Errno::EIO))
            }
        }
    }

    /// Counts a failed request and passes its errno on.
    fn failed(&self, errno: fuser::Errno) -> fuser::Errno {
        stats::bump(&self.counters.failed);
        errno
    }
}
