//! The run history: an SQLite database of run summaries (see
//! `compare.rs`), keyed by executable and a label, so that a run can be
//! compared with the median of the last N runs of the same program, which
//! is far steadier than one baseline.
//!
//! Default place: `$XDG_DATA_HOME/locksuit/history.db`, else
//! `~/.local/share/locksuit/history.db`. The schema is versioned with
//! `PRAGMA user_version`; a database from a newer locksuit is refused, an
//! older one is migrated in one transaction. Every write is one
//! transaction (`BEGIN IMMEDIATE`, waiting up to 10 s for another writer),
//! so two runs saving at once both land and a database is never left
//! half-written.

use crate::input::compare::Summary;
use rusqlite::{params, Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The schema this locksuit writes and reads.
pub const SCHEMA_VERSION: i64 = 1;

/// Where the history lives unless `--history` says otherwise.
pub fn default_path() -> Option<PathBuf> {
    let data = std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))?;
    Some(data.join("locksuit").join("history.db"))
}

/// One saved run.
#[derive(Debug, serde::Serialize)]
pub struct Run {
    pub id: i64,
    pub exe: String,
    pub label: String,
    /// Seconds since 1970 when it was saved, and the same as
    /// `YYYY-MM-DD HH:MM:SS` UTC.
    pub saved_unix: i64,
    pub saved_utc: String,
    #[serde(skip)]
    pub summary: Summary,
}

pub struct History {
    path: PathBuf,
    db: Connection,
}

fn problem(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

/// How long a writer waits for another to finish before giving up.
const BUSY_WAIT: Duration = Duration::from_secs(10);

/// What went wrong with the database at `path` while doing `what`: a lock
/// another process kept past the wait says so (it is not a damaged file).
fn failed(path: &Path, what: &str, e: rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => problem(
            path,
            format!(
                "{what}: another process kept the history database locked for over {} s; nothing was written, try again",
                BUSY_WAIT.as_secs()
            ),
        ),
        _ => problem(path, format!("{what}: {e}")),
    }
}

impl History {
    /// Opens the history at `path`, creating it (and its directory) when
    /// `create` and it is missing.
    pub fn open(path: &Path, create: bool) -> Result<History, String> {
        if !create && !path.exists() {
            return Err(problem(
                path,
                "no run history here (save runs with `report --save`)",
            ));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| problem(dir, e))?;
        }
        let flags = if create {
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        };
        let db = Connection::open_with_flags(path, flags).map_err(|e| problem(path, e))?;
        db.busy_timeout(BUSY_WAIT).map_err(|e| problem(path, e))?;
        let mut history = History {
            path: path.to_path_buf(),
            db,
        };
        history.migrate()?;
        Ok(history)
    }

    fn migrate(&mut self) -> Result<(), String> {
        let path = self.path.clone();
        let err = |e: rusqlite::Error| failed(&path, "not a usable history database", e);
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(err)?;
        if version > SCHEMA_VERSION {
            return Err(problem(
                &path,
                format!(
                    "written by a newer locksuit (history schema {version}; this one reads {SCHEMA_VERSION}); upgrade locksuit"
                ),
            ));
        }
        if version < 1 {
            tx.execute_batch(
                "CREATE TABLE runs (
                    id INTEGER PRIMARY KEY,
                    exe TEXT NOT NULL,
                    label TEXT NOT NULL,
                    saved_unix INTEGER NOT NULL,
                    summary TEXT NOT NULL
                );
                CREATE INDEX runs_by_program ON runs (exe, label, id);
                PRAGMA user_version = 1;",
            )
            .map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    /// Saves the summaries of one run under `label`, all or none.
    pub fn save(&mut self, summaries: &[Summary], label: &str) -> Result<Vec<i64>, String> {
        let path = self.path.clone();
        let err = |e: rusqlite::Error| failed(&path, "cannot save the run", e);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let tx = self
            .db
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let mut ids = Vec::new();
        for s in summaries {
            let json = serde_json::to_string(s).map_err(|e| problem(&path, e))?;
            tx.execute(
                "INSERT INTO runs (exe, label, saved_unix, summary) VALUES (?1, ?2, ?3, ?4)",
                params![s.exe, label, now, json],
            )
            .map_err(err)?;
            ids.push(tx.last_insert_rowid());
        }
        tx.commit().map_err(err)?;
        Ok(ids)
    }

    /// The last `last` saved runs of every program under `label`, oldest
    /// first.
    pub fn last_of_each(&self, label: &str, last: usize) -> Result<Vec<Run>, String> {
        let mut runs = Vec::new();
        for exe in self.programs(label)? {
            runs.extend(self.runs(Some(&exe), Some(label), Some(last))?);
        }
        Ok(runs)
    }

    /// The programs with runs saved under `label`.
    fn programs(&self, label: &str) -> Result<Vec<String>, String> {
        let err = |e: rusqlite::Error| failed(&self.path, "cannot read the history", e);
        let mut query = self
            .db
            .prepare("SELECT DISTINCT exe FROM runs WHERE label = ?1 ORDER BY exe")
            .map_err(err)?;
        let rows = query
            .query_map(params![label], |r| r.get::<_, String>(0))
            .map_err(err)?;
        rows.collect::<Result<Vec<_>, _>>().map_err(err)
    }

    /// The saved runs, oldest first, of `exe` (any if `None`) under
    /// `label` (any if `None`); only the last `last` when given.
    pub fn runs(
        &self,
        exe: Option<&str>,
        label: Option<&str>,
        last: Option<usize>,
    ) -> Result<Vec<Run>, String> {
        let err = |e: rusqlite::Error| failed(&self.path, "cannot read the history", e);
        let mut query = self
            .db
            .prepare(
                "SELECT id, exe, label, saved_unix, summary, datetime(saved_unix, 'unixepoch') FROM runs
                 WHERE (?1 IS NULL OR exe = ?1) AND (?2 IS NULL OR label = ?2)
                 ORDER BY id DESC LIMIT ?3",
            )
            .map_err(err)?;
        let limit = last.map_or(-1, |n| n as i64);
        let rows = query
            .query_map(params![exe, label, limit], |r| {
                Ok((
                    (r.get(0)?, r.get(1)?, r.get(2)?),
                    (r.get(3)?, r.get(5)?),
                    r.get::<_, String>(4)?,
                ))
            })
            .map_err(err)?;
        let mut runs = Vec::new();
        for row in rows {
            let ((id, exe, label), (saved_unix, saved_utc), json) = row.map_err(err)?;
            let summary = serde_json::from_str(&json)
                .map_err(|e| problem(&self.path, format!("run {id} is damaged: {e}")))?;
            runs.push(Run {
                id,
                exe,
                label,
                saved_unix,
                saved_utc,
                summary,
            });
        }
        runs.reverse();
        Ok(runs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(exe: &str) -> Summary {
        Summary {
            exe: exe.into(),
            processes: 1,
            ..Summary::default()
        }
    }

    #[test]
    fn runs_are_saved_listed_and_a_newer_schema_is_refused() {
        let dir = std::env::temp_dir().join(format!("locksuit-history-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub").join("history.db");
        assert!(History::open(&path, false).is_err(), "missing, not created");
        let mut h = History::open(&path, true).unwrap();
        h.save(&[summary("a"), summary("b")], "ci").unwrap();
        h.save(&[summary("a")], "local").unwrap();
        assert_eq!(h.runs(Some("a"), None, None).unwrap().len(), 2);
        assert_eq!(h.runs(Some("a"), Some("ci"), None).unwrap().len(), 1);
        assert_eq!(h.runs(None, None, Some(1)).unwrap()[0].label, "local");
        drop(h);
        let db = Connection::open(&path).unwrap();
        db.execute_batch("PRAGMA user_version = 7").unwrap();
        drop(db);
        let refused = History::open(&path, true).err().unwrap();
        assert!(refused.contains("newer locksuit"), "{refused}");
        std::fs::write(
            dir.join("junk.db"),
            b"this is not a database at all, not even close",
        )
        .unwrap();
        let junk = History::open(&dir.join("junk.db"), false).err().unwrap();
        assert!(junk.contains("junk.db"), "{junk}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
