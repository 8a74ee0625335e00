//! A progress bar on stderr for runs longer than a second, drawn from another thread.

use indicatif::{ProgressBar, ProgressStyle};
use nvrec::stream::Progress;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Delay before a bar appears: short runs stay quiet.
const SHOW_AFTER: Duration = Duration::from_secs(1);
const TICK: Duration = Duration::from_millis(100);

pub struct ProgressDisplay {
    finished: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ProgressDisplay {
    /// Starts drawing `progress` under `label` if stderr is a terminal and `enabled`.
    pub fn start(progress: Arc<Progress>, label: String, enabled: bool) -> ProgressDisplay {
        let finished = Arc::new(AtomicBool::new(false));
        if !enabled || !std::io::stderr().is_terminal() {
            return ProgressDisplay {
                finished,
                thread: None,
            };
        }
        let done = Arc::clone(&finished);
        let thread = std::thread::spawn(move || {
            let started = Instant::now();
            let mut bar: Option<ProgressBar> = None;
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
                if started.elapsed() < SHOW_AFTER {
                    continue;
                }
                let total = progress.total_bytes.load(Ordering::Relaxed);
                let bar = bar.get_or_insert_with(|| {
                    // A known total gets a bar; an open-ended stream (a recording) a counter.
                    let (bar, template) = if total > 0 {
                        (
                            ProgressBar::new(total),
                            "{msg} [{bar:40}] {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
                        )
                    } else {
                        (ProgressBar::no_length(), "{msg} {spinner} {bytes} {binary_bytes_per_sec} {elapsed}")
                    };
                    bar.set_style(
                        ProgressStyle::with_template(template)
                            .unwrap_or_else(|_| ProgressStyle::default_bar())
                            .progress_chars("=> "),
                    );
                    bar
                });
                if total > 0 {
                    bar.set_length(total);
                }
                bar.set_position(progress.done_bytes.load(Ordering::Relaxed));
                let lost = progress.lost_bytes.load(Ordering::Relaxed);
                if lost > 0 {
                    bar.set_message(format!("{label} LOST {}", nvrec::unit::format_bytes(lost)));
                } else {
                    bar.set_message(label.clone());
                }
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

impl Drop for ProgressDisplay {
    fn drop(&mut self) {
        self.finished.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
