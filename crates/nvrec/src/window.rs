//! The part of a recording a reading is about: receive times in `from_ns..to_ns` (ns since
//! the Unix epoch; an open end where `None`). Records are taken by their own time, a byte
//! stream's chunks by their timestamp (the arrival of their first byte). Export, find and
//! the flows' scan take it; `nvrec_app::window` makes one from what a user typed.

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
}

impl Window {
    pub fn contains(&self, timestamp_ns: u64) -> bool {
        self.from_ns.is_none_or(|from| timestamp_ns >= from)
            && self.to_ns.is_none_or(|to| timestamp_ns < to)
    }

    /// Whether `timestamp_ns` is at or after the window's end.
    pub fn is_past(&self, timestamp_ns: u64) -> bool {
        self.to_ns.is_some_and(|to| timestamp_ns >= to)
    }

    pub fn is_whole(&self) -> bool {
        self.from_ns.is_none() && self.to_ns.is_none()
    }
}
