//! The catalog: one table of archived recordings, from any number of nodes and archives,
//! to find recordings by node, label, time, size and losses without listing buckets. It
//! holds nothing the manifests do not: `rebuild` makes it again from the manifests in the
//! archive alone (and `archive` adds each recording it writes).
//!
//! It lives in an SQLite file (one recorder's, the default) or in a PostgreSQL database
//! that many recorder nodes share ([`CatalogLocation`]): the same table (`recordings`,
//! keyed by archive URL and manifest key) and the same statements, in SQL both take, only
//! the parameter marks differ. Each node adds its own rows; a row is replaced when its
//! recording is archived again, so nodes never overwrite each other's.
//!
//! Beside it, `flows`: the IP flows of each recording of packets (its segments' flows
//! objects joined, one row per flow key), so that the catalog answers which recordings saw
//! a Community ID or an address without reading a byte of data. `archive` writes them with
//! the recording's row, `rebuild` reads them again from the flows objects.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;

use nvrec::flow::{CommunityId, FlowEntry, FlowKey};
use rusqlite::Connection;

use crate::manifest::Manifest;
use crate::read;
use crate::store::Archive;
use crate::{ArchiveError, Result};

/// Where a catalog lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CatalogLocation {
    /// An SQLite file, made when first opened.
    File(PathBuf),
    /// A PostgreSQL database, by its connection URL (`postgres://user:password@host/db`,
    /// or `postgresql://`); the table is made there when missing.
    Postgres(String),
}

impl CatalogLocation {
    /// A `postgres://` or `postgresql://` URL names a database; anything else a file.
    pub fn parse(text: &str) -> CatalogLocation {
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            CatalogLocation::Postgres(text.to_string())
        } else {
            CatalogLocation::File(PathBuf::from(text))
        }
    }

    /// Whether there is a catalog to read: a file must exist; a database is asked.
    pub fn exists(&self) -> bool {
        match self {
            CatalogLocation::File(path) => path.exists(),
            CatalogLocation::Postgres(_) => true,
        }
    }
}

/// The location as it may be shown: a database URL without its password.
impl fmt::Display for CatalogLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CatalogLocation::File(path) => write!(f, "{}", path.display()),
            CatalogLocation::Postgres(url) => f.write_str(&without_password(url)),
        }
    }
}

impl serde::Serialize for CatalogLocation {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// `scheme://user:password@rest` as `scheme://user:***@rest`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((user_info, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match user_info.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

/// The open database.
enum Backend {
    File(Connection),
    /// The client's calls need it mutable; the catalog is used from one thread.
    Postgres(RefCell<postgres::Client>),
}

pub struct Catalog {
    backend: Backend,
    location: CatalogLocation,
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
    /// Only recordings with packets of this connection (both directions).
    pub community_id: Option<CommunityId>,
    /// Only recordings with packets from or to this address.
    pub host: Option<IpAddr>,
}

/// What a rebuild found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rebuilt {
    pub recording_count: usize,
    /// Manifests that could not be read, with why: left out of the catalog.
    pub unreadable: Vec<(String, String)>,
}

/// The columns of `recordings`, in the order rows are written and read.
const COLUMNS: [&str; 16] = [
    "archive_url",
    "manifest_key",
    "node",
    "set_uuid",
    "recording_id",
    "label",
    "state",
    "start_ns",
    "end_ns",
    "stream_len_bytes",
    "lost_bytes",
    "loss_count",
    "hole_count",
    "retirement_count",
    "archived_bytes",
    "segment_count",
];
/// The table and its indexes; SQL that both databases take. Counts are BIGINT
/// (nanoseconds and byte counts need 64 bits; SQLite reads BIGINT as its INTEGER).
const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS recordings (
     archive_url TEXT NOT NULL,
     manifest_key TEXT NOT NULL,
     node TEXT NOT NULL,
     set_uuid TEXT NOT NULL,
     recording_id BIGINT NOT NULL,
     label TEXT NOT NULL,
     state TEXT NOT NULL,
     start_ns BIGINT NOT NULL,
     end_ns BIGINT NOT NULL,
     stream_len_bytes BIGINT NOT NULL,
     lost_bytes BIGINT NOT NULL,
     loss_count BIGINT NOT NULL,
     hole_count BIGINT NOT NULL,
     retirement_count BIGINT NOT NULL,
     archived_bytes BIGINT NOT NULL,
     segment_count BIGINT NOT NULL,
     PRIMARY KEY (archive_url, manifest_key)
 );
 CREATE INDEX IF NOT EXISTS recordings_by_time ON recordings (start_ns, end_ns);
 CREATE INDEX IF NOT EXISTS recordings_by_node ON recordings (node, label);
 CREATE TABLE IF NOT EXISTS flows (
     archive_url TEXT NOT NULL,
     manifest_key TEXT NOT NULL,
     community_id TEXT NOT NULL,
     src_addr TEXT NOT NULL,
     dst_addr TEXT NOT NULL,
     first_ns BIGINT NOT NULL,
     last_ns BIGINT NOT NULL,
     packets BIGINT NOT NULL,
     bytes BIGINT NOT NULL
 );
 CREATE INDEX IF NOT EXISTS flows_by_recording ON flows (archive_url, manifest_key);
 CREATE INDEX IF NOT EXISTS flows_by_community_id ON flows (community_id);
 CREATE INDEX IF NOT EXISTS flows_by_source ON flows (src_addr);
 CREATE INDEX IF NOT EXISTS flows_by_destination ON flows (dst_addr);";

/// The columns of `flows`, in the order rows are written.
const FLOW_COLUMNS: [&str; 9] = [
    "archive_url",
    "manifest_key",
    "community_id",
    "src_addr",
    "dst_addr",
    "first_ns",
    "last_ns",
    "packets",
    "bytes",
];

/// The IP flows of the recording `manifest` describes: its segments' flows objects in
/// `archive`, each flow key's rows joined (times widened, packets and bytes summed).
pub fn recording_flows(archive: &Archive, manifest: &Manifest) -> Result<Vec<FlowEntry>> {
    let mut joined: HashMap<FlowKey, FlowEntry> = HashMap::new();
    for segment in &manifest.segments {
        let Some(flows) = &segment.flows else {
            continue;
        };
        let bytes = archive.get(&flows.key)?;
        for flow in crate::flows::decode(&flows.key, bytes, 0)? {
            if !matches!(flow.key, FlowKey::Ip(_)) {
                continue;
            }
            match joined.get_mut(&flow.key) {
                Some(entry) => {
                    entry.first_ns = entry.first_ns.min(flow.first_ns);
                    entry.last_ns = entry.last_ns.max(flow.last_ns);
                    entry.packets += flow.packets;
                    entry.bytes += flow.bytes;
                }
                None => {
                    joined.insert(flow.key, flow);
                }
            }
        }
    }
    let mut flows: Vec<FlowEntry> = joined.into_values().collect();
    flows.sort_by_key(|flow| (flow.first_ns, flow.key));
    Ok(flows)
}

/// A value given to a statement.
#[derive(Debug, Clone)]
enum Value {
    Text(String),
    Int(i64),
}

impl CatalogRow {
    /// The row's values in [`COLUMNS`] order.
    fn values(&self) -> Vec<Value> {
        let text = |s: &String| Value::Text(s.clone());
        let int = |n: u64| Value::Int(n as i64);
        vec![
            text(&self.archive_url),
            text(&self.manifest_key),
            text(&self.node),
            text(&self.set_uuid),
            int(u64::from(self.recording_id)),
            text(&self.label),
            text(&self.state),
            int(self.start_ns),
            int(self.end_ns),
            int(self.stream_len_bytes),
            int(self.lost_bytes),
            int(self.loss_count),
            int(self.hole_count),
            int(self.retirement_count),
            int(self.archived_bytes),
            int(self.segment_count),
        ]
    }

    /// The row from values read in [`COLUMNS`] order.
    fn from_values(texts: [String; 6], ints: [i64; 10]) -> CatalogRow {
        let [archive_url, manifest_key, node, set_uuid, label, state] = texts;
        let n = |i: usize| ints[i] as u64;
        CatalogRow {
            archive_url,
            manifest_key,
            node,
            set_uuid,
            recording_id: ints[0] as u32,
            label,
            state,
            start_ns: n(1),
            end_ns: n(2),
            stream_len_bytes: n(3),
            lost_bytes: n(4),
            loss_count: n(5),
            hole_count: n(6),
            retirement_count: n(7),
            archived_bytes: n(8),
            segment_count: n(9),
        }
    }
}

/// The positions in [`COLUMNS`] of the text columns, read back as strings.
const TEXT_READ: [usize; 6] = [0, 1, 2, 3, 5, 6];
/// The positions in [`COLUMNS`] of the integer columns, read back as `i64`.
const INT_READ: [usize; 10] = [4, 7, 8, 9, 10, 11, 12, 13, 14, 15];

impl Catalog {
    /// Opens the catalog at `location`, making its table where missing.
    pub fn open(location: &CatalogLocation) -> Result<Catalog> {
        let backend = match location {
            CatalogLocation::File(path) => {
                let error = |source: rusqlite::Error| ArchiveError::Catalog {
                    location: location.to_string(),
                    source: Box::new(source),
                };
                Backend::File(crate::state::open_database(path, error)?)
            }
            CatalogLocation::Postgres(url) => {
                let client = postgres::Client::connect(url, postgres::NoTls).map_err(|source| {
                    ArchiveError::Catalog {
                        location: location.to_string(),
                        source: Box::new(source),
                    }
                })?;
                Backend::Postgres(RefCell::new(client))
            }
        };
        let catalog = Catalog {
            backend,
            location: location.clone(),
        };
        catalog.batch(SCHEMA)?;
        Ok(catalog)
    }

    /// Where the catalog lives.
    pub fn location(&self) -> &CatalogLocation {
        &self.location
    }

    fn error(&self, source: impl std::error::Error + Send + Sync + 'static) -> ArchiveError {
        ArchiveError::Catalog {
            location: self.location.to_string(),
            source: Box::new(source),
        }
    }

    /// The mark of the `n`th parameter (from 1) in a statement.
    fn mark(&self, n: usize) -> String {
        match self.backend {
            Backend::File(_) => format!("?{n}"),
            Backend::Postgres(_) => format!("${n}"),
        }
    }

    /// Runs statements without parameters.
    fn batch(&self, sql: &str) -> Result<()> {
        match &self.backend {
            Backend::File(connection) => connection.execute_batch(sql).map_err(|e| self.error(e)),
            Backend::Postgres(client) => client
                .borrow_mut()
                .batch_execute(sql)
                .map_err(|e| self.error(e)),
        }
    }

    /// Runs one statement with `values` for its parameters.
    fn execute(&self, sql: &str, values: &[Value]) -> Result<()> {
        match &self.backend {
            Backend::File(connection) => connection
                .execute(
                    sql,
                    rusqlite::params_from_iter(values.iter().map(sqlite_value)),
                )
                .map(drop)
                .map_err(|e| self.error(e)),
            Backend::Postgres(client) => client
                .borrow_mut()
                .execute(sql, &postgres_values(values))
                .map(drop)
                .map_err(|e| self.error(e)),
        }
    }

    /// The rows a SELECT of [`COLUMNS`] returns.
    fn query(&self, sql: &str, values: &[Value]) -> Result<Vec<CatalogRow>> {
        match &self.backend {
            Backend::File(connection) => {
                let mut statement = connection.prepare(sql).map_err(|e| self.error(e))?;
                let rows = statement
                    .query_map(
                        rusqlite::params_from_iter(values.iter().map(sqlite_value)),
                        |row| {
                            let texts = try_map(TEXT_READ, |i| row.get::<_, String>(i))?;
                            let ints = try_map(INT_READ, |i| row.get::<_, i64>(i))?;
                            Ok(CatalogRow::from_values(texts, ints))
                        },
                    )
                    .map_err(|e| self.error(e))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
                    .map_err(|e| self.error(e))
            }
            Backend::Postgres(client) => {
                let rows = client
                    .borrow_mut()
                    .query(sql, &postgres_values(values))
                    .map_err(|e| self.error(e))?;
                rows.iter()
                    .map(|row| {
                        let texts = try_map(TEXT_READ, |i| row.try_get::<_, String>(i))?;
                        let ints = try_map(INT_READ, |i| row.try_get::<_, i64>(i))?;
                        Ok(CatalogRow::from_values(texts, ints))
                    })
                    .collect::<std::result::Result<Vec<_>, postgres::Error>>()
                    .map_err(|e| self.error(e))
            }
        }
    }

    /// The statement that adds a row, or replaces the row of the same recording.
    fn upsert_sql(&self) -> String {
        let marks: Vec<String> = (1..=COLUMNS.len()).map(|n| self.mark(n)).collect();
        let updates: Vec<String> = COLUMNS[2..]
            .iter()
            .map(|column| format!("{column} = excluded.{column}"))
            .collect();
        format!(
            "INSERT INTO recordings ({}) VALUES ({}) \
             ON CONFLICT (archive_url, manifest_key) DO UPDATE SET {}",
            COLUMNS.join(", "),
            marks.join(", "),
            updates.join(", ")
        )
    }

    /// Adds (or replaces) the row of `manifest`, archived at `archive_url`.
    pub fn insert(&self, archive_url: &str, manifest: &Manifest) -> Result<()> {
        let row = CatalogRow::of(archive_url, manifest);
        self.execute(&self.upsert_sql(), &row.values())
    }

    /// As [`Catalog::insert`], with the recording's flows (its flows objects in `archive`,
    /// read here), in one transaction.
    pub fn insert_with_flows(&self, archive: &Archive, manifest: &Manifest) -> Result<()> {
        let url = archive.url().to_string();
        let flows = recording_flows(archive, manifest)?;
        self.batch("BEGIN")?;
        let written = self
            .insert(&url, manifest)
            .and_then(|()| self.put_flows(&url, manifest, &flows));
        self.end_transaction(written)
    }

    /// COMMIT where `written` is good, ROLLBACK and its error otherwise.
    fn end_transaction(&self, written: Result<()>) -> Result<()> {
        match written {
            Ok(()) => self.batch("COMMIT"),
            Err(error) => {
                let _ = self.batch("ROLLBACK");
                Err(error)
            }
        }
    }

    /// Replaces the flows of the recording of `manifest`, archived at `archive_url`.
    fn put_flows(&self, archive_url: &str, manifest: &Manifest, flows: &[FlowEntry]) -> Result<()> {
        let key = manifest.key();
        let recording = [Value::Text(archive_url.into()), Value::Text(key.clone())];
        let delete = format!(
            "DELETE FROM flows WHERE archive_url = {} AND manifest_key = {}",
            self.mark(1),
            self.mark(2)
        );
        self.execute(&delete, &recording)?;
        let marks: Vec<String> = (1..=FLOW_COLUMNS.len()).map(|n| self.mark(n)).collect();
        let insert = format!(
            "INSERT INTO flows ({}) VALUES ({})",
            FLOW_COLUMNS.join(", "),
            marks.join(", ")
        );
        for flow in flows {
            let (FlowKey::Ip(ip), Some(id)) = (&flow.key, flow.community_id) else {
                continue;
            };
            let int = |n: u64| Value::Int(n as i64);
            let mut values = recording.to_vec();
            values.extend([
                Value::Text(id.to_string()),
                Value::Text(ip.source.to_string()),
                Value::Text(ip.destination.to_string()),
                int(flow.first_ns),
                int(flow.last_ns),
                int(flow.packets),
                int(flow.bytes),
            ]);
            self.execute(&insert, &values)?;
        }
        Ok(())
    }

    /// Makes the rows of `archive` again from its manifests alone, in one transaction.
    pub fn rebuild(&mut self, archive: &Archive) -> Result<Rebuilt> {
        let url = archive.url().to_string();
        let (recordings, unreadable) = read::recordings(archive)?;
        let flows = recordings
            .iter()
            .map(|recording| recording_flows(archive, &recording.manifest))
            .collect::<Result<Vec<_>>>()?;
        self.batch("BEGIN")?;
        let by_url = [Value::Text(url.clone())];
        let written = ["recordings", "flows"]
            .iter()
            .try_for_each(|table| {
                let delete = format!("DELETE FROM {table} WHERE archive_url = {}", self.mark(1));
                self.execute(&delete, &by_url)
            })
            .and_then(|()| {
                let upsert = self.upsert_sql();
                recordings
                    .iter()
                    .zip(&flows)
                    .try_for_each(|(recording, flows)| {
                        let row = CatalogRow::of(&url, &recording.manifest);
                        self.execute(&upsert, &row.values())?;
                        self.put_flows(&url, &recording.manifest, flows)
                    })
            });
        self.end_transaction(written)?;
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
        let mut sql = format!("SELECT {} FROM recordings WHERE 1 = 1", COLUMNS.join(", "));
        let mut values: Vec<Value> = Vec::new();
        // " AND " and `template`, each `{}` in it the mark of the next of `given`.
        let mut condition = |template: &str, given: &[Value]| {
            let mut pieces = template.split("{}");
            sql.push_str(" AND ");
            sql.push_str(pieces.next().unwrap_or_default());
            for (piece, value) in pieces.zip(given) {
                values.push(value.clone());
                sql.push_str(&self.mark(values.len()));
                sql.push_str(piece);
            }
        };
        let text = |s: &String| Value::Text(s.clone());
        let int = |n: u64| Value::Int(n as i64);
        if let Some(url) = &filter.archive_url {
            condition("archive_url = {}", &[text(url)]);
        }
        if let Some(node) = &filter.node {
            condition("node = {}", &[text(node)]);
        }
        if let Some(label) = &filter.label {
            condition("label = {}", &[text(label)]);
        }
        if let Some(from) = filter.from_ns {
            condition("end_ns >= {}", &[int(from)]);
        }
        if let Some(to) = filter.to_ns {
            condition("start_ns < {}", &[int(to)]);
        }
        if let Some(min) = filter.min_bytes {
            condition("stream_len_bytes >= {}", &[int(min)]);
        }
        let of_recording = "EXISTS (SELECT 1 FROM flows f WHERE f.archive_url = \
             recordings.archive_url AND f.manifest_key = recordings.manifest_key AND";
        if let Some(id) = &filter.community_id {
            condition(
                &format!("{of_recording} f.community_id = {{}})"),
                &[Value::Text(id.to_string())],
            );
        }
        if let Some(host) = &filter.host {
            let host = Value::Text(host.to_string());
            condition(
                &format!("{of_recording} (f.src_addr = {{}} OR f.dst_addr = {{}}))"),
                &[host.clone(), host],
            );
        }
        if filter.with_losses {
            sql.push_str(" AND (lost_bytes > 0 OR hole_count > 0)");
        }
        sql.push_str(" ORDER BY start_ns, node, set_uuid, recording_id");
        self.query(&sql, &values)
    }
}

/// `f` of each index, or the first error.
fn try_map<const N: usize, T: Default, E>(
    indexes: [usize; N],
    f: impl Fn(usize) -> std::result::Result<T, E>,
) -> std::result::Result<[T; N], E> {
    let mut out: [T; N] = std::array::from_fn(|_| T::default());
    for (slot, index) in out.iter_mut().zip(indexes) {
        *slot = f(index)?;
    }
    Ok(out)
}

fn sqlite_value(value: &Value) -> rusqlite::types::Value {
    match value {
        Value::Text(text) => rusqlite::types::Value::Text(text.clone()),
        Value::Int(n) => rusqlite::types::Value::Integer(*n),
    }
}

fn postgres_values(values: &[Value]) -> Vec<&(dyn postgres::types::ToSql + Sync)> {
    values
        .iter()
        .map(|value| match value {
            Value::Text(text) => text as &(dyn postgres::types::ToSql + Sync),
            Value::Int(n) => n as &(dyn postgres::types::ToSql + Sync),
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_url_names_a_server_and_is_shown_without_its_password() {
        let url = "postgres://nvrec:hunter2@db.lab:5433/recordings";
        let location = CatalogLocation::parse(url);
        assert_eq!(location, CatalogLocation::Postgres(url.into()));
        assert_eq!(
            location.to_string(),
            "postgres://nvrec:***@db.lab:5433/recordings"
        );
        let bare = "postgresql://db.lab/recordings";
        assert_eq!(CatalogLocation::parse(bare).to_string(), bare);
        assert_eq!(
            CatalogLocation::parse("/var/lib/nvrec/catalog.sqlite"),
            CatalogLocation::File("/var/lib/nvrec/catalog.sqlite".into())
        );
    }

    #[test]
    fn one_upsert_statement_names_every_column_with_the_backends_marks() {
        let dir = std::env::temp_dir().join(format!("nvrec-catalog-{}", std::process::id()));
        let catalog = Catalog::open(&CatalogLocation::File(dir.join("c.sqlite"))).unwrap();
        let sql = catalog.upsert_sql();
        assert!(sql.contains("?16") && !sql.contains("?17") && !sql.contains('$'));
        assert!(COLUMNS.iter().all(|column| sql.contains(column)));
        drop(catalog);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
