//! Names for stripped programs from their separate debug files, found the
//! ways gdb finds them: by build id under a debug directory, by the
//! `.gnu_debuglink` name (beside the program, in `.debug/`, under the debug
//! directory by the program's directory), and from a debuginfod server (a
//! local one here, in a thread). Without any, the report says how to get
//! them; a corrupt debug file or a dead server leaves addresses and a
//! warning, never a failed report.
//!
//! Ground truth: tests/c/stripped.c locks in `bump` at `@bump-lock`.

use locksuit_tests::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

fn tool(program: &str, args: &[&std::ffi::OsStr]) {
    let out = Command::new(program).args(args).output().unwrap();
    assert_success(&out, program);
}

/// stripped.c built with `-g` into `dir/name`, its DWARF split off into
/// `dir/name.debug` (zlib-compressed, as Debian ships it) and the program
/// stripped (`--strip-all` keeps no symbols, so only the debug file can
/// name `bump`). With `link`, the program names its debug file by
/// `.gnu_debuglink` (checked by CRC), made while it sits beside it.
fn split_program(dir: &Path, name: &str, link: bool) -> (PathBuf, PathBuf) {
    split_program_built(dir, name, link, "-O1")
}

fn split_program_built(dir: &Path, name: &str, link: bool, opt: &str) -> (PathBuf, PathBuf) {
    let bin = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-g", opt, "-pthread", "-o"])
        .arg(&bin)
        .arg(c_dir().join("stripped.c"))
        .output()
        .unwrap();
    assert_success(&out, "compiling stripped.c");
    let debug = dir.join(format!("{name}.debug"));
    tool(
        "objcopy",
        &[
            "--only-keep-debug".as_ref(),
            "--compress-debug-sections=zlib".as_ref(),
            bin.as_os_str(),
            debug.as_os_str(),
        ],
    );
    tool("strip", &["--strip-all".as_ref(), bin.as_os_str()]);
    if link {
        let arg = format!("--add-gnu-debuglink={}", debug.display());
        tool("objcopy", &[arg.as_ref(), bin.as_os_str()]);
    }
    (bin, debug)
}

/// The GNU build id of the ELF file at `path`, in hex (from `readelf -n`).
fn build_id(path: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(path)
        .output()
        .unwrap();
    assert_success(&out, "readelf -n");
    stdout_str(&out)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_string))
        .unwrap_or_else(|| panic!("no build id in {}", path.display()))
}

/// A trace of `bin` in a fresh directory under `dir`.
fn record(bin: &Path, dir: &Path, tag: &str) -> PathBuf {
    let traces = dir.join(format!("traces-{tag}"));
    std::fs::create_dir(&traces).unwrap();
    assert_success(&run_under_shim(bin, &[] as &[&str], &traces), "stripped");
    only_trace(&traces)
}

/// `locksuit report --format json` of `trace` with exactly `env` for the
/// debug lookup (an empty debug directory unless given, no servers).
fn report(trace: &Path, env: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new(locksuit_path());
    cmd.args(["report", "--format", "json"])
        .arg(trace)
        .env_remove("LD_PRELOAD")
        .env_remove("LOCKSUIT_DIR")
        .env_remove("DEBUGINFOD_URLS")
        .env("LOCKSUIT_DEBUG_DIRS", "/nonexistent-locksuit-debug")
        .envs(env.iter().copied());
    let out = run_captured(cmd);
    assert_success(&out, "locksuit report");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The site of the lock in `bump`, named and placed, or panics with the
/// report's sites and warnings.
fn assert_named(report: &Value, route: &str) {
    let p = only_process(report);
    let line = line_of("stripped.c", "@bump-lock");
    assert!(
        sites(p)
            .iter()
            .any(|s| site_is_at(s, "bump", "stripped.c", line)),
        "{route}: the site is bump@stripped.c:{line}: {}\nwarnings: {}",
        short(&p["sites"]),
        short(&p["warnings"])
    );
}

fn unnamed_offset(report: &Value) -> String {
    let p = only_process(report);
    let site = &sites(p)[0];
    assert!(site["function"].is_null(), "{}", short(site));
    site["call_chain"][0]["offset"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn warnings(report: &Value) -> Vec<String> {
    arr(only_process(report), "warnings")
        .iter()
        .map(|w| w.as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_debug_file_under_the_build_id_directory_names_the_stripped_program() {
    let dir = fresh_dir("debug_build_id");
    let (bin, debug) = split_program(&dir, "prog", false);
    let id = build_id(&bin);
    let debug_dir = dir.join("debug");
    let by_id = debug_dir
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(by_id.parent().unwrap()).unwrap();
    std::fs::rename(&debug, &by_id).unwrap();
    let trace = record(&bin, &dir, "id");

    // Not looked for there: addresses, and one warning saying how to get names.
    let without = report(&trace, &[]);
    assert!(unnamed_offset(&without).starts_with("prog+0x"), "{without}");
    let hints: Vec<String> = warnings(&without)
        .into_iter()
        .filter(|w| w.contains("no debug information for prog"))
        .collect();
    assert_eq!(hints.len(), 1, "{:?}", warnings(&without));
    assert!(hints[0].contains("DEBUGINFOD_URLS"), "{}", hints[0]);
    assert!(hints[0].contains("LOCKSUIT_DEBUG_DIRS"), "{}", hints[0]);

    let dirs = format!("/nonexistent-first:{}", debug_dir.display());
    let with = report(&trace, &[("LOCKSUIT_DEBUG_DIRS", &dirs)]);
    assert_named(&with, "build id");
    assert!(
        !warnings(&with)
            .iter()
            .any(|w| w.contains("no debug information")),
        "{:?}",
        warnings(&with)
    );

    // A corrupt file in its place: addresses again, and a warning naming it.
    std::fs::write(&by_id, b"not an ELF file at all").unwrap();
    let corrupt = report(&trace, &[("LOCKSUIT_DEBUG_DIRS", &dirs)]);
    assert!(unnamed_offset(&corrupt).starts_with("prog+0x"));
    let said: Vec<String> = warnings(&corrupt)
        .into_iter()
        .filter(|w| w.contains(&by_id.display().to_string()) && w.contains("cannot be used"))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", warnings(&corrupt));
}

/// gdb's three debuglink places, each in its own directory. The file's name
/// is the link's; a file of that name that is another build's debug file
/// (another build id) is passed over. A debug file without a build id is
/// taken by the link's CRC, and passed over when that differs.
#[test]
fn a_gnu_debuglink_is_followed_beside_in_dot_debug_and_under_the_debug_directory() {
    for place in [
        "beside",
        "dot-debug",
        "debug-dir",
        "wrong-build",
        "crc",
        "wrong-crc",
    ] {
        let dir = fresh_dir(&format!("debug_link_{place}"));
        let (bin, debug) = split_program(&dir, "prog", place != "crc");
        let drop_build_id = || {
            tool(
                "objcopy",
                &[
                    "--remove-section=.note.gnu.build-id".as_ref(),
                    debug.as_os_str(),
                ],
            )
        };
        let debug_dir = dir.join("debug");
        let mut env_dirs = debug_dir.display().to_string();
        match place {
            "beside" => {}
            "dot-debug" => {
                std::fs::create_dir(dir.join(".debug")).unwrap();
                std::fs::rename(&debug, dir.join(".debug/prog.debug")).unwrap();
            }
            "debug-dir" => {
                let real_dir = std::fs::canonicalize(&dir).unwrap();
                let under = debug_dir.join(real_dir.strip_prefix("/").unwrap());
                std::fs::create_dir_all(&under).unwrap();
                std::fs::rename(&debug, under.join("prog.debug")).unwrap();
            }
            "wrong-build" => {
                // Another build (-O0) under the linked name.
                let other = fresh_dir("debug_link_other");
                let (_, other_debug) = split_program_built(&other, "prog", false, "-O0");
                std::fs::copy(&other_debug, &debug).unwrap();
                env_dirs = "/nonexistent-locksuit-debug".into();
            }
            "crc" => {
                drop_build_id();
                let arg = format!("--add-gnu-debuglink={}", debug.display());
                tool("objcopy", &[arg.as_ref(), bin.as_os_str()]);
            }
            // Changed after the link was made: its CRC no longer matches.
            "wrong-crc" => drop_build_id(),
            _ => unreachable!(),
        }
        let trace = record(&bin, &dir, place);
        let got = report(&trace, &[("LOCKSUIT_DEBUG_DIRS", &env_dirs)]);
        if place.starts_with("wrong") {
            unnamed_offset(&got);
        } else {
            assert_named(&got, place);
        }
    }
}

/// A debuginfod server in a thread: `GET /buildid/<hex>/debuginfo` answers
/// with the file under `root` of that name, anything else with 404. Serves
/// until the test process ends; returns its URL and a count of requests.
fn debuginfod_server(root: PathBuf) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            // Skip the headers.
            let mut header = String::new();
            while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                header.clear();
            }
            let path = request.split_whitespace().nth(1).unwrap_or("");
            let file = path
                .strip_prefix("/buildid/")
                .and_then(|rest| rest.strip_suffix("/debuginfo"))
                .filter(|id| id.chars().all(|c| c.is_ascii_hexdigit()))
                .and_then(|id| std::fs::read(root.join(id)).ok());
            let mut stream = stream;
            let _ = match file {
                Some(body) => stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .and_then(|_| stream.write_all(&body)),
                None => stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                ),
            };
        }
    });
    (url, asked)
}

#[test]
fn a_debuginfod_server_supplies_the_debug_file_by_build_id_and_it_is_cached() {
    let dir = fresh_dir("debug_debuginfod");
    let (bin, debug) = split_program(&dir, "prog", false);
    let id = build_id(&bin);
    let served = dir.join("served");
    std::fs::create_dir(&served).unwrap();
    std::fs::rename(&debug, served.join(&id)).unwrap();
    let (url, asked) = debuginfod_server(served.clone());
    let trace = record(&bin, &dir, "debuginfod");
    let cache = dir.join("cache");
    let cache_env = cache.display().to_string();
    // A server without it first: the next one is asked.
    let (empty_url, _) = debuginfod_server(dir.join("nothing-here"));
    let urls = format!("{empty_url} {url}");
    let env = [
        ("DEBUGINFOD_URLS", urls.as_str()),
        ("DEBUGINFOD_CACHE_PATH", cache_env.as_str()),
    ];
    assert_named(&report(&trace, &env), "debuginfod");
    let cached = cache.join(&id).join("debuginfo");
    assert!(cached.is_file(), "cached at {}", cached.display());
    let requests = asked.load(std::sync::atomic::Ordering::SeqCst);
    assert!(requests >= 1);

    // The second report reads the cache and asks no server.
    std::fs::remove_file(served.join(&id)).unwrap();
    assert_named(&report(&trace, &env), "debuginfod cache");
    assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), requests);
}

#[test]
fn a_server_that_does_not_answer_leaves_addresses_and_one_warning() {
    let dir = fresh_dir("debug_dead_server");
    let (bin, _debug) = split_program(&dir, "prog", false);
    let trace = record(&bin, &dir, "dead");
    // A port nothing listens on: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let cache = dir.join("cache").display().to_string();
    let got = report(
        &trace,
        &[
            ("DEBUGINFOD_URLS", url.as_str()),
            ("DEBUGINFOD_CACHE_PATH", cache.as_str()),
        ],
    );
    assert!(unnamed_offset(&got).starts_with("prog+0x"));
    let said: Vec<String> = warnings(&got)
        .into_iter()
        .filter(|w| w.contains(&url))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", warnings(&got));
}

/// A server that accepts and never answers costs `$DEBUGINFOD_TIMEOUT`
/// seconds, once: the report goes on without it.
#[test]
fn a_server_that_never_answers_is_given_up_after_the_timeout() {
    let dir = fresh_dir("debug_silent_server");
    let (bin, _debug) = split_program(&dir, "prog", false);
    let trace = record(&bin, &dir, "silent");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        // Keep every connection open, unanswered.
        let held: Vec<_> = listener.incoming().flatten().collect();
        drop(held);
    });
    let cache = dir.join("cache").display().to_string();
    let started = std::time::Instant::now();
    let got = report(
        &trace,
        &[
            ("DEBUGINFOD_URLS", url.as_str()),
            ("DEBUGINFOD_CACHE_PATH", cache.as_str()),
            ("DEBUGINFOD_TIMEOUT", "1"),
        ],
    );
    let took = started.elapsed();
    assert!(took < std::time::Duration::from_secs(10), "took {took:?}");
    assert!(unnamed_offset(&got).starts_with("prog+0x"));
    let said: Vec<String> = warnings(&got)
        .into_iter()
        .filter(|w| w.contains(&url))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", warnings(&got));
}

/// The offset of section `name` in the ELF file at `path` (`readelf -S -W`).
fn section_offset(path: &Path, name: &str) -> u64 {
    let out = Command::new("readelf")
        .args(["-S", "-W"])
        .arg(path)
        .output()
        .unwrap();
    assert_success(&out, "readelf -S");
    stdout_str(&out)
        .lines()
        .filter_map(|l| l.split_once(']').map(|(_, rest)| rest))
        .map(|rest| rest.split_whitespace().collect::<Vec<_>>())
        .find(|fields| fields.first() == Some(&name))
        .map(|fields| u64::from_str_radix(fields[3], 16).unwrap())
        .unwrap_or_else(|| panic!("no {name} in {}", path.display()))
}

/// A debug file that matches (build id) but whose compressed DWARF does not
/// inflate: no lines, the symbols it still has name the function, and the
/// report says which file could not be used.
#[test]
fn a_debug_file_with_damaged_dwarf_gives_no_lines_and_says_so() {
    let dir = fresh_dir("debug_damaged");
    let (bin, debug) = split_program(&dir, "prog", true);
    // Past the compression header (24 bytes) and the zlib header (2).
    let at = section_offset(&debug, ".debug_info") + 26;
    let mut bytes = std::fs::read(&debug).unwrap();
    bytes[at as usize..at as usize + 64].fill(0xff);
    std::fs::write(&debug, bytes).unwrap();
    let trace = record(&bin, &dir, "damaged");
    let got = report(&trace, &[]);
    let p = only_process(&got);
    let site = &sites(p)[0];
    assert!(site["line"].is_null(), "{}", short(site));
    let said: Vec<String> = warnings(&got)
        .into_iter()
        .filter(|w| w.contains(&debug.display().to_string()) && w.contains("cannot be used"))
        .collect();
    assert_eq!(said.len(), 1, "{:?}", warnings(&got));
}
