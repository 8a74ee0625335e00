//! Progress on stderr, drawn from another thread: a bar on a terminal once a run has lasted a
//! second, and without a terminal (a log, CI) a line every few seconds once it has lasted
//! that long, so that a long run is never silent.
//!
//! The rate shown is measured here, over a sliding window of the last few seconds of
//! [`Progress::done_bytes`], in MiB/s as the final reports give it: it follows the rate of
//! the moment, and it is never shown from less than a second of samples, so the first
//! readings cannot be absurd (a burst of a few milliseconds read as "111 TiB/s"). Without a
//! terminal, a run that printed lines ends with one more giving the average over the whole
//! run (from when the count first moved to when it last did), the figure the report gives,
//! so that the last rate in a log is not the rate of the last few seconds. Nothing here
//! measures the run itself: the reports do, from the same counters.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use nvrec::control::Progress;
use nvrec::net::NetCounters;
use std::collections::VecDeque;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Delay before a bar appears: short runs stay quiet.
const SHOW_AFTER: Duration = Duration::from_secs(1);
/// Without a terminal: one line this often, the first after this long.
const LINE_EVERY: Duration = Duration::from_secs(5);
const TICK: Duration = Duration::from_millis(100);
/// The rate is measured over about this much of the most recent progress.
const RATE_WINDOW: Duration = Duration::from_secs(3);
/// No rate is shown from less than this much time between the window's ends.
const RATE_SPAN_MIN: Duration = Duration::from_secs(1);
/// Samples kept in the window: a bound on its memory whatever the tick.
const RATE_SAMPLE_COUNT_MAX: usize = 256;

/// The rate of progress over a sliding window of (time, bytes done) samples.
#[derive(Debug, Default)]
struct RateWindow {
    samples: VecDeque<(Duration, u64)>,
    /// Whether the count has moved since the window began: until it does, the window begins
    /// at the newest sample, so that the time a run takes to start (opening, formatting,
    /// filling a pool) does not read as a slow first second.
    moving: bool,
}

impl RateWindow {
    /// Adds the count of bytes done at `at` (time since the start, increasing). A count
    /// lower than the last means a new run began on the same counters (the self-test, one
    /// verify after another): the window starts again.
    fn push(&mut self, at: Duration, done_bytes: u64) {
        if self
            .samples
            .back()
            .is_some_and(|&(_, last_bytes)| done_bytes < last_bytes)
        {
            self.samples.clear();
            self.moving = false;
        }
        if !self.moving {
            match self.samples.front() {
                Some(&(_, first_bytes)) if first_bytes != done_bytes => self.moving = true,
                _ => self.samples.clear(),
            }
        }
        self.samples.push_back((at, done_bytes));
        // Keep one sample at or before the window's start, so that the window spans it all.
        while self.samples.len() > RATE_SAMPLE_COUNT_MAX
            || (self.samples.len() > 2 && at.saturating_sub(self.samples[1].0) >= RATE_WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Bytes per second over the window, once it spans at least `RATE_SPAN_MIN`.
    fn rate_bytes_per_s(&self) -> Option<f64> {
        let (&(first_at, first_bytes), &(last_at, last_bytes)) =
            (self.samples.front()?, self.samples.back()?);
        let span = last_at.saturating_sub(first_at);
        if span < RATE_SPAN_MIN {
            return None;
        }
        Some((last_bytes - first_bytes) as f64 / span.as_secs_f64())
    }
}

/// The average rate of a whole run: the bytes moved from the last sample before the count
/// first moved to the last sample at which it moved. A count that goes back (a new run on
/// the same counters) adds what it shows from zero, so the average covers every run.
#[derive(Debug, Default)]
struct RunAverage {
    last_bytes: u64,
    moved_bytes: u64,
    start_at: Duration,
    last_moved_at: Option<Duration>,
}

impl RunAverage {
    fn push(&mut self, at: Duration, done_bytes: u64) {
        let moved_bytes = done_bytes
            .checked_sub(self.last_bytes)
            .unwrap_or(done_bytes);
        self.last_bytes = done_bytes;
        if moved_bytes == 0 {
            if self.last_moved_at.is_none() {
                self.start_at = at;
            }
            return;
        }
        self.moved_bytes += moved_bytes;
        self.last_moved_at = Some(at);
    }

    /// Bytes per second over the run, once it spans at least `RATE_SPAN_MIN`.
    fn rate_bytes_per_s(&self) -> Option<f64> {
        let span = self.last_moved_at?.saturating_sub(self.start_at);
        if span < RATE_SPAN_MIN {
            return None;
        }
        Some(self.moved_bytes as f64 / span.as_secs_f64())
    }
}

/// The counters of a run, read at one moment.
#[derive(Debug, Clone, Copy)]
struct Counts {
    done_bytes: u64,
    total_bytes: u64,
    lost_bytes: u64,
    /// Datagrams a network source's kernel dropped, and those it took.
    dropped_count: u64,
    datagram_count: u64,
}

impl Counts {
    fn read(progress: &Progress, network: Option<&NetCounters>) -> Counts {
        Counts {
            done_bytes: progress.done_bytes.load(Ordering::Relaxed),
            total_bytes: progress.total_bytes.load(Ordering::Relaxed),
            lost_bytes: progress.lost_bytes.load(Ordering::Relaxed),
            dropped_count: network.map_or(0, |n| n.dropped_socket.load(Ordering::Relaxed)),
            datagram_count: network.map_or(0, |n| n.datagrams.load(Ordering::Relaxed)),
        }
    }

    /// "1 GiB of 4 GiB (25 %)", or "1 GiB" without a total.
    fn amount_text(&self) -> String {
        use nvrec::unit::format_bytes;
        let mut text = format_bytes(self.done_bytes);
        if self.total_bytes > 0 {
            let percent = self.done_bytes as f64 * 100.0 / self.total_bytes as f64;
            text.push_str(&format!(
                " of {} ({percent:.0} %)",
                format_bytes(self.total_bytes)
            ));
        }
        text
    }

    /// ", LOST 1 MiB" when input was lost, ", 12 datagrams, DROPPED 3" from a network
    /// source, else nothing.
    fn lost_text(&self) -> String {
        let mut text = String::new();
        if self.lost_bytes > 0 {
            text.push_str(&format!(
                ", LOST {}",
                nvrec::unit::format_bytes(self.lost_bytes)
            ));
        }
        if self.datagram_count > 0 || self.dropped_count > 0 {
            text.push_str(&format!(", {} datagrams", self.datagram_count));
        }
        if self.dropped_count > 0 {
            text.push_str(&format!(", DROPPED {}", self.dropped_count));
        }
        text
    }
}

/// What the bar shows after its counters, and what a line says: the rate and the time left.
fn rate_text(rate_bytes_per_s: Option<f64>, done_bytes: u64, total_bytes: u64) -> String {
    let Some(rate) = rate_bytes_per_s else {
        return "-- MiB/s".to_string();
    };
    let mut text = format!("{:.1} MiB/s", rate / (1024.0 * 1024.0));
    if total_bytes > 0 && rate > 0.0 {
        let left_s = total_bytes.saturating_sub(done_bytes) as f64 / rate;
        text.push_str(&format!(", {} left", clock(left_s)));
    }
    text
}

/// Seconds as m:ss or h:mm:ss.
fn clock(seconds: f64) -> String {
    let whole = seconds.round().min(u32::MAX as f64) as u64;
    let (hours, minutes, seconds) = (whole / 3600, whole / 60 % 60, whole % 60);
    if hours > 0 {
        format!("{hours}:{minutes:02}:{seconds:02}")
    } else {
        format!("{minutes}:{seconds:02}")
    }
}

/// The line printed without a terminal every `LINE_EVERY`.
fn progress_line(
    label: &str,
    elapsed: Duration,
    counts: Counts,
    rate_bytes_per_s: Option<f64>,
) -> String {
    format!(
        "nvrec {label}: {}, {}, {} elapsed{}",
        counts.amount_text(),
        rate_text(rate_bytes_per_s, counts.done_bytes, counts.total_bytes),
        clock(elapsed.as_secs_f64()),
        counts.lost_text()
    )
}

/// The last line without a terminal, once the run is over: the average over the whole run,
/// which is what the report measures, rather than the rate of its last seconds.
fn final_line(
    label: &str,
    elapsed: Duration,
    counts: Counts,
    average_bytes_per_s: Option<f64>,
) -> String {
    let average = match average_bytes_per_s {
        Some(rate) => format!("{:.1} MiB/s", rate / (1024.0 * 1024.0)),
        None => "-- MiB/s".to_string(),
    };
    format!(
        "nvrec {label}: finished, {} in {}, {average} on average{}",
        counts.amount_text(),
        clock(elapsed.as_secs_f64()),
        counts.lost_text()
    )
}

/// Progress without a terminal: a line every `LINE_EVERY`, and a final line when there
/// were any (a run too short for one stays quiet).
struct LineLog {
    label: String,
    next_at: Duration,
    printed: bool,
}

impl LineLog {
    fn new(label: String) -> LineLog {
        LineLog {
            label,
            next_at: LINE_EVERY,
            printed: false,
        }
    }

    fn tick(&mut self, elapsed: Duration, counts: Counts, rate_bytes_per_s: Option<f64>) {
        if elapsed < self.next_at {
            return;
        }
        self.next_at += LINE_EVERY;
        self.printed = true;
        errln!(
            "{}",
            progress_line(&self.label, elapsed, counts, rate_bytes_per_s)
        );
    }

    fn finish(&self, elapsed: Duration, counts: Counts, average_bytes_per_s: Option<f64>) {
        if self.printed {
            errln!(
                "{}",
                final_line(&self.label, elapsed, counts, average_bytes_per_s)
            );
        }
    }
}

pub struct ProgressDisplay {
    finished: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressDisplay {
    /// Starts showing `progress` under `label` on stderr, when `enabled` (not with --json):
    /// a bar on a terminal, else a line every `LINE_EVERY`.
    pub fn start(progress: Arc<Progress>, label: String, enabled: bool) -> ProgressDisplay {
        ProgressDisplay::start_with_network(progress, None, label, enabled)
    }

    /// As [`ProgressDisplay::start`], also showing a network source's datagrams and drops.
    pub fn start_with_network(
        progress: Arc<Progress>,
        network: Option<Arc<NetCounters>>,
        label: String,
        enabled: bool,
    ) -> ProgressDisplay {
        let finished = Arc::new(AtomicBool::new(false));
        if !enabled {
            return ProgressDisplay {
                finished,
                thread: None,
            };
        }
        let terminal = std::io::stderr().is_terminal();
        let done = Arc::clone(&finished);
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut window = RateWindow::default();
            let mut average = RunAverage::default();
            let mut lines = (!terminal).then(|| LineLog::new(label.clone()));
            let mut bar: Option<ProgressBar> = None;
            let first = Counts::read(&progress, network.as_deref());
            window.push(Duration::ZERO, first.done_bytes);
            average.push(Duration::ZERO, first.done_bytes);
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
                let elapsed = started.elapsed();
                let counts = Counts::read(&progress, network.as_deref());
                window.push(elapsed, counts.done_bytes);
                average.push(elapsed, counts.done_bytes);
                let rate = window.rate_bytes_per_s();
                match &mut lines {
                    Some(lines) => lines.tick(elapsed, counts, rate),
                    None if elapsed >= SHOW_AFTER => {
                        draw_bar(&mut bar, &label, elapsed, counts, rate)
                    }
                    None => {}
                }
            }
            let elapsed = started.elapsed();
            let counts = Counts::read(&progress, network.as_deref());
            average.push(elapsed, counts.done_bytes);
            if let Some(lines) = &lines {
                lines.finish(elapsed, counts, average.rate_bytes_per_s());
            }
            if let Some(bar) = bar {
                bar.finish_and_clear();
            }
        });
        ProgressDisplay {
            finished,
            thread: Some(thread),
        }
    }
}

/// Sets the bar's fields, making it (hidden until then) on the first call.
fn draw_bar(
    bar: &mut Option<ProgressBar>,
    label: &str,
    elapsed: Duration,
    counts: Counts,
    rate_bytes_per_s: Option<f64>,
) {
    let new = bar.is_none();
    let bar = bar.get_or_insert_with(|| new_bar(counts.total_bytes));
    if counts.total_bytes > 0 {
        bar.set_length(counts.total_bytes);
    }
    bar.set_position(counts.done_bytes);
    bar.set_prefix(if counts.lost_bytes > 0 {
        format!(
            "{label} LOST {}",
            nvrec::unit::format_bytes(counts.lost_bytes)
        )
    } else if counts.dropped_count > 0 {
        format!("{label} DROPPED {}", counts.dropped_count)
    } else {
        label.to_string()
    });
    let mut message = rate_text(rate_bytes_per_s, counts.done_bytes, counts.total_bytes);
    if counts.total_bytes == 0 {
        message.push_str(&format!(", {}", clock(elapsed.as_secs_f64())));
    }
    bar.set_message(message);
    if new {
        // Drawn from here on, with every field set: never a half-filled frame.
        bar.set_draw_target(ProgressDrawTarget::stderr());
    }
}

/// A bar for a known total, a counter for an open-ended stream (a recording), hidden until
/// its fields are set. The rate and the time left are this module's (the message), not
/// indicatif's estimates.
fn new_bar(total_bytes: u64) -> ProgressBar {
    let length = (total_bytes > 0).then_some(total_bytes);
    let bar = ProgressBar::with_draw_target(length, ProgressDrawTarget::hidden());
    let template = if total_bytes > 0 {
        "{prefix} [{bar:30}] {bytes}/{total_bytes} {msg}"
    } else {
        "{prefix} {spinner} {bytes} {msg}"
    };
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

impl Drop for ProgressDisplay {
    fn drop(&mut self) {
        self.finished.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn ms(value: u64) -> Duration {
        Duration::from_millis(value)
    }

    #[test]
    fn no_rate_is_shown_from_less_than_a_second_however_fast_the_start() {
        let mut window = RateWindow::default();
        // A start that fills a pool at once: 2 GiB in the first 100 ms.
        window.push(ms(0), 0);
        window.push(ms(100), 2048 * MIB);
        assert_eq!(window.rate_bytes_per_s(), None);
        for tick in 2..10 {
            window.push(ms(tick * 100), 2048 * MIB + tick * 10 * MIB);
            assert_eq!(window.rate_bytes_per_s(), None, "at {tick}00 ms");
        }
        // After a second: the burst is measured over the second it took, not 100 ms.
        window.push(ms(1000), 2148 * MIB);
        let rate = window.rate_bytes_per_s().unwrap();
        assert!((rate - 2148.0 * MIB as f64).abs() < 1.0, "{rate}");
    }

    #[test]
    fn the_rate_follows_the_last_seconds_not_the_whole_run() {
        let mut window = RateWindow::default();
        // 10 s at 100 MiB/s, then 10 s at 10 MiB/s, sampled every 100 ms.
        let mut bytes = 0;
        for tick in 0..=200u64 {
            if tick > 0 {
                bytes += if tick <= 100 { 10 * MIB } else { MIB };
            }
            window.push(ms(tick * 100), bytes);
        }
        let rate = window.rate_bytes_per_s().unwrap() / MIB as f64;
        assert!((rate - 10.0).abs() < 0.01, "{rate} MiB/s");
        assert!(window.samples.len() <= 32, "{}", window.samples.len());
        // A steady run: the window's rate is the run's.
        let mut window = RateWindow::default();
        for tick in 0..=100u64 {
            window.push(ms(tick * 100), tick * 5 * MIB);
        }
        let rate = window.rate_bytes_per_s().unwrap() / MIB as f64;
        assert!((rate - 50.0).abs() < 0.01, "{rate} MiB/s");
    }

    #[test]
    fn the_window_begins_when_the_count_first_moves_and_a_stall_reads_as_zero() {
        let mut window = RateWindow::default();
        // Two seconds of setting up, then 10 MiB every 100 ms.
        for tick in 0..=20u64 {
            window.push(ms(tick * 100), 0);
        }
        for tick in 1..=10u64 {
            window.push(ms(2000 + tick * 100), tick * 10 * MIB);
            if tick < 10 {
                assert_eq!(window.rate_bytes_per_s(), None, "{tick}00 ms in");
            }
        }
        let rate = window.rate_bytes_per_s().unwrap() / MIB as f64;
        assert!((rate - 100.0).abs() < 0.01, "{rate} MiB/s");
        // Then nothing for longer than the window: 0, not "unknown".
        for tick in 1..=40u64 {
            window.push(ms(3000 + tick * 100), 100 * MIB);
        }
        assert_eq!(window.rate_bytes_per_s(), Some(0.0));
    }

    #[test]
    fn a_counter_that_goes_back_starts_a_new_window() {
        let mut window = RateWindow::default();
        for tick in 0..=20u64 {
            window.push(ms(tick * 100), tick * MIB);
        }
        assert!(window.rate_bytes_per_s().is_some());
        window.push(ms(2100), 0);
        assert_eq!(window.rate_bytes_per_s(), None);
    }

    fn counts(done_bytes: u64, total_bytes: u64, lost_bytes: u64) -> Counts {
        Counts {
            done_bytes,
            total_bytes,
            lost_bytes,
            dropped_count: 0,
            datagram_count: 0,
        }
    }

    #[test]
    fn lines_say_how_far_how_fast_and_how_long() {
        let line = progress_line(
            "write",
            Duration::from_secs(65),
            counts(1024 * MIB, 4096 * MIB, 0),
            Some(100.0 * MIB as f64),
        );
        assert_eq!(
            line,
            "nvrec write: 1 GiB of 4 GiB (25 %), 100.0 MiB/s, 0:31 left, 1:05 elapsed"
        );
        let line = progress_line(
            "record",
            Duration::from_secs(3600 * 2 + 5),
            counts(512 * MIB, 0, MIB),
            None,
        );
        assert_eq!(
            line,
            "nvrec record: 512 MiB, -- MiB/s, 2:00:05 elapsed, LOST 1 MiB"
        );
    }

    #[test]
    fn the_final_line_gives_the_average_over_the_run() {
        let line = final_line(
            "write",
            Duration::from_secs(41),
            counts(4096 * MIB, 4096 * MIB, 0),
            Some(102.4 * MIB as f64),
        );
        assert_eq!(
            line,
            "nvrec write: finished, 4 GiB of 4 GiB (100 %) in 0:41, 102.4 MiB/s on average"
        );
    }

    #[test]
    fn the_average_runs_from_the_first_movement_to_the_last_whatever_the_last_seconds() {
        let mut average = RunAverage::default();
        // 2 s of setting up, 10 s at 100 MiB/s, 10 s at 10 MiB/s, then 3 s of flushing.
        let mut bytes = 0;
        for tick in 0..=250u64 {
            if (21..=120).contains(&tick) {
                bytes += 10 * MIB;
            } else if (121..=220).contains(&tick) {
                bytes += MIB;
            }
            average.push(ms(tick * 100), bytes);
        }
        let rate = average.rate_bytes_per_s().unwrap() / MIB as f64;
        // 1100 MiB over the 20 s in which it moved: what a report of the run says.
        assert!((rate - 55.0).abs() < 0.01, "{rate} MiB/s");
        // The sliding window, by then, says 0: the two answer different questions.
        let mut window = RateWindow::default();
        let mut bytes = 0;
        for tick in 0..=250u64 {
            if (21..=220).contains(&tick) {
                bytes += MIB;
            }
            window.push(ms(tick * 100), bytes);
        }
        assert_eq!(window.rate_bytes_per_s(), Some(0.0));
    }

    #[test]
    fn the_average_counts_every_run_on_counters_that_start_again() {
        let mut average = RunAverage::default();
        // Two runs of 1 s at 50 MiB/s each, the counter back to 0 between them.
        for tick in 0..=10u64 {
            average.push(ms(tick * 100), tick * 5 * MIB);
        }
        for tick in 1..=10u64 {
            average.push(ms(1000 + tick * 100), tick * 5 * MIB);
        }
        let rate = average.rate_bytes_per_s().unwrap() / MIB as f64;
        assert!((rate - 50.0).abs() < 0.01, "{rate} MiB/s");
        // Less than a second of movement: no average.
        let mut short = RunAverage::default();
        short.push(ms(0), 0);
        short.push(ms(500), 4096 * MIB);
        assert_eq!(short.rate_bytes_per_s(), None);
    }
}
