//! Progress on stderr while a large trace is read: a spinner while its
//! records are read, then a bar over the file while its events are. Shown
//! only when stderr is a terminal; a pipe or a file gets nothing, and so
//! does a terminal a terminal UI (`top`) has taken over.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Set while a terminal UI owns the screen: anything written to stderr
/// would land in the middle of its drawing, which it does not redraw.
static SCREEN_TAKEN: AtomicBool = AtomicBool::new(false);

/// A terminal UI has the screen (`true`) or has given it back (`false`):
/// no progress, nor notes on stderr, meanwhile.
pub fn screen_taken(taken: bool) {
    SCREEN_TAKEN.store(taken, Ordering::Relaxed);
}

/// Whether notes may go to stderr now (no terminal UI owns the screen).
pub fn stderr_free() -> bool {
    !SCREEN_TAKEN.load(Ordering::Relaxed)
}

/// Traces smaller than this are read in well under a second: no progress.
pub const LARGE_TRACE_BYTES: u64 = 32 << 20;

/// Bytes of one event record in the trace; the analysis reports its
/// progress in events.
const EVENT_BYTES: u64 = 64;

/// The progress of reading one trace (nothing at all for a small trace, or
/// when stderr is not a terminal).
pub struct Progress(Option<ProgressBar>);

impl Progress {
    /// Starts showing progress for the trace at `path`, `len` bytes long,
    /// if it is large and stderr is a terminal.
    pub fn for_trace(path: &Path, len: u64) -> Self {
        if len < LARGE_TRACE_BYTES || !std::io::stderr().is_terminal() || !stderr_free() {
            return Progress(None);
        }
        // Drawn only once it says what it is.
        let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix}: {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let name = path.file_name().unwrap_or(path.as_os_str());
        bar.set_prefix(name.to_string_lossy().into_owned());
        bar.set_message("reading records");
        bar.set_draw_target(ProgressDrawTarget::stderr());
        bar.enable_steady_tick(Duration::from_millis(100));
        Progress(Some(bar))
    }

    /// Hidden progress, for traces read some other way.
    pub fn none() -> Self {
        Progress(None)
    }

    /// The analysis has read `events` more events (see
    /// `contention::PROGRESS_EVERY`): the bar moves over the file.
    pub fn events_read(&self, events: u64) {
        let Some(bar) = &self.0 else { return };
        if bar.position() == 0 {
            bar.disable_steady_tick();
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix}: events [{bar:30}] {binary_bytes}/{binary_total_bytes} ({elapsed})",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
        }
        let total = bar.length().unwrap_or(u64::MAX);
        let next = bar.position().saturating_add(events * EVENT_BYTES);
        // The file holds records and headers too: the estimate stops short
        // of the end rather than run past it.
        bar.set_position(next.min(total));
    }

    /// Done with this trace: the progress line goes away.
    pub fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}
