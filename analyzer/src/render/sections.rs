//! A table of the text report under its title, and the line saying what it
//! left out: every section of the report reads the same.

use super::grid::Grid;
use super::layout::wrap;

/// Rows a table shows, largest first, before "… and N more".
pub const TABLE_ROWS: usize = 20;

/// A table under its title, then the line saying what it left out.
pub fn section(
    out: &mut String,
    title: &str,
    grid: &Grid,
    hidden: usize,
    what: &str,
    width: usize,
) {
    out.push_str(&wrap(title, width, "", ""));
    out.push_str(&grid.render(width));
    more(out, hidden, what, width);
    out.push('\n');
}

/// The line under a table or list that left rows out.
pub fn more(out: &mut String, hidden: usize, what: &str, width: usize) {
    if hidden > 0 {
        let line = format!("… and {hidden} more {what} (--format json lists every one)");
        out.push_str(&wrap(&line, width, "   ", "   "));
    }
}
