//! Marks asked of a running recording (format 1.7; the writer's side is
//! `nvrec::recording::marks`): how they reach its [`MarkDesk`].
//!
//! - `nvrec mark SET`: a Unix socket beside the recording, `nvrec-mark-SET_UUID.sock` in
//!   the load directory (`/dev/shm`, or `$NVREC_LOAD_DIR`), one request line and one answer
//!   line per connection ([`serve_while`], [`ask`]).
//! - The service: its API puts orders on the recording's desk directly.
//! - `record --mark-on-signal`: SIGUSR1 ([`Triggers::signal`], a flag the CLI's handler
//!   sets); `record --mark-udp ADDR`: each datagram is a mark, its text the label.
//!
//! A trigger that fires takes the window the recording was given (`--mark-before`,
//! `--mark-after`). Requests are plain text: `take BEFORE_NS AFTER_NS LABEL` or
//! `release ID`; answers `ok MARK_ID RECORDING_ID RELEASED BEFORE_NS AFTER_NS LABEL` or
//! `error TEXT`.

use crate::outcome::UsageError;
use anyhow::{Context, Result};
use nvrec::device::{Access, Safety};
use nvrec::recording::counters::RecordingCounters;
use nvrec::recording::marks::{MarkAnswer, MarkDesk, MarkOrder, MarkRefusal, MarkRequest};
use nvrec::recording::volume;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// How long a trigger waits for the writer to answer (it answers between writes).
pub const ANSWER_WAIT: Duration = Duration::from_secs(10);
/// How often the triggers look at their flag and their socket.
const POLL: Duration = Duration::from_millis(20);

/// What starts a mark on its own while the recording runs, and the window it takes.
#[derive(Debug, Clone, Default)]
pub struct Triggers {
    /// Set by a signal handler (SIGUSR1): a mark each time it is seen set.
    pub signal: Option<&'static AtomicBool>,
    /// Each datagram received here is a mark; its text (up to the label's size) labels it.
    pub udp: Option<SocketAddr>,
    pub before: Duration,
    pub after: Duration,
}

/// The socket `nvrec mark` reaches the recorder of set `set_uuid` by.
pub fn socket_path(set_uuid: &str) -> PathBuf {
    nvrec::recording::load::load_dir().join(format!("nvrec-mark-{set_uuid}.sock"))
}

/// Runs `run` while threads beside it take marks for `desk`: from the socket (once the
/// writer has opened the set and `counters` name it) and from `triggers`; what each
/// trigger got is in the returned list of lines (for the report).
pub fn serve_while<R>(
    desk: &MarkDesk,
    counters: &OnceLock<RecordingCounters>,
    triggers: &Triggers,
    run: impl FnOnce() -> R,
) -> (R, Vec<String>) {
    let done = AtomicBool::new(false);
    let udp = triggers.udp.map(UdpSocket::bind);
    std::thread::scope(|scope| {
        let server = scope.spawn(|| serve_socket(desk, counters, &done));
        let fired = scope.spawn(|| watch_triggers(desk, triggers, udp, &done));
        let result = {
            let _done = nvrec::control::SetOnDrop(&done);
            run()
        };
        let _ = server.join();
        let lines = fired.join().unwrap_or_default();
        (result, lines)
    })
}

/// Answers requests on the set's socket until `done`; the socket is removed at the end.
fn serve_socket(desk: &MarkDesk, counters: &OnceLock<RecordingCounters>, done: &AtomicBool) {
    let set_uuid = loop {
        if let Some(counters) = counters.get() {
            break counters.set_uuid.clone();
        }
        if done.load(Ordering::Relaxed) {
            return;
        }
        std::thread::sleep(POLL);
    };
    let path = socket_path(&set_uuid);
    sweep_stale_sockets(&nvrec::recording::load::load_dir(), STALE_SOCKET_AGE);
    let _ = std::fs::remove_file(&path);
    let Ok(listener) = UnixListener::bind(&path) else {
        return; // No socket: `nvrec mark` says no recorder answers.
    };
    let _ = listener.set_nonblocking(true);
    while !done.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => answer_one(desk, stream),
            Err(_) => std::thread::sleep(POLL),
        }
    }
    let _ = std::fs::remove_file(&path);
}

/// A mark socket no recorder listens on for this long is stale: its recorder was killed
/// (a recorder that ends removes its own). A new one is bound and listening within
/// moments, so it is never taken for stale.
const STALE_SOCKET_AGE: Duration = Duration::from_secs(60);

/// Removes the mark sockets in `dir` that no recorder listens on, older than `age`: a
/// recorder killed with SIGKILL leaves its socket behind, one per recording set.
fn sweep_stale_sockets(dir: &std::path::Path, age: Duration) {
    use std::os::unix::fs::FileTypeExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("nvrec-mark-") && name.ends_with(".sock")) {
            continue;
        }
        let Ok(metadata) = entry.metadata() else {
            continue;
        };
        let old = metadata
            .modified()
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|elapsed| elapsed >= age);
        let path = entry.path();
        let refused = || {
            UnixStream::connect(&path)
                .is_err_and(|error| error.kind() == std::io::ErrorKind::ConnectionRefused)
        };
        if metadata.file_type().is_socket() && old && refused() {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// One request line in, one answer line out.
fn answer_one(desk: &MarkDesk, stream: UnixStream) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut line = String::new();
    if BufReader::new(&stream).read_line(&mut line).is_err() {
        return;
    }
    let answer = match parse_order(line.trim_end()) {
        Ok(order) => desk.ask_and_wait(order, ANSWER_WAIT),
        Err(error) => Err(error),
    };
    let _ = (&stream).write_all(format!("{}\n", encode_answer(&answer)).as_bytes());
}

/// Fires a mark for each signal seen and each datagram received, until `done`.
fn watch_triggers(
    desk: &MarkDesk,
    triggers: &Triggers,
    udp: Option<std::io::Result<UdpSocket>>,
    done: &AtomicBool,
) -> Vec<String> {
    let mut lines = Vec::new();
    let udp = match udp {
        Some(Ok(socket)) => {
            let _ = socket.set_read_timeout(Some(POLL));
            Some(socket)
        }
        Some(Err(error)) => {
            lines.push(format!("the UDP mark trigger could not listen: {error}"));
            None
        }
        None => None,
    };
    let mut datagram = [0u8; 2048];
    while !done.load(Ordering::Relaxed) {
        let mut label = None;
        if triggers
            .signal
            .is_some_and(|flag| flag.swap(false, Ordering::AcqRel))
        {
            label = Some("signal".to_string());
        }
        if let Some(socket) = &udp {
            if let Ok((len, from)) = socket.recv_from(&mut datagram) {
                let text = String::from_utf8_lossy(&datagram[..len]).trim().to_string();
                label = Some(trigger_label(&text, from));
            }
        } else {
            std::thread::sleep(POLL);
        }
        if let Some(label) = label {
            let order = MarkOrder::Take(MarkRequest {
                before: triggers.before,
                after: triggers.after,
                label,
            });
            lines.push(match desk.ask_and_wait(order, ANSWER_WAIT) {
                Ok(answer) => taken_line(&answer),
                Err(error) => format!("a mark was refused: {error}"),
            });
        }
    }
    lines
}

/// A datagram's text as a label: printable, cut to the label's size; its sender where it
/// has none.
fn trigger_label(text: &str, from: SocketAddr) -> String {
    let clean: String = text.chars().filter(|c| !c.is_control()).collect();
    let mut label = if clean.is_empty() {
        format!("udp {from}")
    } else {
        clean
    };
    while label.len() > nvrec::layout::LABEL_MAX_BYTES {
        label.pop();
    }
    label
}

/// A mark taken or released, in a line.
pub fn taken_line(answer: &MarkAnswer) -> String {
    match answer.released {
        true => format!(
            "mark {} of recording {} released: its slots go back to the ring",
            answer.mark_id, answer.recording_id
        ),
        false => format!(
            "mark {} of recording {} {}: {:.3} s before, {:.3} s after{}{}",
            answer.mark_id,
            answer.recording_id,
            match answer.joined {
                true => "joined (it was still recording its after-window; its window goes on to this one's end)",
                false => "taken",
            },
            answer.before_ns as f64 / 1e9,
            answer.after_ns as f64 / 1e9,
            match answer.label.as_str() {
                "" => String::new(),
                label => format!(" \"{label}\""),
            },
            match answer.cut_short {
                true => " (CUT SHORT: its room under --max-marked ran out, or the recording ended)",
                false => "",
            }
        ),
    }
}

fn parse_order(line: &str) -> Result<MarkOrder, MarkRefusal> {
    let bad = || MarkRefusal::NotUnderstood(line.to_string());
    let mut words = line.splitn(4, ' ');
    match words.next() {
        Some("take") => {
            let mut number = || -> Result<u64, MarkRefusal> {
                words.next().and_then(|w| w.parse().ok()).ok_or_else(bad)
            };
            let before = Duration::from_nanos(number()?);
            let after = Duration::from_nanos(number()?);
            let label = words.next().unwrap_or("").to_string();
            Ok(MarkOrder::Take(MarkRequest {
                before,
                after,
                label,
            }))
        }
        Some("release") => words
            .next()
            .and_then(|w| w.parse().ok())
            .map(MarkOrder::Release)
            .ok_or_else(bad),
        _ => Err(bad()),
    }
}

fn encode_order(order: &MarkOrder) -> String {
    match order {
        MarkOrder::Take(request) => format!(
            "take {} {} {}",
            request.before.as_nanos(),
            request.after.as_nanos(),
            request.label.replace('\n', " ")
        ),
        MarkOrder::Release(id) => format!("release {id}"),
    }
}

fn encode_answer(answer: &Result<MarkAnswer, MarkRefusal>) -> String {
    match answer {
        Ok(a) => format!(
            "ok {} {} {} {} {} {} {}",
            a.mark_id, a.recording_id, a.released, a.joined, a.before_ns, a.after_ns, a.label
        ),
        Err(error) => format!("error {}", error.to_string().replace('\n', " ")),
    }
}

fn decode_answer(line: &str) -> Result<MarkAnswer, MarkRefusal> {
    if let Some(error) = line.strip_prefix("error ") {
        return Err(MarkRefusal::Said(error.to_string()));
    }
    let bad = || MarkRefusal::NotUnderstood(line.to_string());
    let rest = line.strip_prefix("ok ").ok_or_else(bad)?;
    let mut words = rest.splitn(7, ' ');
    let mut next = || words.next().ok_or_else(bad);
    Ok(MarkAnswer {
        mark_id: next()?.parse().map_err(|_| bad())?,
        recording_id: next()?.parse().map_err(|_| bad())?,
        released: next()? == "true",
        joined: next()? == "true",
        before_ns: next()?.parse().map_err(|_| bad())?,
        after_ns: next()?.parse().map_err(|_| bad())?,
        label: next().unwrap_or_default().to_string(),
        cut_short: false,
    })
}

/// Asks the recorder of set `set_uuid` for `order` through its socket.
pub fn ask(set_uuid: &str, order: &MarkOrder) -> Result<MarkAnswer> {
    let path = socket_path(set_uuid);
    let Ok(mut stream) = UnixStream::connect(&path) else {
        return Err(UsageError(format!(
            "no recording runs on volume set {set_uuid}: marks are taken while a ring records \
             (nvrec record --ring)"
        ))
        .into());
    };
    stream.set_read_timeout(Some(ANSWER_WAIT + Duration::from_secs(5)))?;
    stream
        .write_all(format!("{}\n", encode_order(order)).as_bytes())
        .context("asking the recorder")?;
    let mut line = String::new();
    BufReader::new(&stream)
        .read_line(&mut line)
        .context("reading the recorder's answer")?;
    decode_answer(line.trim_end()).map_err(|why| UsageError(why.to_string()).into())
}

/// Takes or releases a mark on the set whose members `targets` name: asked of the
/// recorder that writes it, or, for a release while none does, written on the drives
/// directly. A label too long is refused before anything is opened.
pub fn mark(targets: &[PathBuf], order: &MarkOrder) -> Result<MarkAnswer> {
    if let MarkOrder::Take(request) = order {
        check_label(&request.label)?;
    }
    let set = volume::open(targets, Access::Read, Safety::Check)?;
    let set_uuid = set.set_uuid.to_string();
    let live = set.live_recording()?.is_some();
    drop(set);
    match (order, live) {
        (MarkOrder::Release(id), false) => release_here(targets, *id),
        _ => ask(&set_uuid, order),
    }
}

/// A mark's label, as a user gives it: at most [`nvrec::layout::LABEL_MAX_BYTES`].
pub fn check_label(label: &str) -> Result<(), UsageError> {
    if label.len() > nvrec::layout::LABEL_MAX_BYTES {
        return Err(UsageError(format!(
            "--label is {} bytes: a mark's label holds at most {}",
            label.len(),
            nvrec::layout::LABEL_MAX_BYTES
        )));
    }
    Ok(())
}

/// Releases mark `id` of a set no recorder writes.
fn release_here(targets: &[PathBuf], id: u32) -> Result<MarkAnswer> {
    let set = volume::open(targets, Access::Write, Safety::Check)?;
    set.lock_for_recording()?;
    let entry = nvrec::recording::marks::release(&set, id)?;
    Ok(MarkAnswer {
        mark_id: entry.recording_id,
        recording_id: entry.mark_of.map_or(0, |of| of.recording_id),
        released: true,
        before_ns: 0,
        after_ns: 0,
        label: entry.name.as_str().to_string(),
        cut_short: false,
        joined: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_recorders_socket_is_swept_and_a_listening_one_and_other_files_are_not() {
        let dir = std::env::temp_dir().join(format!("nvrec-app-sweep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let stale = dir.join("nvrec-mark-stale.sock");
        drop(UnixListener::bind(&stale).unwrap()); // Its recorder is gone: nothing listens.
        let live_path = dir.join("nvrec-mark-live.sock");
        let live = UnixListener::bind(&live_path).unwrap();
        let plain = dir.join("nvrec-mark-plain.sock");
        std::fs::write(&plain, b"not a socket").unwrap();
        let other = dir.join("other.sock");
        drop(UnixListener::bind(&other).unwrap());
        sweep_stale_sockets(&dir, Duration::from_secs(3600));
        assert!(stale.exists(), "too young to be taken for stale");
        sweep_stale_sockets(&dir, Duration::ZERO);
        assert!(!stale.exists());
        assert!(live_path.exists() && plain.exists() && other.exists());
        drop(live);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A recording whose run panics (a defect in the writer) ends: the threads beside it
    /// stop and the panic reaches the caller, instead of a scope that waits for them for
    /// ever (the hour's soak: a recorder hung for 15 minutes, marks unanswered).
    #[test]
    fn a_run_that_panics_stops_the_threads_beside_it() {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (desk, counters) = (MarkDesk::default(), OnceLock::new());
            let triggers = Triggers::default();
            let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                serve_while(&desk, &counters, &triggers, || panic!("a defect"))
            }));
            let _ = sender.send(ended.is_err());
        });
        let panicked = receiver.recv_timeout(Duration::from_secs(30));
        assert_eq!(panicked, Ok(true), "serve_while never ended");
    }

    #[test]
    fn orders_and_answers_go_through_their_lines_unchanged() {
        let order = MarkOrder::Take(MarkRequest {
            before: Duration::from_secs(120),
            after: Duration::from_millis(1500),
            label: "brake event 7".into(),
        });
        assert_eq!(parse_order(&encode_order(&order)).unwrap(), order);
        assert_eq!(parse_order("release 9").unwrap(), MarkOrder::Release(9));
        assert!(parse_order("take x").is_err());
        let answer = MarkAnswer {
            mark_id: 3,
            recording_id: 2,
            released: false,
            before_ns: 7,
            after_ns: 8,
            label: "a b".into(),
            cut_short: false,
            joined: false,
        };
        assert_eq!(
            decode_answer(&encode_answer(&Ok(answer.clone()))).unwrap(),
            answer
        );
        // A refusal crosses as its message, said by the recorder.
        let refusal = MarkRefusal::BeingRead(4);
        let said = decode_answer(&encode_answer(&Err(refusal.clone()))).unwrap_err();
        assert!(matches!(&said, MarkRefusal::Said(text) if *text == refusal.to_string()));
        assert!(matches!(
            decode_answer("ok 1 two"),
            Err(MarkRefusal::NotUnderstood(_))
        ));
    }

    #[test]
    fn a_datagram_labels_its_mark_cut_to_size_or_names_its_sender() {
        let from: SocketAddr = "10.0.0.1:9000".parse().unwrap();
        assert_eq!(trigger_label("fault\n", from), "fault");
        assert_eq!(trigger_label("", from), "udp 10.0.0.1:9000");
        assert_eq!(
            trigger_label(&"x".repeat(300), from).len(),
            nvrec::layout::LABEL_MAX_BYTES
        );
    }
}
