//! Where a module's debug information is when the module itself carries none
//! (a stripped distro binary), looked for where gdb looks, in gdb's order:
//! by build id under each debug directory (`.build-id/xx/rest.debug`), by
//! the module's `.gnu_debuglink` name (next to it, in `.debug/` beside it,
//! under `<debug dir>/<its directory>/`), then from the `$DEBUGINFOD_URLS`
//! servers, cached where debuginfod's own client caches (so files gdb
//! fetched are reused, and ours are reused by gdb).
//!
//! Nothing here fails the report: a file that does not match or cannot be
//! read, a server that does not answer, each leaves the module's frames as
//! addresses and says why, once ([`DebugFiles::take_notes`]).

use object::{Object, ObjectSection};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The debug directories when `$LOCKSUIT_DEBUG_DIRS` is not set (gdb's
/// `debug-file-directory`).
const DEFAULT_DEBUG_DIR: &str = "/usr/lib/debug";

/// How long a debuginfod server may take to accept the connection and to
/// start answering (`$DEBUGINFOD_TIMEOUT` overrides it): the report waits
/// on it, and a dead server must not hold it up.
const DEFAULT_SERVER_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a whole download may take.
const DOWNLOAD_LIMIT: Duration = Duration::from_secs(120);

/// A separate file holding a module's DWARF and symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugFile {
    pub path: PathBuf,
    /// The dwz supplementary file its `.gnu_debugaltlink` names, if found.
    pub sup: Option<PathBuf>,
}

/// What the module at a path needs for its debug information.
enum Lookup {
    /// Its own sections (or it cannot be read: the caller finds out).
    Itself,
    Separate(DebugFile),
    /// Nowhere found.
    Missing,
}

pub struct DebugFiles {
    dirs: Vec<PathBuf>,
    servers: Vec<String>,
    cache: Option<PathBuf>,
    timeout: Duration,
    agent: Option<ureq::Agent>,
    lookups: HashMap<String, Lookup>,
    /// Servers that did not answer: not asked again in this report.
    dead_servers: HashSet<String>,
    notes: BTreeSet<String>,
}

impl Default for DebugFiles {
    /// Configured from the environment: `$LOCKSUIT_DEBUG_DIRS` (colon
    /// separated), `$DEBUGINFOD_URLS` (space separated),
    /// `$DEBUGINFOD_CACHE_PATH`, `$XDG_CACHE_HOME`, `$HOME`, `$DEBUGINFOD_TIMEOUT`.
    fn default() -> DebugFiles {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let dirs = var("LOCKSUIT_DEBUG_DIRS")
            .unwrap_or_else(|| DEFAULT_DEBUG_DIR.into())
            .split(':')
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect();
        let servers = var("DEBUGINFOD_URLS")
            .map(|v| {
                v.split_whitespace()
                    .map(|u| u.trim_end_matches('/').to_string())
                    .collect()
            })
            .unwrap_or_default();
        // debuginfod-client's own cache, so each reuses the other's downloads.
        let cache = var("DEBUGINFOD_CACHE_PATH").map(PathBuf::from).or_else(|| {
            var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache")))
                .map(|c| c.join("debuginfod_client"))
        });
        let timeout = var("DEBUGINFOD_TIMEOUT")
            .and_then(|t| t.trim().parse::<u64>().ok())
            .filter(|&t| t > 0)
            .map_or(DEFAULT_SERVER_TIMEOUT, Duration::from_secs);
        DebugFiles {
            dirs,
            servers,
            cache,
            timeout,
            agent: None,
            lookups: HashMap::new(),
            dead_servers: HashSet::new(),
            notes: BTreeSet::new(),
        }
    }
}

/// What a module file says about its debug information.
struct ModuleFacts {
    has_dwarf: bool,
    build_id: Vec<u8>,
    /// `.gnu_debuglink`: the debug file's name and its CRC-32.
    debuglink: Option<(String, u32)>,
}

fn module_facts(path: &str) -> Option<ModuleFacts> {
    let map = map_regular(Path::new(path))?;
    let file = object::File::parse(&*map).ok()?;
    Some(ModuleFacts {
        has_dwarf: has_dwarf(&file),
        build_id: file.build_id().ok().flatten().unwrap_or_default().to_vec(),
        debuglink: file
            .gnu_debuglink()
            .ok()
            .flatten()
            .and_then(|(name, crc)| Some((std::str::from_utf8(name).ok()?.to_string(), crc))),
    })
}

/// Whether `file` holds DWARF of its own (a `.debug_info` with contents; in
/// a file split with `--only-keep-debug` the code's sections are empty, not
/// the DWARF).
fn has_dwarf(file: &object::File) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.file_range().is_some_and(|(_, size)| size > 0))
}

/// A read-only mapping of the regular file at `path` (paths come from the
/// trace and from debug links: a FIFO or device must not be opened).
fn map_regular(path: &Path) -> Option<memmap2::Mmap> {
    std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: a read-only private mapping; a file changed under it can at
    // worst make what is read from it wrong, which parsing checks.
    unsafe { memmap2::Mmap::map(&file) }.ok()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `<dir>/.build-id/xx/rest.debug` for build id `id`.
fn build_id_path(dir: &Path, id: &[u8]) -> Option<PathBuf> {
    let (first, rest) = id.split_first()?;
    (!rest.is_empty()).then(|| {
        dir.join(".build-id")
            .join(format!("{first:02x}"))
            .join(format!("{}.debug", hex(rest)))
    })
}

/// Why the candidate is not the module's debug file, or `None` if it is.
/// `Err` for a file that is not readable ELF (worth telling the user).
enum Verdict {
    Matches,
    Other,
    Unreadable(String),
}

/// Whether the file at `path` is the debug file of a module with build id
/// `id` (when both have one) or whose debuglink CRC is `crc`.
fn verify(path: &Path, id: &[u8], crc: Option<u32>) -> Verdict {
    let Some(map) = map_regular(path) else {
        return Verdict::Other; // absent: the usual case
    };
    let file = match object::File::parse(&*map) {
        Ok(f) => f,
        Err(e) => return Verdict::Unreadable(format!("not an ELF file ({e})")),
    };
    if !has_dwarf(&file) && file.symbols().next().is_none() {
        return Verdict::Unreadable("it holds neither DWARF nor symbols".into());
    }
    let file_id = file.build_id().ok().flatten().unwrap_or_default();
    if !id.is_empty() && !file_id.is_empty() {
        return if file_id == id {
            Verdict::Matches
        } else {
            Verdict::Other
        };
    }
    match crc {
        Some(crc) if crc32fast::hash(&map) == crc => Verdict::Matches,
        _ => Verdict::Other,
    }
}

impl DebugFiles {
    /// The separate debug file of the module at `path`, if it has no DWARF
    /// of its own and one is found (looked up once per path).
    pub fn for_module(&mut self, path: &str) -> Option<&DebugFile> {
        if !self.lookups.contains_key(path) {
            let lookup = self.look_up(path);
            self.lookups.insert(path.to_string(), lookup);
        }
        match &self.lookups[path] {
            Lookup::Separate(file) => Some(file),
            _ => None,
        }
    }

    /// Whether the module at `path` was looked up and no debug information
    /// was found for it anywhere.
    pub fn missing(&self, path: &str) -> bool {
        matches!(self.lookups.get(path), Some(Lookup::Missing))
    }

    /// What went wrong on the way (a file that is not ELF, a server that
    /// did not answer), each once, since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes).into_iter().collect()
    }

    /// The debug directories searched, as the hint names them.
    pub fn dirs_shown(&self) -> String {
        let dirs: Vec<String> = self.dirs.iter().map(|d| d.display().to_string()).collect();
        dirs.join(":")
    }

    fn look_up(&mut self, path: &str) -> Lookup {
        let Some(facts) = module_facts(path) else {
            return Lookup::Itself;
        };
        if facts.has_dwarf {
            return Lookup::Itself;
        }
        let id = facts.build_id;
        let found = self
            .by_build_id(path, &id)
            .or_else(|| self.by_debuglink(path, &id, facts.debuglink.as_ref()))
            .or_else(|| self.fetch_from_servers(path, &id));
        match found {
            Some(debug) => {
                let sup = self.supplementary(&debug);
                Lookup::Separate(DebugFile { path: debug, sup })
            }
            None => Lookup::Missing,
        }
    }

    fn accept(&mut self, module: &str, candidate: &Path, id: &[u8], crc: Option<u32>) -> bool {
        match verify(candidate, id, crc) {
            Verdict::Matches => true,
            Verdict::Other => false,
            Verdict::Unreadable(why) => {
                self.unusable(&candidate.display().to_string(), module, &why);
                false
            }
        }
    }

    /// Notes that the debug file at `debug` for `module` cannot be read.
    pub fn unusable(&mut self, debug: &str, module: &str, why: &str) {
        self.notes.insert(format!(
            "the debug file {debug} for {module} cannot be used ({why}), so its frames lack the names and lines it holds"
        ));
    }

    fn by_build_id(&mut self, module: &str, id: &[u8]) -> Option<PathBuf> {
        let candidates: Vec<PathBuf> = self
            .dirs
            .iter()
            .filter_map(|d| build_id_path(d, id))
            .collect();
        candidates
            .into_iter()
            .find(|c| self.accept(module, c, id, None))
    }

    /// gdb's debuglink places: beside the module, in `.debug/` beside it,
    /// and under each debug directory by the module's directory (both as
    /// recorded and with symbolic links resolved: `/lib` is `/usr/lib`).
    fn by_debuglink(
        &mut self,
        module: &str,
        id: &[u8],
        link: Option<&(String, u32)>,
    ) -> Option<PathBuf> {
        let (name, crc) = link?;
        // A name with a slash could point anywhere; gdb takes base names.
        if name.contains('/') || name.is_empty() {
            return None;
        }
        let recorded = Path::new(module).parent()?.to_path_buf();
        let mut module_dirs = vec![recorded.clone()];
        if let Ok(real) = std::fs::canonicalize(module) {
            if let Some(parent) = real.parent().filter(|p| *p != recorded) {
                module_dirs.push(parent.to_path_buf());
            }
        }
        let mut candidates = Vec::new();
        for dir in &module_dirs {
            candidates.push(dir.join(name));
            candidates.push(dir.join(".debug").join(name));
        }
        for debug_dir in &self.dirs {
            for dir in &module_dirs {
                let relative = dir.strip_prefix("/").unwrap_or(dir);
                candidates.push(debug_dir.join(relative).join(name));
            }
        }
        // The module itself, when it is named like its debug file.
        let module_path = Path::new(module);
        candidates
            .into_iter()
            .filter(|c| c != module_path)
            .find(|c| self.accept(module, c, id, Some(*crc)))
    }

    /// `<server>/buildid/<hex>/debuginfo`, kept in the cache as
    /// `<cache>/<hex>/debuginfo` (debuginfod-client's layout).
    fn fetch_from_servers(&mut self, module: &str, id: &[u8]) -> Option<PathBuf> {
        if id.is_empty() || self.servers.is_empty() {
            return None;
        }
        let hex_id = hex(id);
        let cached = self
            .cache
            .as_ref()
            .map(|c| c.join(&hex_id).join("debuginfo"));
        if let Some(cached) = &cached {
            if self.accept(module, cached, id, None) {
                return Some(cached.clone());
            }
        }
        let Some(cached) = cached else {
            self.notes.insert(
                "DEBUGINFOD_URLS is set but there is no cache directory (set HOME, XDG_CACHE_HOME or DEBUGINFOD_CACHE_PATH)".into(),
            );
            return None;
        };
        for server in self.servers.clone() {
            if self.dead_servers.contains(&server) {
                continue;
            }
            let url = format!("{server}/buildid/{hex_id}/debuginfo");
            match self.download(&url, &cached) {
                Ok(true) => {
                    if self.accept(module, &cached, id, None) {
                        return Some(cached);
                    }
                    let _ = std::fs::remove_file(&cached);
                    self.notes.insert(format!(
                        "{url} answered with a file that is not the debug file of {module} (its build id differs)"
                    ));
                }
                Ok(false) => {} // this server does not have it
                Err(why) => {
                    self.notes.insert(format!(
                        "the debuginfod server {server} could not be used ({why}); it was not asked again"
                    ));
                    self.dead_servers.insert(server);
                }
            }
        }
        None
    }

    /// Downloads `url` into `to` (through a temporary file beside it, so a
    /// cut download never sits in the cache): `Ok(false)` when the server
    /// does not have it, `Err` when it cannot be reached or fails.
    fn download(&mut self, url: &str, to: &Path) -> Result<bool, String> {
        let timeout = self.timeout;
        let agent = self.agent.get_or_insert_with(|| {
            ureq::Agent::config_builder()
                .timeout_connect(Some(timeout))
                .timeout_recv_response(Some(timeout))
                .timeout_global(Some(DOWNLOAD_LIMIT))
                .http_status_as_error(false)
                .build()
                .into()
        });
        let response = agent.get(url).call().map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        if status == 404 {
            return Ok(false);
        }
        if status != 200 {
            return Err(format!("HTTP status {status} for {url}"));
        }
        let dir = to.parent().ok_or("no cache directory")?;
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let partial = dir.join(format!(".debuginfo.{}.partial", std::process::id()));
        let written = (|| -> std::io::Result<()> {
            let mut out = std::fs::File::create(&partial)?;
            std::io::copy(&mut response.into_body().into_reader(), &mut out)?;
            out.flush()?;
            std::fs::rename(&partial, to)
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            format!("downloading {url}: {e}")
        })?;
        Ok(true)
    }

    /// The dwz file the debug file at `debug` shares DWARF with: named by
    /// its `.gnu_debugaltlink` (absolute, or beside the debug file), else
    /// found by its build id like any debug file.
    fn supplementary(&mut self, debug: &Path) -> Option<PathBuf> {
        let (name, alt_id) = {
            let map = map_regular(debug)?;
            let file = object::File::parse(&*map).ok()?;
            let (name, id) = file.gnu_debugaltlink().ok().flatten()?;
            (String::from_utf8_lossy(name).into_owned(), id.to_vec())
        };
        let owner = debug.display().to_string();
        let named = debug.parent().map(|d| d.join(&name)).into_iter();
        let candidates: Vec<PathBuf> = named
            .chain(self.dirs.iter().filter_map(|d| build_id_path(d, &alt_id)))
            .collect();
        let found = candidates
            .into_iter()
            .find(|c| matches!(verify(c, &alt_id, None), Verdict::Matches))
            .or_else(|| self.fetch_from_servers(&owner, &alt_id));
        if found.is_none() {
            self.notes.insert(format!(
                "the supplementary debug file {name} of {owner} was not found; some of its names may be missing"
            ));
        }
        found
    }
}

/// How to get names for `modules` (looked up and found missing), said once
/// for all of them: on Debian, the `-dbgsym` packages of the packages that
/// ship them (`dpkg -S` tells which), and `$DEBUGINFOD_URLS` either way.
pub fn missing_hint(modules: &[&str], debug_dirs: &str) -> Option<String> {
    if modules.is_empty() {
        return None;
    }
    let packages: BTreeSet<String> = modules.iter().filter_map(|m| shipped_by(m)).collect();
    let names = modules
        .iter()
        .map(|m| m.rsplit('/').next().unwrap_or(m))
        .collect::<Vec<_>>()
        .join(", ");
    let install = if packages.is_empty() {
        "build with -g, or put the debug files (objcopy --only-keep-debug) where gdb would find them".to_string()
    } else {
        let dbgsym: Vec<String> = packages.iter().map(|p| format!("{p}-dbgsym")).collect();
        format!(
            "install {} (Debian's debug archive: `deb http://deb.debian.org/debian-debug/ <suite>-debug main`; a few packages ship -dbg instead)",
            dbgsym.join(" ")
        )
    };
    let (its, it) = if modules.len() == 1 {
        ("its", "it")
    } else {
        ("their", "them")
    };
    Some(format!(
        "no debug information for {names}, so {its} frames are module+offset: {install}, or set DEBUGINFOD_URLS (e.g. https://debuginfod.debian.net) to fetch {it} by build id; looked in {debug_dirs} (LOCKSUIT_DEBUG_DIRS) by build id and debug link"
    ))
}

/// The Debian package that ships the file at `path` (by `dpkg -S`, as
/// recorded, then with symbolic links resolved: `/lib` is `/usr/lib` but
/// dpkg knows one of them), without its architecture; `None` off Debian or
/// for files no package ships.
fn shipped_by(path: &str) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    if !real.starts_with("/usr") {
        return None;
    }
    let real = real.to_str()?.to_string();
    [path.to_string(), real].iter().find_map(|p| {
        let out = std::process::Command::new("dpkg")
            .args(["-S", p])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        package_in_dpkg_line(String::from_utf8_lossy(&out.stdout).lines().next()?)
    })
}

/// The first package a `dpkg -S` line names, without its architecture:
/// `pigz: /usr/bin/pigz`, `zlib1g:amd64: /lib/…`, `a, b: /path` (not a
/// `diversion by …` line).
fn package_in_dpkg_line(line: &str) -> Option<String> {
    let (packages, _) = line.split_once(": ")?;
    let first = packages.split(", ").next()?;
    let name = first.split(':').next()?.trim();
    (!name.is_empty() && !name.contains(' ')).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_paths_split_the_first_byte_off() {
        assert_eq!(
            build_id_path(Path::new("/usr/lib/debug"), &[0xab, 0x01, 0xff]),
            Some(PathBuf::from("/usr/lib/debug/.build-id/ab/01ff.debug"))
        );
        assert_eq!(build_id_path(Path::new("/d"), &[0xab]), None);
        assert_eq!(build_id_path(Path::new("/d"), &[]), None);
    }

    #[test]
    fn dpkg_lines_name_the_package_without_its_architecture() {
        let of = package_in_dpkg_line;
        assert_eq!(of("pigz: /usr/bin/pigz").as_deref(), Some("pigz"));
        assert_eq!(
            of("zlib1g:amd64: /lib/x86_64-linux-gnu/libz.so.1").as_deref(),
            Some("zlib1g")
        );
        assert_eq!(
            of("libc6:amd64, libc6:i386: /usr/share/x").as_deref(),
            Some("libc6")
        );
        assert_eq!(of("diversion by dash from: /bin/sh"), None);
        assert_eq!(of("no colon here"), None);
    }

    #[test]
    fn a_module_with_its_own_dwarf_needs_no_debug_file() {
        // This test binary is built with debug = 1: it has .debug_info.
        let exe = std::env::current_exe().unwrap();
        let mut files = DebugFiles::default();
        assert_eq!(files.for_module(exe.to_str().unwrap()), None);
        assert!(!files.missing(exe.to_str().unwrap()));
    }
}
