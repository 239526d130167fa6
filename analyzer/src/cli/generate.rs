//! `locksuit generate`: man pages and shell completion scripts made from the
//! clap definitions themselves, so they never drift from `--help`. The copies
//! checked in under `docs/man` and `docs/completions` are held to this output
//! by `tests/tests/generated_docs.rs`.

use super::Cli;
use crate::base::exit::{EXIT_OK, EXIT_USAGE};
use clap::{Args, CommandFactory, Subcommand};
use clap_complete::Shell;
use clap_mangen::roff::{bold, roman, Inline, Roff};
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct GenerateArgs {
    // Optional so that a bare `locksuit generate` is answered here: the
    // usage error clap would raise gets the top level's "no command given
    // (report, run or events)", which names the wrong commands.
    #[command(subcommand)]
    what: Option<What>,
}

#[derive(Subcommand)]
enum What {
    /// Write the man pages into DIR: locksuit.1 and one per command (locksuit-report.1, …).
    ///
    /// DIR is created if missing; pages already there are replaced. To install them for
    /// yourself: `locksuit generate man ~/.local/share/man/man1`, then `man locksuit-report`.
    Man {
        /// The directory to write the pages into.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Print a shell's completion script, or write it into --dir.
    ///
    /// With --dir the file gets the name its shell looks for: locksuit.bash, _locksuit,
    /// locksuit.fish, locksuit.elv or _locksuit.ps1. Bash: `locksuit generate completions bash --dir ~/.local/share/bash-completion/completions`.
    /// Zsh: write _locksuit into a directory on $fpath. Fish: `--dir ~/.config/fish/completions`.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum, value_name = "SHELL")]
        shell: Shell,
        /// Write the script into DIR (created if missing) instead of standard output.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

pub(super) fn generate(args: GenerateArgs) -> i32 {
    let Some(what) = args.what else {
        eprintln!(
            "locksuit: error: generate what? `man DIR` or `completions SHELL`\n\
             try 'locksuit generate --help'"
        );
        return EXIT_USAGE;
    };
    let done = match what {
        What::Man { dir } => write_all(&dir, &man_pages()),
        What::Completions { shell, dir } => {
            let (name, script) = completion(shell);
            match dir {
                Some(dir) => write_all(&dir, &[(name, script)]),
                None => {
                    use std::io::Write;
                    // A closed pipe (`| head`) is not an error worth a status.
                    let _ = std::io::stdout().write_all(&script);
                    Ok(())
                }
            }
        }
    };
    match done {
        Ok(()) => EXIT_OK,
        Err(e) => {
            eprintln!("locksuit: {e}");
            EXIT_USAGE
        }
    }
}

fn write_all(dir: &Path, files: &[(String, Vec<u8>)]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    for (name, bytes) in files {
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    Ok(())
}

/// The root command as the binary parses it, built (display names such as
/// `locksuit-report` are set at build time) and without the `help`
/// subcommand, which would only get a page repeating `--help`.
fn root() -> clap::Command {
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    cmd
}

/// A completion script and the file name its shell looks for.
fn completion(shell: Shell) -> (String, Vec<u8>) {
    use clap_complete::Generator;
    let mut cmd = root();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "locksuit", &mut script);
    (shell.file_name("locksuit"), script)
}

/// Every page: the root's and one per visible command, nested commands
/// included (`locksuit-generate-man.1`).
fn man_pages() -> Vec<(String, Vec<u8>)> {
    fn walk(cmd: &clap::Command, parent: Option<&str>, pages: &mut Vec<(String, Vec<u8>)>) {
        pages.push(page(cmd, parent));
        let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            walk(sub, Some(&name), pages);
        }
    }
    let mut pages = Vec::new();
    walk(&root(), None, &mut pages);
    pages
}

/// One page. clap_mangen renders an after-help block line by line into one
/// filled paragraph, which turns the root's aligned tables (finding kinds,
/// environment, exit status) into a run-on blur; so the block is left out
/// of clap_mangen's rendering and set here as sections of tagged paragraphs.
fn page(cmd: &clap::Command, parent: Option<&str>) -> (String, Vec<u8>) {
    let after = cmd
        .get_after_long_help()
        .or(cmd.get_after_help())
        .map(|s| s.to_string());
    // The synopsis clap_mangen derives lists every option without its value
    // (`[--threshold] [--format] …`, eight lines for `report`): use the
    // usage line `--help` prints instead.
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim_start_matches("Usage:").trim().to_string();
    let bare = cmd
        .clone()
        .after_help(None)
        .after_long_help(None)
        .override_usage(usage);
    let man = clap_mangen::Man::new(bare)
        // The default source is the command's own name and version, which a
        // subcommand lacks ("report "): name the program instead.
        .source(format!("locksuit {}", env!("CARGO_PKG_VERSION")))
        .manual("locksuit manual");
    let name = man.get_filename();
    let mut rendered = Vec::new();
    man.render(&mut rendered).expect("rendering into memory");
    let text = String::from_utf8(rendered).expect("clap_mangen writes UTF-8");
    let mut text = polish(&text);

    let mut extra = Roff::new();
    if let Some(after) = &after {
        after_help(&mut extra, after);
    }
    see_also(&mut extra, cmd, parent);
    // Before the VERSION section when there is one, as clap_mangen would
    // place the after-help; else at the end.
    let extra = extra.to_roff();
    match text.find(".SH VERSION") {
        Some(at) => text.insert_str(at, &extra),
        None => text.push_str(&extra),
    }
    (name, text.into_bytes())
}

/// Touches to clap_mangen's roff: no hyphenation (`--thresh-old` and
/// `lock-suit` broken at a line's end read as other words) and a ragged
/// right margin (justified, a line with a long path or option name gapes
/// between its other words), and the help
/// texts' `code spans` in bold, except in NAME, which `whatis` and
/// `apropos` read as plain text. Characters past ASCII (`…`) become groff's
/// `\[u2026]`: `man` converts them itself, but plain `groff -man` does not.
fn polish(roff: &str) -> String {
    let mut out = String::with_capacity(roff.len());
    let mut section = String::new();
    let ascii: String = roff
        .chars()
        .map(|c| {
            if c.is_ascii() {
                c.to_string()
            } else {
                format!("\\[u{:04X}]", c as u32)
            }
        })
        .collect();
    for line in ascii.lines() {
        if let Some(name) = line.strip_prefix(".SH ") {
            section = name.to_string();
        }
        let ticks = line.matches('`').count();
        if line.starts_with('.') || ticks == 0 || ticks % 2 == 1 {
            out.push_str(line);
        } else if section == "NAME" {
            out.push_str(&line.replace('`', ""));
        } else {
            for (i, part) in line.split('`').enumerate() {
                if i > 0 {
                    out.push_str(if i % 2 == 1 { "\\fB" } else { "\\fR" });
                }
                out.push_str(part);
            }
        }
        out.push('\n');
        if line.starts_with(".TH ") {
            out.push_str(".nh\n.ad l\n");
        }
    }
    out
}

/// The root's after-help as man sections: a line ending in `:` at the margin
/// is a section heading; under it, a line indented two columns is a new
/// entry, its term split from its text by the first run of two or more
/// spaces, and deeper lines continue the entry above. An indented line with
/// no such run is prose (continuing prose above it).
fn after_help(roff: &mut Roff, text: &str) {
    enum Entry {
        Tagged(String, String),
        Prose(String),
    }
    fn flush(roff: &mut Roff, entry: Option<Entry>) {
        match entry {
            Some(Entry::Tagged(term, text)) => {
                roff.control("TP", []);
                roff.text(code_spans(&term, true));
                roff.text(code_spans(&text, false));
            }
            Some(Entry::Prose(text)) => {
                roff.control("PP", []);
                roff.text(code_spans(&text, false));
            }
            None => {}
        }
    }
    let mut entry: Option<Entry> = None;
    let mut column = 0;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let body = line.trim();
        if indent == 0 {
            flush(roff, entry.take());
            let heading = body.trim_end_matches(':').to_uppercase();
            roff.control("SH", [heading.as_str()]);
            column = text_column(text, n);
            continue;
        }
        let split = (indent == 2).then(|| term_and_text(line, column)).flatten();
        entry = match (entry.take(), split) {
            (previous, Some((term, text))) => {
                flush(roff, previous);
                Some(Entry::Tagged(term, text))
            }
            (Some(Entry::Tagged(term, text)), None) if indent > 2 => {
                Some(Entry::Tagged(term, format!("{text} {body}")))
            }
            (Some(Entry::Prose(text)), None) => Some(Entry::Prose(format!("{text} {body}"))),
            (previous, None) => {
                flush(roff, previous);
                Some(Entry::Prose(body.to_string()))
            }
        };
    }
    flush(roff, entry);
}

/// The column an entry's text starts at in the section whose heading is
/// line `heading`: that of its continuation lines (0 if it has none).
fn text_column(text: &str, heading: usize) -> usize {
    text.lines()
        .skip(heading + 1)
        .take_while(|l| l.trim().is_empty() || l.starts_with(' '))
        .map(|l| l.len() - l.trim_start().len())
        .find(|&indent| indent > 2)
        .unwrap_or(0)
}

/// An entry line's term and text: split at the section's text column when
/// the term ends just before it (a term may be one space short of it, as
/// `potential-deadlock concrete …`), else at the first run of two spaces (a
/// term too long for the column); `None` for prose.
fn term_and_text(line: &str, column: usize) -> Option<(String, String)> {
    let bytes = line.as_bytes();
    let split = if column > 3
        && bytes.len() > column
        && bytes[column - 1] == b' '
        && bytes[column] != b' '
        && line.is_char_boundary(column)
        && !line[2..column].trim().is_empty()
    {
        Some(line.split_at(column))
    } else {
        let body = &line[2..];
        body.find("  ").map(|at| body.split_at(at))
    };
    split.map(|(term, text)| (term.trim().to_string(), text.trim().to_string()))
}

/// Text with its `code spans` in bold (and the whole of it, for a term).
fn code_spans(text: &str, term: bool) -> Vec<Inline> {
    text.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| {
            if term || i % 2 == 1 {
                bold(part)
            } else {
                roman(part)
            }
        })
        .collect()
}

/// SEE ALSO: a command's page points to its parent's and its own commands',
/// the root's to every command's; and each to the documents in the source tree.
fn see_also(roff: &mut Roff, cmd: &clap::Command, parent: Option<&str>) {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name());
    let mut pages: Vec<String> = parent.map(|p| format!("{p}(1)")).into_iter().collect();
    pages.extend(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| format!("{name}-{}(1)", s.get_name())),
    );
    roff.control("SH", ["SEE ALSO"]);
    if !pages.is_empty() {
        roff.text([bold(pages.join(", "))]);
        roff.control("PP", []);
    }
    roff.text([roman(
        "README.md and docs/commands.md in locksuit's source tree: every command's options, \
         the environment, what a report says (docs/report.md) and the JSON schema \
         (docs/report-schema.md).",
    )]);
}
