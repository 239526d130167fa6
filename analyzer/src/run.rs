//! `locksuit run`: record a command and its children under the shim.

use crate::load::InputError;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Recorded {
    pub dir: PathBuf,
    /// The command's exit status, or 128 + signal if a signal killed it.
    pub exit_status: i32,
}

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

extern "C" fn ignore_signal(_: libc::c_int) {}

/// Lets Ctrl-C reach the command but not stop us before we report. A
/// handler (unlike SIG_IGN) is reset to the default in the child by exec.
fn survive_interrupts() {
    for sig in [libc::SIGINT, libc::SIGQUIT] {
        // SAFETY: installing an async-signal-safe no-op handler.
        unsafe {
            libc::signal(
                sig,
                ignore_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            )
        };
    }
}

pub fn record(
    command: &[OsString],
    dir: Option<&Path>,
    shim: Option<&Path>,
) -> Result<Recorded, InputError> {
    let shim = find_shim(shim)?;
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
    let mut preload = OsString::from(shim.as_os_str());
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        preload.push(":");
        preload.push(existing);
    }
    survive_interrupts();
    let status = Command::new(program)
        .args(args)
        .env("LD_PRELOAD", preload)
        .env("LOCKSUIT_DIR", &abs_dir)
        .status()
        .map_err(|e| {
            give_up(InputError(format!(
                "{}: cannot run: {e}",
                Path::new(program).display()
            )))
        })?;
    let exit_status = match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => 1,
    };
    Ok(Recorded { dir, exit_status })
}
