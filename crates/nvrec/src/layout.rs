//! On-disk format of recordings. Being written; see docs/FORMAT.md.
