//! TCP connections as a record source: `--source tcp://ADDR:PORT` listens there and records
//! each connection it accepts as a stream of its own (numbered in the order they come).
//!
//! Bytes are read straight into the chunk payload, behind the room for a record header that
//! is written once the read says how much came; a read never asks for more than the payload
//! has room for, so nothing is cut. A connection that closes ends with an empty record
//! flagged `END`. TCP does not lose data: what the recorder cannot take waits in the
//! socket's buffer and slows the sender down.

use super::NetCounters;
use crate::layout::{frame_in_place, record_bytes, Content, Packet, RECORD_HEADER_BYTES};
use crate::source::Source;
use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The least room worth a read: less, and the payload is taken as full. A read takes no
/// more than the room left, so a payload fills to within a record header and 8 bytes.
const READ_BYTES_MIN: usize = 8;
/// The most one read takes (one record).
const READ_BYTES_MAX: usize = 1 << 20;

struct Connection {
    socket: TcpStream,
    stream: u16,
    peer: SocketAddr,
    local: SocketAddr,
    /// The peer closed; its END record is still to be framed.
    closed: bool,
}

pub struct TcpSource {
    listeners: Vec<TcpListener>,
    connections: Vec<Connection>,
    /// Stream numbers never given yet start here; past 65535, those of ended connections
    /// are given again.
    next_stream: u32,
    /// Stream numbers of connections that ended (their END record framed), the longest
    /// ended first.
    free_streams: VecDeque<u16>,
    next_connection: usize,
    counters: Arc<NetCounters>,
}

impl TcpSource {
    /// Listens on each address.
    pub fn listen(addresses: &[SocketAddr]) -> io::Result<TcpSource> {
        let listeners = addresses
            .iter()
            .map(|&address| {
                let listener = TcpListener::bind(address).map_err(|error| {
                    io::Error::new(
                        error.kind(),
                        format!("listening on tcp://{address}: {error}"),
                    )
                })?;
                listener.set_nonblocking(true)?;
                Ok(listener)
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(TcpSource {
            listeners,
            connections: Vec::new(),
            next_stream: 0,
            free_streams: VecDeque::new(),
            next_connection: 0,
            counters: Arc::new(NetCounters::default()),
        })
    }

    pub fn counters(&self) -> Arc<NetCounters> {
        Arc::clone(&self.counters)
    }

    pub fn local_addresses(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|listener| listener.local_addr().ok())
            .collect()
    }

    /// Takes every connection waiting on the listeners; each is a stream. Stream numbers
    /// are 16 bits (the record format's): the first 65536 connections get their own, and
    /// later ones the number of a connection that ended (a reader tells them apart by the
    /// END record between). A connection that finds all 65536 in use at once is closed at
    /// once and counted (`refused_connections`): loud, never silent.
    fn accept(&mut self) -> io::Result<()> {
        for index in 0..self.listeners.len() {
            loop {
                let (socket, peer) = match self.listeners[index].accept() {
                    Ok(accepted) => accepted,
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => break,
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                    Err(error) => return Err(error),
                };
                let Some(stream) = self.take_stream() else {
                    self.counters
                        .refused_connections
                        .fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                socket.set_nonblocking(true)?;
                let local = socket.local_addr()?;
                self.connections.push(Connection {
                    socket,
                    stream,
                    peer,
                    local,
                    closed: false,
                });
            }
        }
        Ok(())
    }

    /// A stream number for a new connection: a new one while there are, then the one
    /// that ended longest ago; None when all are in use.
    fn take_stream(&mut self) -> Option<u16> {
        if self.next_stream <= u16::MAX as u32 {
            self.next_stream += 1;
            return Some((self.next_stream - 1) as u16);
        }
        self.free_streams.pop_front()
    }

    /// One read of connection `index` into `out`, framed as a record; its length, or 0
    /// when the connection had nothing. A closed connection gets its END record, then goes.
    fn read_one(&mut self, index: usize, out: &mut [u8]) -> io::Result<usize> {
        let connection = &mut self.connections[index];
        if !connection.closed {
            let room = (out.len() - RECORD_HEADER_BYTES).min(READ_BYTES_MAX) / 8 * 8;
            let data = &mut out[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + room];
            match connection.socket.read(data) {
                Ok(0) => connection.closed = true,
                Ok(count) => return Ok(self.frame(index, out, count, false)),
                Err(error)
                    if matches!(
                        error.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    return Ok(0)
                }
                // A reset connection ends like a closed one; the recording goes on.
                Err(_) => connection.closed = true,
            }
        }
        let len = self.frame(index, out, 0, true);
        let ended = self.connections.remove(index);
        self.free_streams.push_back(ended.stream);
        Ok(len)
    }

    /// Writes the header of a record of `count` bytes already in place after it.
    fn frame(&self, index: usize, out: &mut [u8], count: usize, end: bool) -> usize {
        let connection = &self.connections[index];
        self.counters.datagrams.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes
            .fetch_add(count as u64, Ordering::Relaxed);
        let packet = Packet {
            stream: connection.stream,
            content: Content::Tcp,
            timestamp_ns: realtime_ns(),
            original_len: count as u32,
            data: &[],
            peer: Some(connection.peer),
            local: Some(connection.local),
            end,
        };
        frame_in_place(out, &packet, count)
    }
}

impl TcpSource {
    /// [`Source::read_at`], but for noting where the read ended.
    fn read_records(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.accept()?;
        let mut written = 0;
        let mut idle_turns = 0;
        while idle_turns < self.connections.len() {
            if buf.len() - written < record_bytes(READ_BYTES_MIN) {
                return Ok(written);
            }
            let index = self.next_connection % self.connections.len();
            let placed = self.read_one(index, &mut buf[written..])?;
            if placed == 0 {
                self.next_connection = index + 1;
                idle_turns += 1;
                continue;
            }
            idle_turns = 0;
            written += placed;
        }
        if written == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        Ok(written)
    }
}

impl Source for TcpSource {
    /// Reads connections in turn into `buf`, each read one record, until one has nothing or
    /// the room left is under `READ_BYTES_MIN`: 0 then means the payload is full (see
    /// [`Source::packs_records`]); `Interrupted` when no connection had anything.
    fn read_at(&mut self, offset_bytes: u64, buf: &mut [u8]) -> io::Result<usize> {
        let read = self.read_records(buf);
        self.counters.note_read(offset_bytes, read)
    }

    fn wait_readable(&mut self, timeout: Duration) -> io::Result<bool> {
        if self.connections.iter().any(|c| c.closed) {
            return Ok(true);
        }
        super::poll_readable(
            self.listeners
                .iter()
                .map(|listener| listener.as_raw_fd())
                .chain(self.connections.iter().map(|c| c.socket.as_raw_fd())),
            timeout,
        )
    }

    fn packs_records(&self) -> bool {
        true
    }
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::{records, Record};
    use std::io::Write;

    #[test]
    fn each_connection_is_a_stream_that_ends_with_its_close() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        let mut source = TcpSource::listen(&["127.0.0.1:0".parse().unwrap()]).unwrap();
        let address = source.local_addresses()[0];
        let mut first = TcpStream::connect(address).unwrap();
        let mut second = TcpStream::connect(address).unwrap();
        let one: Vec<u8> = (0..200_000u32).map(|i| i as u8).collect();
        let two = vec![9u8; 5000];
        // The connections close when the writer's thread ends.
        let writer = std::thread::spawn(move || {
            first.write_all(&one).unwrap();
            second.write_all(&two).unwrap();
            (one, two)
        });
        let mut streams: Vec<Vec<u8>> = vec![Vec::new(), Vec::new()];
        let mut ended = [false, false];
        let mut buf = vec![0u8; 64 << 10];
        while !(ended[0] && ended[1]) {
            if !source.wait_readable(Duration::from_secs(5)).unwrap() {
                break;
            }
            read_packets(&mut source, &mut buf, |packet| {
                assert_eq!(packet.content, Content::Tcp);
                assert_eq!(packet.local, Some(address));
                streams[packet.stream as usize].extend_from_slice(packet.data);
                ended[packet.stream as usize] |= packet.end;
            });
        }
        let (one, two) = writer.join().unwrap();
        assert_eq!(streams[0], one);
        assert_eq!(streams[1], two);
        assert_eq!(ended, [true, true]);
    }

    /// Reads what the source has into payloads until it has been quiet for a while: the
    /// packets (stream, data, end) in order.
    fn drain(source: &mut TcpSource) -> Vec<(u16, Vec<u8>, bool)> {
        let mut seen = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        while source.wait_readable(Duration::from_millis(300)).unwrap() {
            read_packets(source, &mut buf, |packet| {
                seen.push((packet.stream, packet.data.to_vec(), packet.end))
            });
        }
        seen
    }

    /// Reads one payload from the source and hands each packet in it to `visit` (none
    /// when no connection had anything).
    fn read_packets(source: &mut TcpSource, buf: &mut [u8], mut visit: impl FnMut(&Packet)) {
        let filled = match source.read_at(0, buf) {
            Ok(filled) => filled,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => return,
            Err(error) => panic!("{error}"),
        };
        for record in records(&buf[..filled]) {
            let Record::Packet(packet) = record.unwrap().record else {
                panic!("TCP loses nothing")
            };
            visit(&packet);
        }
    }

    /// Past the last new stream number, a connection gets the number of one that ended;
    /// while every number is in use, a connection is refused and counted.
    #[test]
    fn stream_numbers_of_ended_connections_are_given_again() {
        if !crate::net::udp::tests::private_loopback() {
            return;
        }
        let mut source = TcpSource::listen(&["127.0.0.1:0".parse().unwrap()]).unwrap();
        let address = source.local_addresses()[0];
        // As if 65535 connections had come and gone, 7 of them ended.
        source.next_stream = u16::MAX as u32;
        source.free_streams.push_back(7);
        let mut last = TcpStream::connect(address).unwrap();
        last.write_all(b"last new").unwrap();
        let mut reused = TcpStream::connect(address).unwrap();
        reused.write_all(b"seven again").unwrap();
        let seen = drain(&mut source);
        assert_eq!(
            seen,
            [
                (u16::MAX, b"last new".to_vec(), false),
                (7, b"seven again".to_vec(), false)
            ]
        );
        // Every number in use: refused and counted, the connection closed at once.
        let mut refused = TcpStream::connect(address).unwrap();
        assert!(drain(&mut source).is_empty());
        assert_eq!(
            source.counters.refused_connections.load(Ordering::Relaxed),
            1
        );
        let mut byte = [0u8; 1];
        assert!(matches!(refused.read(&mut byte), Ok(0) | Err(_)), "closed");
        // One ends: its number goes to the next connection.
        drop(reused);
        assert_eq!(drain(&mut source), [(7, Vec::new(), true)]);
        let mut next = TcpStream::connect(address).unwrap();
        next.write_all(b"next").unwrap();
        assert_eq!(drain(&mut source), [(7, b"next".to_vec(), false)]);
        drop(last);
    }
}
