//! The local state that makes an archive run resumable: a small SQLite file.
//!
//! It records, per archive URL and object key, the segment's size and CRC32C, the
//! multipart upload in progress (its id) and the parts the store has acknowledged, and
//! which objects are complete. After a kill -9 or a lost connection, the next run skips
//! complete segments (after a HEAD confirms them), resumes the open upload with the parts
//! still missing, and starts afresh where the store no longer knows the upload. Every
//! row is written right after the store acknowledged what it describes, in its own
//! transaction, so the file never claims more than the store holds. Objects are
//! deterministic (same key, same bytes), so a part or object sent twice is harmless.
//!
//! It also records, per recording being archived, each segment the store holds with what
//! it commits (the manifest's entry for it, the findings filed with it, and where reading
//! goes on after it), so that a run started again goes on after the last of them rather
//! than at the recording's start: a followed ring has overwritten its start by then, and
//! reading it again from its oldest chunk would cut segments under the same keys from
//! other chunks. The rows go once the recording's manifest is in the store. A run that
//! goes on from a manifest already there (written for an earlier revision of the entry)
//! writes its rows from the first segment after those the manifest names.
//!
//! The file is in WAL mode with `synchronous = NORMAL`: a commit is in the file (the OS's
//! cache) when it returns, so a killed process loses nothing, and no commit waits for an
//! fsync. A power cut may take the last rows back; the state then claims less than the
//! store holds, never more, and those objects or parts are sent again. (With an fsync a
//! commit, each segment waited behind the writeback of everything archived before it to
//! the same disk.)

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OptionalExtension};

use crate::manifest::SegmentInfo;
use crate::pack::Commit;
use crate::{ArchiveError, Result};

/// How long a write waits for another process holding the file.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// A row of `objects`: size, CRC32C, upload id, done, entity tag.
type ObjectRow = (i64, i64, Option<String>, bool, Option<String>);

pub struct State {
    connection: Connection,
    path: PathBuf,
}

/// What the state says of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ObjectState {
    /// Nothing recorded, or recorded for other bytes (another size or checksum).
    Unknown,
    /// A multipart upload was begun: its id and the parts acknowledged (index, part id).
    Uploading {
        upload_id: String,
        parts: Vec<(usize, String)>,
    },
    /// The store holds it, with this entity tag.
    Done { e_tag: Option<String> },
}

/// Opens (creating, with its folder) the SQLite file at `path` as the archive keeps its
/// databases (the state and the catalog): WAL without an fsync a commit, and a wait for
/// another process's lock.
pub(crate) fn open_database(
    path: &Path,
    error: impl Fn(rusqlite::Error) -> ArchiveError,
) -> Result<Connection> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| ArchiveError::Io {
            what: format!("creating {}", parent.display()),
            source,
        })?;
    }
    let connection = Connection::open(path).map_err(&error)?;
    connection.busy_timeout(BUSY_TIMEOUT).map_err(&error)?;
    connection
        .execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
        .map_err(&error)?;
    Ok(connection)
}

impl State {
    /// Opens (creating) the state file at `path`.
    pub fn open(path: &Path) -> Result<State> {
        let error = |source| ArchiveError::State {
            path: path.display().to_string(),
            source,
        };
        let connection = open_database(path, error)?;
        connection
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS objects (
                     url TEXT NOT NULL,
                     key TEXT NOT NULL,
                     size_bytes INTEGER NOT NULL,
                     crc32c INTEGER NOT NULL,
                     upload_id TEXT,
                     done INTEGER NOT NULL DEFAULT 0,
                     e_tag TEXT,
                     PRIMARY KEY (url, key)
                 );
                 CREATE TABLE IF NOT EXISTS parts (
                     url TEXT NOT NULL,
                     key TEXT NOT NULL,
                     upload_id TEXT NOT NULL,
                     part_index INTEGER NOT NULL,
                     content_id TEXT NOT NULL,
                     PRIMARY KEY (url, key, upload_id, part_index)
                 );
                 CREATE TABLE IF NOT EXISTS sent_segments (
                     url TEXT NOT NULL,
                     dir TEXT NOT NULL,
                     recording_start_ns INTEGER NOT NULL,
                     segment_index INTEGER NOT NULL,
                     info TEXT NOT NULL,
                     committed TEXT NOT NULL,
                     PRIMARY KEY (url, dir, segment_index)
                 );",
            )
            .map_err(error)?;
        Ok(State {
            connection,
            path: path.to_path_buf(),
        })
    }

    fn error(&self, source: rusqlite::Error) -> ArchiveError {
        ArchiveError::State {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// What is known of `key` holding `size_bytes` with `crc32c`.
    pub fn object(
        &self,
        url: &str,
        key: &str,
        size_bytes: u64,
        crc32c: u32,
    ) -> Result<ObjectState> {
        let row: Option<ObjectRow> = self
            .connection
            .query_row(
                "SELECT size_bytes, crc32c, upload_id, done, e_tag FROM objects WHERE url = ?1 AND key = ?2",
                params![url, key],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)),
            )
            .optional()
            .map_err(|e| self.error(e))?;
        let Some((size, crc, upload_id, done, e_tag)) = row else {
            return Ok(ObjectState::Unknown);
        };
        if size as u64 != size_bytes || crc as u32 != crc32c {
            return Ok(ObjectState::Unknown);
        }
        if done {
            return Ok(ObjectState::Done { e_tag });
        }
        let Some(upload_id) = upload_id else {
            return Ok(ObjectState::Unknown);
        };
        let mut statement = self
            .connection
            .prepare(
                "SELECT part_index, content_id FROM parts WHERE url = ?1 AND key = ?2 AND upload_id = ?3 ORDER BY part_index",
            )
            .map_err(|e| self.error(e))?;
        let parts = statement
            .query_map(params![url, key, upload_id], |row| {
                Ok((row.get::<_, i64>(0)? as usize, row.get::<_, String>(1)?))
            })
            .map_err(|e| self.error(e))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.error(e))?;
        Ok(ObjectState::Uploading { upload_id, parts })
    }

    /// A multipart upload of `key` was begun (replacing whatever was recorded).
    pub fn begin_upload(
        &self,
        url: &str,
        key: &str,
        size_bytes: u64,
        crc32c: u32,
        upload_id: &str,
    ) -> Result<()> {
        self.connection
            .execute(
                "INSERT OR REPLACE INTO objects (url, key, size_bytes, crc32c, upload_id, done, e_tag)
                 VALUES (?1, ?2, ?3, ?4, ?5, 0, NULL)",
                params![url, key, size_bytes as i64, crc32c as i64, upload_id],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// The store acknowledged part `index` of the upload.
    pub fn part_done(
        &self,
        url: &str,
        key: &str,
        upload_id: &str,
        index: usize,
        content_id: &str,
    ) -> Result<()> {
        self.connection
            .execute(
                "INSERT OR REPLACE INTO parts (url, key, upload_id, part_index, content_id) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![url, key, upload_id, index as i64, content_id],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// The store holds `key` whole.
    pub fn object_done(
        &self,
        url: &str,
        key: &str,
        size_bytes: u64,
        crc32c: u32,
        e_tag: Option<&str>,
    ) -> Result<()> {
        let transaction = self
            .connection
            .unchecked_transaction()
            .map_err(|e| self.error(e))?;
        transaction
            .execute(
                "INSERT OR REPLACE INTO objects (url, key, size_bytes, crc32c, upload_id, done, e_tag)
                 VALUES (?1, ?2, ?3, ?4, NULL, 1, ?5)",
                params![url, key, size_bytes as i64, crc32c as i64, e_tag],
            )
            .map_err(|e| self.error(e))?;
        transaction
            .execute(
                "DELETE FROM parts WHERE url = ?1 AND key = ?2",
                params![url, key],
            )
            .map_err(|e| self.error(e))?;
        transaction.commit().map_err(|e| self.error(e))
    }

    /// The store holds segment `info` of the recording in `dir` (the one that began at
    /// `recording_start_ns`), and it commits `commit`.
    pub(crate) fn segment_sent(
        &self,
        url: &str,
        dir: &str,
        recording_start_ns: u64,
        info: &SegmentInfo,
        commit: &Commit,
    ) -> Result<()> {
        let index = commit
            .next
            .index
            .checked_sub(1)
            .expect("a segment's successor");
        let info = serde_json::to_string(info).expect("segment infos serialize");
        let commit = serde_json::to_string(commit).expect("commits serialize");
        self.connection
            .execute(
                "INSERT OR REPLACE INTO sent_segments (url, dir, recording_start_ns, segment_index, info, committed)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![url, dir, recording_start_ns as i64, index, info, commit],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// The segments the store holds of the recording in `dir` that began at
    /// `recording_start_ns`, in order from segment `from_index` (0, or the first after
    /// those a manifest in the store names), with what each commits: those numbered from
    /// `from_index` without a gap (a power cut may have taken the last rows back).
    pub(crate) fn sent_segments(
        &self,
        url: &str,
        dir: &str,
        recording_start_ns: u64,
        from_index: u32,
    ) -> Result<Vec<(SegmentInfo, Commit)>> {
        let mut statement = self
            .connection
            .prepare(
                "SELECT segment_index, info, committed FROM sent_segments
                 WHERE url = ?1 AND dir = ?2 AND recording_start_ns = ?3 AND segment_index >= ?4
                 ORDER BY segment_index",
            )
            .map_err(|e| self.error(e))?;
        let rows = statement
            .query_map(
                params![url, dir, recording_start_ns as i64, from_index],
                |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        json_column::<SegmentInfo>(row, 1)?,
                        json_column::<Commit>(row, 2)?,
                    ))
                },
            )
            .map_err(|e| self.error(e))?;
        let mut sent = Vec::new();
        for row in rows {
            let (index, info, commit) = row.map_err(|e| self.error(e))?;
            let expected = i64::from(from_index) + sent.len() as i64;
            if index != expected || commit.next.index as i64 != index + 1 {
                break;
            }
            sent.push((info, commit));
        }
        Ok(sent)
    }

    /// Forgets the segments sent of the recording in `dir` from segment `from_index` on
    /// (all of them from 0: its manifest is in the store).
    pub(crate) fn forget_sent(&self, url: &str, dir: &str, from_index: u32) -> Result<()> {
        self.connection
            .execute(
                "DELETE FROM sent_segments WHERE url = ?1 AND dir = ?2 AND segment_index >= ?3",
                params![url, dir, from_index],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Forgets `key` (its upload is gone from the store, or its object is).
    pub fn forget(&self, url: &str, key: &str) -> Result<()> {
        self.connection
            .execute(
                "DELETE FROM objects WHERE url = ?1 AND key = ?2",
                params![url, key],
            )
            .map_err(|e| self.error(e))?;
        self.connection
            .execute(
                "DELETE FROM parts WHERE url = ?1 AND key = ?2",
                params![url, key],
            )
            .map_err(|e| self.error(e))?;
        Ok(())
    }
}

/// Column `index` of `row`, JSON of a `T`.
fn json_column<T: serde::de::DeserializeOwned>(
    row: &rusqlite::Row<'_>,
    index: usize,
) -> rusqlite::Result<T> {
    let text: String = row.get(index)?;
    serde_json::from_str(&text).map_err(|error| {
        rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, error.into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_survives_reopening_and_other_bytes_are_unknown() {
        let dir = std::env::temp_dir().join(format!("nvrec-state-{}", std::process::id()));
        let path = dir.join("state.sqlite");
        {
            let state = State::open(&path).unwrap();
            assert_eq!(state.object("u", "k", 10, 1).unwrap(), ObjectState::Unknown);
            state.begin_upload("u", "k", 10, 1, "up-1").unwrap();
            state.part_done("u", "k", "up-1", 1, "p1").unwrap();
            state.part_done("u", "k", "up-1", 0, "p0").unwrap();
        }
        let state = State::open(&path).unwrap();
        assert_eq!(
            state.object("u", "k", 10, 1).unwrap(),
            ObjectState::Uploading {
                upload_id: "up-1".into(),
                parts: vec![(0, "p0".into()), (1, "p1".into())]
            }
        );
        assert_eq!(state.object("u", "k", 10, 2).unwrap(), ObjectState::Unknown);
        assert_eq!(
            state.object("other", "k", 10, 1).unwrap(),
            ObjectState::Unknown
        );
        state.object_done("u", "k", 10, 1, Some("etag")).unwrap();
        assert_eq!(
            state.object("u", "k", 10, 1).unwrap(),
            ObjectState::Done {
                e_tag: Some("etag".into())
            }
        );
        state.forget("u", "k").unwrap();
        assert_eq!(state.object("u", "k", 10, 1).unwrap(), ObjectState::Unknown);
        drop(state);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn sent_segment(index: u32) -> (SegmentInfo, Commit) {
        let info = SegmentInfo {
            key: format!("d/seg-{index:06}"),
            size_bytes: 1128,
            crc32c: index,
            e_tag: Some(format!("e{index}")),
            chunk_count: 1,
            first_sequence: u64::from(index),
            last_sequence: u64::from(index),
            first_timestamp_ns: 7,
            last_timestamp_ns: 7,
            chunk_offsets: vec![0],
            chunk_timestamps_ns: vec![7],
            flows: None,
        };
        let commit = Commit {
            outcome: crate::pack::ReadOutcome {
                losses: vec![crate::manifest::Loss::recorded(u64::from(index), 5, 5)],
                holes: Vec::new(),
            },
            payload_bytes: 1000,
            next: crate::pack::SegmentStart {
                index: index + 1,
                sequence: u64::from(index) + 1,
                timestamp_ns: 8,
                stream_offset_bytes: 1000 * u64::from(index + 1),
                sent_sequence_end: u64::from(index) + 1,
            },
        };
        (info, commit)
    }

    #[test]
    fn the_segments_sent_of_a_recording_survive_reopening_in_order_until_forgotten() {
        let dir = std::env::temp_dir().join(format!("nvrec-state-sent-{}", std::process::id()));
        let path = dir.join("state.sqlite");
        let segments: Vec<_> = (0..4).map(sent_segment).collect();
        {
            let state = State::open(&path).unwrap();
            assert!(state.sent_segments("u", "d", 5, 0).unwrap().is_empty());
            for (info, commit) in segments.iter().rev() {
                state.segment_sent("u", "d", 5, info, commit).unwrap();
            }
        }
        let state = State::open(&path).unwrap();
        assert_eq!(state.sent_segments("u", "d", 5, 0).unwrap(), segments);
        // Another recording under the same key (another start), another archive: none.
        assert!(state.sent_segments("u", "d", 6, 0).unwrap().is_empty());
        assert!(state.sent_segments("other", "d", 5, 0).unwrap().is_empty());
        // Only those numbered from 0 without a gap count.
        let (info, commit) = sent_segment(5);
        state.segment_sent("u", "d", 5, &info, &commit).unwrap();
        assert_eq!(state.sent_segments("u", "d", 5, 0).unwrap(), segments);
        state.forget_sent("u", "d", 2).unwrap();
        assert_eq!(state.sent_segments("u", "d", 5, 0).unwrap(), segments[..2]);
        state.forget_sent("u", "d", 0).unwrap();
        assert!(state.sent_segments("u", "d", 5, 0).unwrap().is_empty());
        drop(state);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A run that goes on after the segments a manifest in the store names writes its
    /// segments down from the first after them; a run started again after it was killed
    /// takes them up from there (and a run from 0 finds none of them).
    #[test]
    fn the_segments_sent_after_those_a_manifest_names_are_taken_up_from_there() {
        let dir = std::env::temp_dir().join(format!("nvrec-state-after-{}", std::process::id()));
        let state = State::open(&dir.join("state.sqlite")).unwrap();
        let segments: Vec<_> = (3..6).map(sent_segment).collect();
        for (info, commit) in &segments {
            state.segment_sent("u", "d", 5, info, commit).unwrap();
        }
        assert!(state.sent_segments("u", "d", 5, 0).unwrap().is_empty());
        assert_eq!(state.sent_segments("u", "d", 5, 3).unwrap(), segments);
        assert_eq!(state.sent_segments("u", "d", 5, 4).unwrap(), segments[1..]);
        assert!(state.sent_segments("u", "d", 5, 2).unwrap().is_empty());
        drop(state);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
