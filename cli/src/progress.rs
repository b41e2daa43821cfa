//! The progress of a long-running command, one way for every command: an indicatif bar on
//! a terminal, and on anything else (a CI log, a pipe) a plain line every 1,024 items and
//! at the end, so that logs stay readable.

use std::sync::Mutex;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};

/// Lines written when stderr is not a terminal: one per this many items.
const LOG_EVERY: usize = 1024;

/// Progress over items (a build's chunks, `put`'s documents), stage by stage (`plan`,
/// `encode`, `put`, ...).
pub struct ProgressDisplay {
    bar: ProgressBar,
    /// What is counted, plural.
    unit: &'static str,
    tty: bool,
    start: Instant,
    /// Chunks done at the last plain line, per stage.
    logged: Mutex<(String, usize)>,
}

impl ProgressDisplay {
    /// A bar over chunks on stderr (hidden when stderr is not a terminal).
    pub fn new() -> Self {
        Self::of("chunks")
    }

    /// A bar over `unit` (plural) on stderr (hidden when stderr is not a terminal).
    pub fn of(unit: &'static str) -> Self {
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(&format!(
                "{{msg:8}} [{{bar:40}}] {{pos}}/{{len}} {unit} {{per_sec}} eta {{eta}}"
            ))
            .expect("a valid template")
            .progress_chars("=> "),
        );
        let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
        ProgressDisplay { bar, unit, tty, start: Instant::now(), logged: Mutex::new((String::new(), 0)) }
    }

    /// `done` of `total` items of `stage` are done.
    pub fn update(&self, stage: &str, done: usize, total: usize) {
        self.bar.set_message(stage.to_string());
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
        if self.tty || total < 2 {
            return;
        }
        let mut logged = self.logged.lock().expect("progress lock");
        if logged.0 != stage {
            *logged = (stage.to_string(), 0);
        }
        if done >= logged.1 + LOG_EVERY || (done == total && logged.1 < total) {
            logged.1 = done;
            let rate = done as f64 / self.start.elapsed().as_secs_f64().max(1e-9);
            eprintln!("{stage}: {done}/{total} {} ({rate:.1}/s)", self.unit);
        }
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
