//! Fitting text to a width: the width itself (`--width`, `$COLUMNS`, the
//! terminal, or a stable default when piped) and prose wrapped at spaces;
//! tables that give up their least important columns, then their grid,
//! rather than split an id, an address or a header word, are in `grid.rs`.
//!
//! Nothing here knows what a report says; `text.rs` decides what goes in.

use std::io::IsTerminal;
use unicode_width::UnicodeWidthStr;

/// The width of text written to a pipe or a file when neither `--width`
/// nor `$COLUMNS` says otherwise: the same on every machine, so reports
/// compare with `diff`.
pub const PIPED_WIDTH: usize = 100;
/// The narrowest width accepted: below it a table row of ids and numbers
/// cannot be read at all.
pub const MIN_WIDTH: usize = 40;
/// The widest width accepted (`--width`, `$COLUMNS`).
pub const MAX_WIDTH: usize = 1000;

/// Where text is going, for the width it gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    Stdout,
    Stderr,
    /// A file named by `--output`: never a terminal.
    File,
}

/// The width to render for: `--width`, else `$COLUMNS`, else the terminal's
/// (when the text goes to one), else [`PIPED_WIDTH`]. A terminal or
/// `$COLUMNS` outside [`MIN_WIDTH`, `MAX_WIDTH`] is brought inside.
pub fn resolve(explicit: Option<usize>, to: Destination) -> usize {
    if let Some(width) = explicit {
        return width;
    }
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&w| w > 0);
    let from_tty = || match to {
        Destination::Stdout => terminal_width(&std::io::stdout()),
        Destination::Stderr => terminal_width(&std::io::stderr()),
        Destination::File => None,
    };
    from_env
        .or_else(from_tty)
        .map_or(PIPED_WIDTH, |w| w.clamp(MIN_WIDTH, MAX_WIDTH))
}

fn terminal_width(stream: &(impl IsTerminal + std::os::fd::AsFd)) -> Option<usize> {
    if !stream.is_terminal() {
        return None;
    }
    terminal_size::terminal_size_of(stream).map(|(w, _)| usize::from(w.0))
}

/// `--width N`: a whole number in [`MIN_WIDTH`, `MAX_WIDTH`].
pub fn parse_width(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of columns, e.g. 80"))?;
    if (MIN_WIDTH..=MAX_WIDTH).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "{n} columns is outside [{MIN_WIDTH}, {MAX_WIDTH}]; a report needs at least {MIN_WIDTH}"
        ))
    }
}

/// Joins the words of one phrase so that wrapping never separates them; see
/// [`wrap_phrases`]. A private-use character, turned back into a space once
/// the lines are made.
pub const GLUE: char = '\u{E000}';

/// A phrase that wrapping keeps on one line ("6 locks (3 families)").
pub fn glued(phrase: &str) -> String {
    phrase.replace(' ', &GLUE.to_string())
}

/// `text` with glued phrases as plain text again, for a line that needed
/// no wrapping.
pub fn unglued(text: &str) -> String {
    text.replace(GLUE, " ")
}

/// Display width of `s` in columns.
pub fn width_of(s: &str) -> usize {
    UnicodeWidthStr::width(s)
}

/// `text` wrapped at spaces to `width` columns, the first line starting
/// with `first`, the others with `rest`. A word is split only when it is
/// wider than a whole line; hyphens are not break points (finding kinds
/// and statuses have them). Ends with a newline.
pub fn wrap(text: &str, width: usize, first: &str, rest: &str) -> String {
    let options = textwrap::Options::new(width)
        .initial_indent(first)
        .subsequent_indent(rest)
        .word_splitter(textwrap::WordSplitter::NoHyphenation)
        .break_words(true);
    let out = wrapped_lines(text, &options);
    if out.is_empty() {
        "\n".to_string()
    } else {
        out
    }
}

/// `text` wrapped by `options`, each line ended, glued spaces let go.
fn wrapped_lines(text: &str, options: &textwrap::Options) -> String {
    let mut out = String::new();
    for line in textwrap::wrap(text, options) {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.replace(GLUE, " ")
}

/// Words of a line that may also break after a `/`: a path wraps at its
/// directories, not inside a name.
fn words_and_directories(line: &str) -> Box<dyn Iterator<Item = textwrap::core::Word<'_>> + '_> {
    let mut rest = line;
    Box::new(std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        // Up to and including the first slash, or the first run of spaces.
        let end = match rest.find(['/', ' ']) {
            Some(i) if rest.as_bytes()[i] == b'/' => i + 1,
            Some(i) => i + rest[i..].find(|c| c != ' ').unwrap_or(rest.len() - i),
            None => rest.len(),
        };
        let (word, tail) = rest.split_at(end);
        rest = tail;
        Some(textwrap::core::Word::from(word))
    }))
}

/// Like [`wrap`], for text with paths in it: lines may also break after a
/// `/`. Phrases glued with [`glued`] stay whole.
pub fn wrap_paths(text: &str, width: usize, first: &str, rest: &str) -> String {
    let options = textwrap::Options::new(width)
        .initial_indent(first)
        .subsequent_indent(rest)
        .word_separator(textwrap::WordSeparator::Custom(words_and_directories))
        .word_splitter(textwrap::WordSplitter::NoHyphenation)
        .break_words(true);
    wrapped_lines(text, &options)
}

/// Phrases joined by `separator`, each kept whole on one line where it fits
/// (one longer than a line is wrapped at its spaces, not cut in a word).
pub fn wrap_phrases(phrases: &[String], separator: &str, width: usize, indent: &str) -> String {
    let room = width.saturating_sub(width_of(indent));
    let glued: Vec<String> = phrases
        .iter()
        .map(|p| {
            if width_of(p) <= room {
                glued(p)
            } else {
                p.clone()
            }
        })
        .collect();
    wrap(&glued.join(separator), width, indent, indent)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The widest line of `text`.
    fn longest(text: &str) -> usize {
        text.lines().map(width_of).max().unwrap_or(0)
    }

    #[test]
    fn prose_wraps_at_spaces_and_keeps_phrases() {
        let text = wrap_phrases(
            &[
                "exited normally".into(),
                "345600 locks (2 families)".into(),
                "4147200 events (every operation)".into(),
            ],
            ", ",
            40,
            "   ",
        );
        assert!(longest(&text) <= 40, "{text}");
        assert!(text.contains("345600 locks (2 families)"), "{text}");
        assert!(text.contains("4147200 events (every operation)"), "{text}");
        let text = wrap_paths(
            &format!("/a/rather/long/path/to/the/program {}", glued("(pid 1234)")),
            24,
            "== ",
            "   ",
        );
        assert_eq!(
            text,
            "== /a/rather/long/path/\n   to/the/program\n   (pid 1234)\n"
        );
        let text = wrap(
            "[unnecessary-lock] four-word-hyphenated-thing here",
            20,
            "",
            "  ",
        );
        assert!(text.contains("[unnecessary-lock]"), "{text}");
    }

    #[test]
    fn widths_come_from_the_option_then_columns() {
        assert_eq!(resolve(Some(77), Destination::Stdout), 77);
        assert!(parse_width("39").is_err());
        assert!(parse_width("wide").is_err());
        assert_eq!(parse_width("80"), Ok(80));
    }
}
