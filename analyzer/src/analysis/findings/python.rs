//! Advice for locks taken at lines of Python code. A finding at a `.py`
//! line (the site's first own frame is a Python frame, see
//! `input/python.rs`) names the remedies a Python programmer has: less
//! work under `with lock:`, per-thread data (`threading.local`), fewer and
//! larger calls into a library object that locks inside (a `queue.Queue`,
//! a `logging` handler). Never atomics or a lock of another kind: Python
//! code has neither. Other lines keep the C wording.

use super::*;
use crate::model::frames::{is_python_frame, is_python_library};

/// Whether `site` is a line of Python code: its first own frame is a
/// Python frame.
pub fn is_python_site(site: &Site) -> bool {
    site.call_chain
        .get(first_own_frame(&site.call_chain))
        .is_some_and(is_python_frame)
}

/// A lock taken at a Python line, and how: by the program's own code
/// (`with lock:`), or inside a function of Python's library the program
/// called there (`Queue.put (queue.py)`), whose lock the program cannot
/// touch, only how often it calls.
pub(super) struct Py {
    call: Option<String>,
    /// Taken by Python's library on threads it runs itself (a
    /// `ThreadPoolExecutor`'s workers): no line of the program is on the
    /// way; `call` is then the function the thread runs (`_worker
    /// (thread.py)`).
    library_only: bool,
}

/// Frames of `threading.Thread`'s start-up, above the function a thread
/// runs.
fn thread_start_up(f: &Frame) -> bool {
    f.file.as_deref() == Some("threading.py")
        && f.function
            .as_deref()
            .is_some_and(|name| name.starts_with("Thread.") || name == "Thread")
}

fn called(f: &Frame) -> Option<String> {
    Some(format!(
        "{} ({})",
        f.function.as_deref()?,
        f.file.as_deref()?
    ))
}

impl Py {
    /// `Some` when `site` is a Python line.
    pub(super) fn at(site: Option<&Site>) -> Option<Py> {
        let site = site.filter(|s| is_python_site(s))?;
        let chain = &site.call_chain;
        let own = first_own_frame(chain);
        let library_only = chain
            .get(own)
            .and_then(|f| f.path.as_deref())
            .is_some_and(is_python_library);
        if library_only {
            // The outermost Python frame below the thread's start-up: what
            // the library's thread runs.
            let python = chain.iter().take_while(|f| is_python_frame(f));
            let call = python
                .filter(|f| !thread_start_up(f))
                .last()
                .and_then(called);
            return Some(Py { call, library_only });
        }
        // The frame just inside the program's own: the library function
        // it called (the frames further in are that function's helpers).
        let call = own
            .checked_sub(1)
            .and_then(|i| chain.get(i))
            .and_then(called);
        Some(Py { call, library_only })
    }

    /// Where a lock no line of the program takes is taken.
    fn inside_library(&self) -> String {
        match &self.call {
            Some(call) => {
                format!("it is taken by Python's library in {call}, at no line of the program")
            }
            None => "it is taken inside Python's library, at no line of the program".to_string(),
        }
    }

    /// Take it less often.
    fn fewer(&self) -> String {
        if self.library_only {
            return format!(
                "{}; hand it fewer, larger pieces of work (more work in each task submitted or item queued)",
                self.inside_library()
            );
        }
        match &self.call {
            Some(call) => {
                format!("it is taken inside {call}; call that less often, with more work per call")
            }
            None => "do more work under each `with lock:` (add up in a local variable, then once under the lock)".to_string(),
        }
    }

    /// `over-synchronization`'s advice.
    pub(super) fn over_sync(&self) -> String {
        format!(
            "{}, or keep per-thread data (threading.local) and combine it when the threads are done.",
            self.fewer()
        )
    }

    /// `high-contention`'s advice, for one lock or (`them`) several.
    pub(super) fn high_contention(&self, them: bool) -> String {
        let it = if them { "them" } else { "it" };
        match &self.call {
            Some(_) => format!("{}.", self.fewer()),
            None if self.library_only => format!("{}.", self.fewer()),
            None => format!(
                "hold {it} around less work (move what needs no lock out of the `with` block), or guard separate data with separate locks."
            ),
        }
    }

    /// `starvation`'s advice: an unfair lock, or (`scheduling`) threads
    /// that queued for CPUs.
    pub(super) fn starvation(&self, scheduling: bool) -> String {
        // A library's lock cannot be made fair by the program, and calling
        // it less often is not always possible (every `Queue.get` needs its
        // `task_done`): fewer threads sharing the object pass it over less.
        let remedy = match &self.call {
            _ if self.library_only => format!(
                "{}, which the program cannot make fair; fewer threads sharing it leave fewer to pass a thread over",
                self.inside_library()
            ),
            Some(call) => format!("it is taken inside {call}, which the program cannot make fair; fewer threads sharing that object (one per thread, or fewer workers) leave fewer to pass a thread over"),
            None => "hold the lock around less work where the others take it".to_string(),
        };
        if scheduling {
            return format!(
                "With fewer runnable threads than processors, if it still happens, {remedy}."
            );
        }
        match &self.call {
            Some(_) => format!(": the lock is unfair to it; {remedy}."),
            None if self.library_only => format!(": the lock is unfair to it; {remedy}."),
            None => format!(
                ": the lock is unfair to it; {remedy}, or give the data to one thread and send it work through a queue.Queue."
            ),
        }
    }

    /// `single-thread-lock`'s: what may go, for one lock or (`them`)
    /// several.
    pub(super) fn single_thread(&self, them: bool) -> String {
        match (&self.call, them) {
            _ if self.library_only => format!(
                "{}: the program has nothing here to change",
                self.inside_library()
            ),
            (Some(call), _) => format!(
                "the object whose {call} takes it needs no lock: one that takes none can replace it (a collections.deque for a queue.Queue)"
            ),
            (None, false) => {
                "it can go, or the data it guards can be kept per thread (threading.local)"
                    .to_string()
            }
            (None, true) => {
                "they can go, or the data they guard can be kept per thread (threading.local)"
                    .to_string()
            }
        }
    }
}
