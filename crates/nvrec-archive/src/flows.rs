//! A segment's flows as Parquet: one object beside each segment of a recording of packets
//! (`seg-NNNNNN.flows.parquet`), one row per flow (one direction of a connection) of the
//! packets completed in the segment's chunks, so that DuckDB, Spark or Trino query the
//! flows of a whole bucket of recorders, and `find` over an archive knows which segments,
//! and which chunks in them, hold a flow's packets without reading any.
//!
//! The schema is [`FLOWS_SCHEMA`] (described column by column in `docs/ARCHIVE.md`).
//! Written with the `parquet` crate's column writers, without Arrow: the rows are few (a
//! flow a row, not a packet) and every column is a plain type. Dictionary- and run-length
//! encoded, and Snappy-compressed (pure Rust, and read by every engine): a third less than
//! uncompressed for a realistic mix of flows (bench/find's shares). The Community ID column
//! carries a Bloom filter, so that an engine looking for one passes over the row groups
//! that cannot hold it.

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use nvrec::flow::{CommunityId, FlowEntry, FlowKey, FlowTable, IpFlow};
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::{SerializedFileWriter, SerializedRowGroupWriter};
use parquet::record::Field;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;

use crate::{ArchiveError, Result};

/// The flows object of a segment, beside it.
pub fn flows_key(segment_key: &str) -> String {
    format!("{segment_key}.flows.parquet")
}

/// The columns of a flows object, in order.
pub const FLOWS_SCHEMA: &str = "
message nvrec_flows {
    REQUIRED BYTE_ARRAY set_uuid (UTF8);
    REQUIRED INT64 recording_id;
    REQUIRED INT32 segment;
    REQUIRED BYTE_ARRAY kind (UTF8);
    OPTIONAL BYTE_ARRAY community_id (UTF8);
    OPTIONAL BYTE_ARRAY src_addr (UTF8);
    OPTIONAL BYTE_ARRAY dst_addr (UTF8);
    OPTIONAL INT32 protocol;
    OPTIONAL INT32 src_port;
    OPTIONAL INT32 dst_port;
    OPTIONAL INT32 ethertype;
    OPTIONAL INT32 vlan;
    REQUIRED INT64 first_ns;
    REQUIRED INT64 last_ns;
    REQUIRED INT64 packets;
    REQUIRED INT64 bytes;
    REQUIRED BYTE_ARRAY chunks (UTF8);
}
";

/// The `kind` of a flow's key.
const KIND_IP: &str = "ip";
const KIND_NOT_IP: &str = "not_ip";
const KIND_UNREADABLE: &str = "unreadable";

/// Whose flows a flows object holds.
#[derive(Debug, Clone, Copy)]
pub struct FlowsOf<'a> {
    pub set_uuid: &'a str,
    pub recording_id: u32,
    pub segment: u32,
}

/// The columns of some flows, row by row.
#[derive(Default)]
struct Columns {
    kind: Vec<&'static str>,
    community_id: Vec<Option<String>>,
    src_addr: Vec<Option<String>>,
    dst_addr: Vec<Option<String>>,
    protocol: Vec<Option<i32>>,
    src_port: Vec<Option<i32>>,
    dst_port: Vec<Option<i32>>,
    ethertype: Vec<Option<i32>>,
    vlan: Vec<Option<i32>>,
    first_ns: Vec<i64>,
    last_ns: Vec<i64>,
    packets: Vec<i64>,
    bytes: Vec<i64>,
    chunks: Vec<String>,
}

impl Columns {
    fn push(&mut self, flow: &FlowEntry) {
        let (kind, ip, ethertype, vlan) = match flow.key {
            FlowKey::Ip(ip) => (KIND_IP, Some(ip), None, ip.vlan),
            FlowKey::NotIp { ethertype, vlan } => (KIND_NOT_IP, None, Some(ethertype), vlan),
            FlowKey::Unreadable => (KIND_UNREADABLE, None, None, None),
        };
        self.kind.push(kind);
        self.community_id
            .push(flow.community_id.map(|id| id.to_string()));
        self.src_addr.push(ip.map(|ip| ip.source.to_string()));
        self.dst_addr.push(ip.map(|ip| ip.destination.to_string()));
        self.protocol.push(ip.map(|ip| i32::from(ip.protocol)));
        let ports = ip.and_then(|ip| ip.ports);
        self.src_port.push(ports.map(|(from, _)| i32::from(from)));
        self.dst_port.push(ports.map(|(_, to)| i32::from(to)));
        self.ethertype.push(ethertype.map(i32::from));
        self.vlan.push(vlan.map(i32::from));
        self.first_ns.push(flow.first_ns as i64);
        self.last_ns.push(flow.last_ns as i64);
        self.packets.push(flow.packets as i64);
        self.bytes.push(flow.bytes as i64);
        self.chunks.push(runs_text(&flow.chunks));
    }
}

/// Chunk runs as the `chunks` column holds them: `FIRST+COUNT` each, space-separated.
fn runs_text(runs: &[(u64, u64)]) -> String {
    let texts: Vec<String> = runs
        .iter()
        .map(|(first, count)| format!("{first}+{count}"))
        .collect();
    texts.join(" ")
}

fn runs_of(text: &str) -> Option<Vec<(u64, u64)>> {
    text.split_whitespace()
        .map(|run| {
            let (first, count) = run.split_once('+')?;
            Some((first.parse().ok()?, count.parse().ok()?))
        })
        .collect()
}

/// The flows of `table`, by their first packet's time, as a Parquet object.
pub fn encode(of: FlowsOf<'_>, table: &FlowTable) -> Result<Vec<u8>> {
    let failed = |error: parquet::errors::ParquetError| ArchiveError::Io {
        what: format!(
            "the flows of segment {} of recording {}",
            of.segment, of.recording_id
        ),
        source: std::io::Error::other(error),
    };
    let mut columns = Columns::default();
    let flows = table.matching_all();
    for flow in &flows {
        columns.push(flow);
    }
    write(of, &columns, flows.len()).map_err(failed)
}

fn write(of: FlowsOf<'_>, columns: &Columns, rows: usize) -> parquet::errors::Result<Vec<u8>> {
    let schema = Arc::new(parse_message_type(FLOWS_SCHEMA)?);
    let properties = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by(format!("nvrec {}", env!("CARGO_PKG_VERSION")))
        .set_column_bloom_filter_enabled(ColumnPath::from("community_id"), true)
        // Sized for the rows there are: at the default of a million distinct values the
        // filter took 1 MiB of every object, most of a segment's flows.
        .set_column_bloom_filter_max_ndv(ColumnPath::from("community_id"), rows.max(1) as u64)
        .build();
    let mut writer = SerializedFileWriter::new(Vec::new(), schema, Arc::new(properties))?;
    let mut group = writer.next_row_group()?;
    let same = |text: &str| vec![text.to_string(); rows];
    strings(&mut group, &same(of.set_uuid))?;
    longs(&mut group, &vec![i64::from(of.recording_id); rows])?;
    ints(&mut group, &vec![Some(of.segment as i32); rows], false)?;
    let kinds: Vec<String> = columns.kind.iter().map(|k| k.to_string()).collect();
    strings(&mut group, &kinds)?;
    optional_strings(&mut group, &columns.community_id)?;
    optional_strings(&mut group, &columns.src_addr)?;
    optional_strings(&mut group, &columns.dst_addr)?;
    for column in [
        &columns.protocol,
        &columns.src_port,
        &columns.dst_port,
        &columns.ethertype,
        &columns.vlan,
    ] {
        ints(&mut group, column, true)?;
    }
    for column in [
        &columns.first_ns,
        &columns.last_ns,
        &columns.packets,
        &columns.bytes,
    ] {
        longs(&mut group, column)?;
    }
    strings(&mut group, &columns.chunks)?;
    group.close()?;
    writer.into_inner()
}

type Group<'a> = SerializedRowGroupWriter<'a, Vec<u8>>;

fn longs(group: &mut Group<'_>, values: &[i64]) -> parquet::errors::Result<()> {
    let mut column = group.next_column()?.expect("a column of the schema");
    column
        .typed::<Int64Type>()
        .write_batch(values, None, None)?;
    column.close()
}

/// An INT32 column; `optional`: None is null (else every value is Some).
fn ints(
    group: &mut Group<'_>,
    values: &[Option<i32>],
    optional: bool,
) -> parquet::errors::Result<()> {
    let mut column = group.next_column()?.expect("a column of the schema");
    let present: Vec<i32> = values.iter().flatten().copied().collect();
    let levels: Vec<i16> = values.iter().map(|v| i16::from(v.is_some())).collect();
    let levels = optional.then_some(levels.as_slice());
    column
        .typed::<Int32Type>()
        .write_batch(&present, levels, None)?;
    column.close()
}

fn strings(group: &mut Group<'_>, values: &[String]) -> parquet::errors::Result<()> {
    let mut column = group.next_column()?.expect("a column of the schema");
    let values: Vec<ByteArray> = values
        .iter()
        .map(|text| ByteArray::from(text.as_bytes()))
        .collect();
    column
        .typed::<ByteArrayType>()
        .write_batch(&values, None, None)?;
    column.close()
}

fn optional_strings(
    group: &mut Group<'_>,
    values: &[Option<String>],
) -> parquet::errors::Result<()> {
    let mut column = group.next_column()?.expect("a column of the schema");
    let present: Vec<ByteArray> = values
        .iter()
        .flatten()
        .map(|text| ByteArray::from(text.as_bytes()))
        .collect();
    let levels: Vec<i16> = values.iter().map(|v| i16::from(v.is_some())).collect();
    column
        .typed::<ByteArrayType>()
        .write_batch(&present, Some(&levels), None)?;
    column.close()
}

/// The flows of a flows object (`key`, for what an error names), their Community IDs taken
/// with `seed` (the object holds those of seed 0).
pub fn decode(key: &str, bytes: Bytes, seed: u16) -> Result<Vec<FlowEntry>> {
    let bad = |why: String| ArchiveError::Manifest {
        key: key.to_string(),
        why,
    };
    let reader = SerializedFileReader::new(bytes).map_err(|e| bad(format!("not Parquet: {e}")))?;
    let names: Vec<String> = reader
        .metadata()
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|column| column.name().to_string())
        .collect();
    if names != schema_names() {
        return Err(bad(format!("columns {names:?}, not nvrec's flows")));
    }
    let rows = reader
        .get_row_iter(None)
        .map_err(|e| bad(format!("unreadable: {e}")))?;
    let mut flows = Vec::new();
    for (index, row) in rows.enumerate() {
        let row = row.map_err(|e| bad(format!("row {index}: {e}")))?;
        let fields: Vec<&Field> = row.get_column_iter().map(|(_, field)| field).collect();
        let flow = flow_of(&fields, seed).ok_or_else(|| bad(format!("row {index}: {row}")))?;
        flows.push(flow);
    }
    Ok(flows)
}

/// The column names of [`FLOWS_SCHEMA`].
fn schema_names() -> Vec<String> {
    FLOWS_SCHEMA
        .lines()
        .filter_map(|line| line.trim().strip_suffix(';'))
        .filter_map(|line| line.split_whitespace().nth(2))
        .map(str::to_string)
        .collect()
}

/// A row's flow, None where a column holds what no flow has.
fn flow_of(fields: &[&Field], seed: u16) -> Option<FlowEntry> {
    let text = |i: usize| match fields.get(i)? {
        Field::Str(text) => Some(text.as_str()),
        _ => None,
    };
    let int = |i: usize| match fields.get(i)? {
        Field::Int(value) => Some(*value),
        _ => None,
    };
    let long = |i: usize| match fields.get(i)? {
        Field::Long(value) => u64::try_from(*value).ok(),
        _ => None,
    };
    let small = |i: usize| int(i).and_then(|v| u16::try_from(v).ok());
    let key = match text(3)? {
        KIND_IP => {
            let ports = match (small(8), small(9)) {
                (Some(from), Some(to)) => Some((from, to)),
                _ => None,
            };
            FlowKey::Ip(IpFlow {
                source: text(5)?.parse::<IpAddr>().ok()?,
                destination: text(6)?.parse::<IpAddr>().ok()?,
                protocol: u8::try_from(int(7)?).ok()?,
                ports,
                vlan: small(11),
            })
        }
        KIND_NOT_IP => FlowKey::NotIp {
            ethertype: small(10)?,
            vlan: small(11),
        },
        KIND_UNREADABLE => FlowKey::Unreadable,
        _ => return None,
    };
    Some(FlowEntry {
        community_id: match &key {
            FlowKey::Ip(flow) => Some(CommunityId::of(flow, seed)),
            _ => None,
        },
        key,
        first_ns: long(12)?,
        last_ns: long(13)?,
        packets: long(14)?,
        bytes: long(15)?,
        chunks: runs_of(text(16)?)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvrec::flow::{FlowExpr, FlowQuery, PROTO_TCP, PROTO_UDP};

    fn ip(from: (&str, u16), to: (&str, u16), protocol: u8, vlan: Option<u16>) -> FlowKey {
        FlowKey::Ip(IpFlow {
            source: from.0.parse().unwrap(),
            destination: to.0.parse().unwrap(),
            protocol,
            ports: Some((from.1, to.1)),
            vlan,
        })
    }

    fn table() -> FlowTable {
        let mut table = FlowTable::new(0);
        let out = ip(("10.0.0.1", 40000), ("10.0.0.2", 80), PROTO_TCP, None);
        let back = ip(("10.0.0.2", 80), ("10.0.0.1", 40000), PROTO_TCP, None);
        let v6 = ip(("fd00::1", 5353), ("fd00::2", 53), PROTO_UDP, Some(42));
        table.add(out, 1_000, 100, (5, 5));
        table.add(back, 1_500, 1500, (5, 6));
        table.add(out, 9_000, 60, (20, 20));
        table.add(v6, 2_000, 80, (7, 7));
        let fragment = FlowKey::Ip(IpFlow {
            ports: None,
            ..match v6 {
                FlowKey::Ip(flow) => flow,
                _ => unreachable!(),
            }
        });
        table.add(fragment, 2_100, 1400, (7, 7));
        table.add(
            FlowKey::NotIp {
                ethertype: 0x0806,
                vlan: Some(3),
            },
            3_000,
            60,
            (8, 8),
        );
        table.add(FlowKey::Unreadable, 4_000, 10, (9, 9));
        table
    }

    fn of() -> FlowsOf<'static> {
        FlowsOf {
            set_uuid: "5e7",
            recording_id: 3,
            segment: 7,
        }
    }

    #[test]
    fn a_segments_flows_come_back_from_their_parquet_as_they_went() {
        let table = table();
        let bytes = encode(of(), &table).unwrap();
        assert_eq!(&bytes[..4], b"PAR1");
        let back = decode("k", Bytes::from(bytes), 0).unwrap();
        let went: Vec<FlowEntry> = table.matching_all().into_iter().cloned().collect();
        assert_eq!(back, went);
        // Community IDs are taken again with another seed.
        let seeded = decode("k", Bytes::from(encode(of(), &table).unwrap()), 1).unwrap();
        assert_ne!(seeded[0].community_id, went[0].community_id);
        let query = FlowQuery::Expr(FlowExpr::parse("vlan 42 and udp").unwrap());
        assert_eq!(back.iter().filter(|f| query.matches(f)).count(), 2);
    }

    #[test]
    fn no_flows_make_an_object_with_no_rows() {
        let bytes = encode(of(), &FlowTable::new(0)).unwrap();
        assert!(decode("k", Bytes::from(bytes), 0).unwrap().is_empty());
    }

    #[test]
    fn what_is_not_a_flows_object_is_refused_by_name() {
        let error = decode(
            "seg-000001.flows.parquet",
            Bytes::from_static(b"PAR1 nope"),
            0,
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("seg-000001.flows.parquet"), "{error}");
        assert!(error.contains("not Parquet"), "{error}");
    }

    #[test]
    fn chunk_runs_read_back_and_nonsense_does_not() {
        assert_eq!(runs_text(&[(5, 2), (20, 1)]), "5+2 20+1");
        assert_eq!(runs_of("5+2 20+1"), Some(vec![(5, 2), (20, 1)]));
        assert_eq!(runs_of(""), Some(vec![]));
        assert_eq!(runs_of("5-2"), None);
        assert_eq!(schema_names().len(), 17);
    }
}
