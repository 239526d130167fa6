//! `locksuit run`: record a command and its children under the shim.

use crate::input::load::InputError;
use std::ffi::{OsStr, OsString};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicI32, Ordering};

pub struct Recorded {
    pub dir: PathBuf,
    /// The command's exit status, or 128 + signal if a signal killed it.
    pub exit_status: i32,
    /// A deadlock the watcher found (and acted on) while it ran.
    pub deadlock: Option<crate::commands::watch::Detected>,
}

/// `--deadlock-timeout` and `--on-deadlock`.
#[derive(Clone, Copy)]
pub struct DeadlockWatch {
    pub timeout: std::time::Duration,
    pub on_deadlock: crate::commands::watch::OnDeadlock,
}

/// How often the watcher reads the traces.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_millis(200);
/// How long the command has to end once its deadlocked process was stopped,
/// before it is stopped too (no process is left behind).
const GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The shim to preload: `--shim`, `$LOCKSUIT_SHIM`, or `libsyncshim.so`
/// next to this executable (as `cargo build` lays them out).
fn find_shim(explicit: Option<&Path>) -> Result<PathBuf, InputError> {
    let candidate = explicit
        .map(Path::to_path_buf)
        .or_else(|| {
            std::env::var_os("LOCKSUIT_SHIM")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .or_else(|| {
            let exe = std::env::current_exe().ok()?;
            Some(exe.parent()?.join("libsyncshim.so"))
        })
        .ok_or_else(|| InputError("cannot locate libsyncshim.so; pass --shim PATH".into()))?;
    candidate.canonicalize().map_err(|_| {
        InputError(format!(
            "{}: shim not found; build it with `cargo build --release` or pass --shim PATH",
            candidate.display()
        ))
    })
}

/// Creates `dir` with mode 0700 (set explicitly, whatever the umask), and
/// its missing parents as `mkdir -p` would. Returns the directories it
/// made, innermost first (none: `dir` was there already, and is left as it
/// is), so a run that never starts can take them back.
fn create_private_dir(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
    let missing: Vec<&Path> = dir
        .ancestors()
        .filter(|p| !p.as_os_str().is_empty())
        .take_while(|p| !p.exists())
        .collect();
    let mut made = Vec::new();
    for &path in missing.iter().rev() {
        let mut builder = std::fs::DirBuilder::new();
        if path == dir {
            builder.mode(0o700);
        }
        match builder.create(path) {
            Ok(()) => made.push(path.to_path_buf()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
            Err(e) => return Err(e),
        }
    }
    if !dir.is_dir() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "exists and is not a directory",
        ));
    }
    if made.last().is_some_and(|last| last == dir) {
        // The umask may have taken bits off; set them on what we made
        // (opened without following a symlink put in its place).
        let leaf = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
            .open(dir)?;
        leaf.set_permissions(std::fs::Permissions::from_mode(0o700))?;
    }
    made.reverse();
    Ok(made)
}

/// A new `locksuit-run.N` directory in the current directory, mode 0700.
fn fresh_dir() -> Result<PathBuf, InputError> {
    for n in 1..10_000 {
        let dir = PathBuf::from(format!("locksuit-run.{n}"));
        match create_private_dir(&dir) {
            Ok(made) if made.is_empty() => continue,
            Ok(_) => return Ok(dir),
            Err(e) => return Err(InputError(format!("{}: cannot create: {e}", dir.display()))),
        }
    }
    Err(InputError(
        "cannot find a free locksuit-run.N directory name here".into(),
    ))
}

/// The recorded command, once started: where signals to us are forwarded.
static COMMAND_PID: AtomicI32 = AtomicI32::new(0);
/// A signal that came before the command was started, forwarded once it is.
static PENDING_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// The signals `locksuit run` passes on to the command instead of dying.
const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn forward_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
    // Sent by the kernel (Ctrl-C, a terminal hangup), the signal went to the
    // whole foreground process group, the command included: do not double it.
    if unsafe { (*info).si_code } == libc::SI_KERNEL {
        return;
    }
    match COMMAND_PID.load(Ordering::Acquire) {
        // SAFETY: kill is async-signal-safe.
        pid if pid > 0 => unsafe {
            libc::kill(pid, sig);
        },
        _ => PENDING_SIGNAL.store(sig, Ordering::Release),
    }
}

/// Keeps us alive until the command ends and we have reported: a signal
/// from the terminal reaches the command by itself, one sent to us alone
/// (`kill`, a service manager, `timeout`) is passed on to it. A handler
/// (unlike SIG_IGN) is reset to the default in the child by exec.
fn forward_signals() {
    for sig in FORWARDED {
        // SAFETY: installing an async-signal-safe handler (atomics and kill).
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = forward_signal
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// Once the command has ended, signals stop us as usual (e.g. Ctrl-C
/// during a long report).
fn stop_forwarding() {
    COMMAND_PID.store(0, Ordering::Release);
    for sig in FORWARDED {
        // SAFETY: restoring the default action.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

/// The policy at `path`, or its copy in `dir` with its `FILE:LINE` sites
/// resolved in `program`.
fn resolved_policy(path: &Path, program: &OsStr, dir: &Path) -> Result<PathBuf, InputError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| InputError(format!("{}: cannot read the policy: {e}", path.display())))?;
    let exe = crate::input::policy_lines::program_path(Path::new(program))
        .unwrap_or_else(|| PathBuf::from(program));
    match crate::input::policy_lines::resolve(&text, &exe) {
        Ok(None) => Ok(path.to_path_buf()),
        Ok(Some(resolved)) => {
            let copy = dir.join("locksuit.policy");
            std::fs::write(&copy, resolved)
                .map_err(|e| InputError(format!("{}: {e}", copy.display())))?;
            Ok(copy)
        }
        Err(e) => Err(InputError(format!("{}: {e}", path.display()))),
    }
}

pub fn record(
    command: &[OsString],
    (dir, shim): (Option<&Path>, Option<&Path>),
    (policy, lean): (Option<&Path>, bool),
    watch: Option<DeadlockWatch>,
) -> Result<Recorded, InputError> {
    let shim = find_shim(shim)?;
    // The policy's path as the command will see it (it may change directory).
    let policy = match policy {
        Some(p) => Some(
            p.canonicalize()
                .map_err(|e| InputError(format!("{}: cannot read the policy: {e}", p.display())))?,
        ),
        None => None,
    };
    let (program, args) = command
        .split_first()
        .ok_or_else(|| InputError("no command given after `--`".into()))?;
    let (dir, made) = match dir {
        Some(d) => {
            let made = create_private_dir(d)
                .map_err(|e| InputError(format!("{}: cannot create: {e}", d.display())))?;
            (d.to_path_buf(), made)
        }
        None => {
            let dir = fresh_dir()?;
            (dir.clone(), vec![dir])
        }
    };
    // Directories made for a command that never ran are not left behind.
    let give_up = |e: InputError| {
        for made in &made {
            let _ = std::fs::remove_dir(made);
        }
        e
    };
    let abs_dir = dir
        .canonicalize()
        .map_err(|e| give_up(InputError(format!("{}: {e}", dir.display()))))?;
    // Lines named as sites become address ranges of the program, which
    // the shim can match (it reads no line tables): a resolved copy of the
    // policy goes next to the traces.
    let policy = match policy {
        Some(path) => Some(resolved_policy(&path, program, &abs_dir).map_err(give_up)?),
        None => None,
    };
    let mut preload = OsString::from(shim.as_os_str());
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    forward_signals();
    let mut command = Command::new(program);
    command
        .args(args)
        .env("LD_PRELOAD", preload)
        .env("LOCKSUIT_DIR", &abs_dir);
    // The shim's warnings go into the trace, and so into the report, not
    // into the program's stderr (unless the user asked otherwise).
    if std::env::var_os("LOCKSUIT_QUIET").is_none() {
        command.env("LOCKSUIT_QUIET", "1");
    }
    if let Some(policy) = &policy {
        command.env("LOCKSUIT_POLICY", policy);
    }
    if lean {
        command.env("LOCKSUIT_MODE", "lean");
    }
    let mut child = command.spawn().map_err(|e| {
        stop_forwarding();
        give_up(InputError(format!(
            "{}: cannot run: {e}",
            Path::new(program).display()
        )))
    })?;
    COMMAND_PID.store(i32::try_from(child.id()).unwrap_or(0), Ordering::Release);
    let early = PENDING_SIGNAL.swap(0, Ordering::AcqRel);
    if early != 0 {
        // SAFETY: signalling our own child, which we have not reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, early) };
    }
    let (waited, deadlock) = match watch {
        Some(watch) => wait_watching(&mut child, &abs_dir, watch),
        None => (child.wait(), None),
    };
    stop_forwarding();
    let status = waited.map_err(|e| {
        InputError(format!(
            "{}: cannot wait for it: {e}",
            Path::new(program).display()
        ))
    })?;
    let exit_status = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    };
    Ok(Recorded {
        dir,
        exit_status,
        deadlock,
    })
}

/// Waits for the command while watching its traces for a deadlock; a
/// deadlock that persists for the timeout is printed and acted on.
fn wait_watching(
    child: &mut std::process::Child,
    dir: &Path,
    watch: DeadlockWatch,
) -> (
    std::io::Result<std::process::ExitStatus>,
    Option<crate::commands::watch::Detected>,
) {
    use crate::commands::watch::OnDeadlock;
    let mut watcher = crate::commands::watch::Watcher::new(dir, watch.timeout);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return (Ok(status), None),
            Ok(None) => {}
            Err(e) => return (Err(e), None),
        }
        let Some(found) = watcher.poll() else {
            std::thread::sleep(WATCH_EVERY);
            continue;
        };
        eprintln!(
            "locksuit: deadlock in process {} (it has lasted {:.1} s):",
            found.pid,
            watch.timeout.as_secs_f64()
        );
        for text in &found.explanation {
            eprintln!("locksuit: {text}");
        }
        let signal = match watch.on_deadlock {
            OnDeadlock::Kill => Some(libc::SIGKILL),
            OnDeadlock::Abort => Some(libc::SIGABRT),
            OnDeadlock::Keep => None,
        };
        let Some(signal) = signal else {
            eprintln!(
                "locksuit: process {} is left hanging (--on-deadlock keep); attach a debugger, or stop it",
                found.pid
            );
            return (child.wait(), Some(found));
        };
        // SAFETY: signalling the deadlocked process (ours, or our child's).
        unsafe { libc::kill(found.pid as libc::pid_t, signal) };
        // The command ends with it, or is stopped too.
        let deadline = std::time::Instant::now() + GRACE;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return (Ok(status), Some(found)),
                Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(WATCH_EVERY),
                Ok(None) => {
                    let _ = child.kill();
                    return (child.wait(), Some(found));
                }
                Err(e) => return (Err(e), Some(found)),
            }
        }
    }
}
