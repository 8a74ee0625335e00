//! The catalog: one SQLite table of archived recordings, from any number of nodes and
//! archives, to find recordings by node, label, time, size and losses without listing
//! buckets. It holds nothing the manifests do not: `rebuild` makes it again from the
//! manifests in the archive alone (and `archive` adds each recording it writes).
//!
//! The schema is plain SQL (`recordings`, keyed by archive URL and manifest key), so a
//! shared server database can hold the same table.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection};

use crate::manifest::Manifest;
use crate::read;
use crate::store::Archive;
use crate::{ArchiveError, Result};

pub struct Catalog {
    connection: Connection,
    path: PathBuf,
}

/// One row of the catalog.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CatalogRow {
    pub archive_url: String,
    pub manifest_key: String,
    pub node: String,
    pub set_uuid: String,
    pub recording_id: u32,
    pub label: String,
    pub state: String,
    pub start_ns: u64,
    pub end_ns: u64,
    pub stream_len_bytes: u64,
    pub lost_bytes: u64,
    pub loss_count: u64,
    pub hole_count: u64,
    pub retirement_count: u64,
    pub archived_bytes: u64,
    pub segment_count: u64,
}

/// Which rows `ls` shows: every condition given must hold.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub archive_url: Option<String>,
    pub node: Option<String>,
    pub label: Option<String>,
    /// Recordings that overlap `from_ns..to_ns` (ns since the Unix epoch).
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
    pub min_bytes: Option<u64>,
    /// Only recordings that lost input, or miss chunks.
    pub with_losses: bool,
}

/// What a rebuild found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rebuilt {
    pub recording_count: usize,
    /// Manifests that could not be read, with why: left out of the catalog.
    pub unreadable: Vec<(String, String)>,
}

impl Catalog {
    pub fn open(path: &Path) -> Result<Catalog> {
        let error = |source| ArchiveError::Catalog {
            path: path.display().to_string(),
            source,
        };
        let connection = crate::state::open_database(path, error)?;
        connection
            .execute_batch(
                "CREATE TABLE IF NOT EXISTS recordings (
                     archive_url TEXT NOT NULL,
                     manifest_key TEXT NOT NULL,
                     node TEXT NOT NULL,
                     set_uuid TEXT NOT NULL,
                     recording_id INTEGER NOT NULL,
                     label TEXT NOT NULL,
                     state TEXT NOT NULL,
                     start_ns INTEGER NOT NULL,
                     end_ns INTEGER NOT NULL,
                     stream_len_bytes INTEGER NOT NULL,
                     lost_bytes INTEGER NOT NULL,
                     loss_count INTEGER NOT NULL,
                     hole_count INTEGER NOT NULL,
                     retirement_count INTEGER NOT NULL,
                     archived_bytes INTEGER NOT NULL,
                     segment_count INTEGER NOT NULL,
                     PRIMARY KEY (archive_url, manifest_key)
                 );
                 CREATE INDEX IF NOT EXISTS recordings_by_time ON recordings (start_ns, end_ns);
                 CREATE INDEX IF NOT EXISTS recordings_by_node ON recordings (node, label);",
            )
            .map_err(error)?;
        Ok(Catalog {
            connection,
            path: path.to_path_buf(),
        })
    }

    fn error(&self, source: rusqlite::Error) -> ArchiveError {
        ArchiveError::Catalog {
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Adds (or replaces) the row of `manifest`, archived at `archive_url`.
    pub fn insert(&self, archive_url: &str, manifest: &Manifest) -> Result<()> {
        insert_row(&self.connection, archive_url, manifest).map_err(|e| self.error(e))
    }

    /// Makes the rows of `archive` again from its manifests alone, in one transaction.
    pub fn rebuild(&mut self, archive: &Archive) -> Result<Rebuilt> {
        let url = archive.url().to_string();
        let (recordings, unreadable) = read::recordings(archive)?;
        let path = self.path.display().to_string();
        let error = |source| ArchiveError::Catalog {
            path: path.clone(),
            source,
        };
        let transaction = self.connection.transaction().map_err(error)?;
        transaction
            .execute(
                "DELETE FROM recordings WHERE archive_url = ?1",
                params![url],
            )
            .map_err(error)?;
        for recording in &recordings {
            insert_row(&transaction, &url, &recording.manifest).map_err(error)?;
        }
        transaction.commit().map_err(error)?;
        Ok(Rebuilt {
            recording_count: recordings.len(),
            unreadable: unreadable
                .into_iter()
                .map(|u| (u.key, u.error.to_string()))
                .collect(),
        })
    }

    /// The rows `filter` selects, by start time.
    pub fn list(&self, filter: &Filter) -> Result<Vec<CatalogRow>> {
        let mut sql = String::from(
            "SELECT archive_url, manifest_key, node, set_uuid, recording_id, label, state, start_ns,
                    end_ns, stream_len_bytes, lost_bytes, loss_count, hole_count, retirement_count,
                    archived_bytes, segment_count FROM recordings WHERE 1 = 1",
        );
        let mut values: Vec<rusqlite::types::Value> = Vec::new();
        let mut condition = |sql_part: &str, value: rusqlite::types::Value| {
            values.push(value);
            sql.push_str(&format!(" AND {sql_part} ?{}", values.len()));
        };
        if let Some(url) = &filter.archive_url {
            condition("archive_url =", url.clone().into());
        }
        if let Some(node) = &filter.node {
            condition("node =", node.clone().into());
        }
        if let Some(label) = &filter.label {
            condition("label =", label.clone().into());
        }
        if let Some(from) = filter.from_ns {
            condition("end_ns >=", (from as i64).into());
        }
        if let Some(to) = filter.to_ns {
            condition("start_ns <", (to as i64).into());
        }
        if let Some(min) = filter.min_bytes {
            condition("stream_len_bytes >=", (min as i64).into());
        }
        if filter.with_losses {
            sql.push_str(" AND (lost_bytes > 0 OR hole_count > 0)");
        }
        sql.push_str(" ORDER BY start_ns, node, set_uuid, recording_id");
        let mut statement = self.connection.prepare(&sql).map_err(|e| self.error(e))?;
        let rows = statement
            .query_map(rusqlite::params_from_iter(values), |row| {
                Ok(CatalogRow {
                    archive_url: row.get(0)?,
                    manifest_key: row.get(1)?,
                    node: row.get(2)?,
                    set_uuid: row.get(3)?,
                    recording_id: row.get(4)?,
                    label: row.get(5)?,
                    state: row.get(6)?,
                    start_ns: row.get::<_, i64>(7)? as u64,
                    end_ns: row.get::<_, i64>(8)? as u64,
                    stream_len_bytes: row.get::<_, i64>(9)? as u64,
                    lost_bytes: row.get::<_, i64>(10)? as u64,
                    loss_count: row.get::<_, i64>(11)? as u64,
                    hole_count: row.get::<_, i64>(12)? as u64,
                    retirement_count: row.get::<_, i64>(13)? as u64,
                    archived_bytes: row.get::<_, i64>(14)? as u64,
                    segment_count: row.get::<_, i64>(15)? as u64,
                })
            })
            .map_err(|e| self.error(e))?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.error(e))?;
        Ok(rows)
    }
}

impl CatalogRow {
    /// The row of the recording `m` describes, archived at `archive_url`.
    pub fn of(archive_url: &str, m: &Manifest) -> CatalogRow {
        CatalogRow {
            archive_url: archive_url.to_string(),
            manifest_key: m.key(),
            node: m.node.clone(),
            set_uuid: m.set_uuid.clone(),
            recording_id: m.recording_id,
            label: m.label.clone(),
            state: m.state.clone(),
            start_ns: m.start_ns,
            end_ns: m.end_ns,
            stream_len_bytes: m.stream_len_bytes,
            lost_bytes: m.lost_bytes,
            loss_count: m.losses.len() as u64,
            hole_count: m.holes.len() as u64,
            retirement_count: m.retirements.len() as u64,
            archived_bytes: m.archived_bytes,
            segment_count: m.segments.len() as u64,
        }
    }
}

fn insert_row(connection: &Connection, archive_url: &str, m: &Manifest) -> rusqlite::Result<()> {
    let r = CatalogRow::of(archive_url, m);
    connection.execute(
        "INSERT OR REPLACE INTO recordings VALUES
         (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        params![
            r.archive_url,
            r.manifest_key,
            r.node,
            r.set_uuid,
            r.recording_id,
            r.label,
            r.state,
            r.start_ns as i64,
            r.end_ns as i64,
            r.stream_len_bytes as i64,
            r.lost_bytes as i64,
            r.loss_count as i64,
            r.hole_count as i64,
            r.retirement_count as i64,
            r.archived_bytes as i64,
            r.segment_count as i64,
        ],
    )?;
    Ok(())
}
