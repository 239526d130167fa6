//! Tables that fit a width: columns ranked by what to give up first, ids
//! and addresses never split, and what was left out said under the table.
//! (Split from `layout.rs`, which fits prose to the width.)

use super::layout::{glued, width_of, wrap, GLUE};
use comfy_table::{
    presets, CellAlignment, ColumnConstraint, ContentArrangement, Table, Width as ColumnWidth,
};

/// How a column's cells may be broken across lines.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Cells {
    /// Never (numbers, durations, addresses, statuses): the column is as
    /// wide as its widest line.
    Whole,
    /// At spaces: each space-separated word (an id, a function name, a
    /// file:line) stays whole.
    Words,
}

/// One column of a [`Grid`].
pub struct Column {
    header: &'static str,
    right: bool,
    cells: Cells,
    /// 0: always shown. Otherwise, when the table does not fit, the column
    /// with the highest number is left out first (the rightmost of equals).
    drop_rank: u8,
}

/// A left-aligned column of whole cells, shown at any width.
pub fn key(header: &'static str) -> Column {
    Column {
        header,
        right: false,
        cells: Cells::Words,
        drop_rank: 0,
    }
}

/// A right-aligned column of figures, never broken.
pub fn figure(header: &'static str, drop_rank: u8) -> Column {
    Column {
        header,
        right: true,
        cells: Cells::Whole,
        drop_rank,
    }
}

/// A left-aligned column of text, broken between words if need be.
pub fn words(header: &'static str, drop_rank: u8) -> Column {
    Column {
        header,
        right: false,
        cells: Cells::Words,
        drop_rank,
    }
}

/// A left-aligned column of cells that are never broken.
pub fn whole(header: &'static str, drop_rank: u8) -> Column {
    Column {
        header,
        right: false,
        cells: Cells::Whole,
        drop_rank,
    }
}

/// One cell of a [`Grid`]: its text, and, where its column's kind does not
/// say it, the pieces of it that must stay whole (ids, which may have
/// spaces of their own).
pub struct Cell {
    text: String,
    units: Option<Vec<String>>,
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell { text, units: None }
    }
}

impl Cell {
    /// Lines each kept whole (ids with spaces of their own, one a line).
    pub fn lines(text: String) -> Self {
        let units = text.lines().map(str::to_string).collect();
        Cell {
            text,
            units: Some(units),
        }
    }

    /// One id, kept whole.
    pub fn id(id: String) -> Self {
        Cell {
            text: id.clone(),
            units: Some(vec![id]),
        }
    }

    /// The narrowest this cell can be in a column of kind `cells`.
    fn least(&self, cells: Cells) -> usize {
        let widest =
            |pieces: &mut dyn Iterator<Item = &str>| pieces.map(width_of).max().unwrap_or(0);
        match (&self.units, cells) {
            (Some(units), _) => widest(&mut units.iter().map(String::as_str)),
            (None, Cells::Whole) => widest(&mut self.text.lines()),
            (None, Cells::Words) => widest(&mut self.text.lines().flat_map(|l| l.split(' '))),
        }
    }

    /// The cell for a block, on one line: pieces that must stay whole are
    /// glued.
    fn glued(&self, cells: Cells) -> String {
        match (&self.units, cells) {
            (Some(units), _) => units.iter().map(|u| glued(u)).collect::<Vec<_>>().join(" "),
            (None, Cells::Whole) => self.text.lines().map(glued).collect::<Vec<_>>().join(" "),
            (None, Cells::Words) => self.text.replace('\n', " "),
        }
    }
}

/// A table that fits a width: a grid when its most important columns fit
/// (less important ones are left out, and said so), else one block per
/// row, its first cell on a line of its own.
pub struct Grid {
    columns: Vec<Column>,
    rows: Vec<Vec<Cell>>,
}

/// What a column costs beyond its content: a space of padding and the
/// separator before the next column (or, for the last, a space of padding).
const PADDING: usize = 2;
/// The two side borders.
const BORDERS: usize = 2;

impl Grid {
    pub fn new(columns: Vec<Column>) -> Self {
        Grid {
            columns,
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<Cell>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        self.rows.push(cells);
    }

    /// The narrowest column `c` can be without breaking what must stay whole.
    fn least_width(&self, c: usize) -> usize {
        let column = &self.columns[c];
        let header = column.header.split(' ').map(width_of).max().unwrap_or(0);
        let cells = self.rows.iter().map(|row| row[c].least(column.cells));
        cells.fold(header, usize::max).max(1)
    }

    /// Renders the grid for `width` columns, ending with a newline.
    pub fn render(&self, width: usize) -> String {
        let least: Vec<usize> = (0..self.columns.len())
            .map(|c| self.least_width(c))
            .collect();
        let needed = |shown: &[bool]| {
            BORDERS
                + (0..least.len())
                    .filter(|&c| shown[c])
                    .map(|c| least[c] + PADDING)
                    .sum::<usize>()
        };
        // A column no row has anything in is not shown (nor said to be
        // left out).
        let empty: Vec<bool> = (0..self.columns.len())
            .map(|c| !self.rows.is_empty() && self.rows.iter().all(|r| r[c].text.is_empty()))
            .collect();
        let mut shown: Vec<bool> = empty.iter().map(|e| !e).collect();
        let full = needed(&shown);
        while needed(&shown) > width {
            let next = (0..self.columns.len())
                .filter(|&c| shown[c] && self.columns[c].drop_rank > 0)
                .max_by_key(|&c| (self.columns[c].drop_rank, c));
            match next {
                Some(c) => shown[c] = false,
                None => return self.blocks(width),
            }
        }
        // A narrow column left out on the way may fit again after a wide
        // one went: the more important first.
        let mut dropped: Vec<usize> = (0..self.columns.len())
            .filter(|&c| !shown[c] && !empty[c])
            .collect();
        dropped.sort_by_key(|&c| (self.columns[c].drop_rank, c));
        for c in dropped {
            shown[c] = true;
            if needed(&shown) > width {
                shown[c] = false;
            }
        }
        let widths = self.share_out(&least, &shown, width.saturating_sub(needed(&shown)));
        let table = self.table(&widths, &shown, width);
        if table.lines().any(|l| width_of(l) > width) {
            // The arrangement did not keep to the width after all.
            return self.blocks(width);
        }
        let mut out = table;
        out.push('\n');
        let left_out: Vec<&str> = (0..self.columns.len())
            .filter(|&c| !shown[c] && !empty[c])
            .map(|c| self.columns[c].header)
            .collect();
        if !left_out.is_empty() {
            let note = format!(
                "(left out at this width: {}; --width {full} shows them)",
                left_out.join(", ")
            );
            out.push_str(&wrap(&note, width, "   ", "   "));
        }
        out
    }

    /// How wide each cell of column `c` (the header too) is on one line.
    fn cell_widths(&self, c: usize) -> Vec<usize> {
        let cells = self
            .rows
            .iter()
            .map(|row| row[c].text.lines().map(width_of).max().unwrap_or(0));
        std::iter::once(width_of(self.columns[c].header))
            .chain(cells)
            .collect()
    }

    /// Each shown column's width: at least `least`, with `spare` columns
    /// more given out where they spare the most cells a broken line: each
    /// step widens the one column that unbreaks the most cells per column
    /// it takes.
    fn share_out(&self, least: &[usize], shown: &[bool], mut spare: usize) -> Vec<usize> {
        let mut widths = least.to_vec();
        let cells: Vec<Vec<usize>> = (0..least.len())
            .map(|c| {
                if shown[c] {
                    self.cell_widths(c)
                } else {
                    Vec::new()
                }
            })
            .collect();
        loop {
            // (cells unbroken per column taken, columns taken, column)
            let mut best: Option<(f64, usize, usize)> = None;
            for (c, widths_here) in cells.iter().enumerate() {
                let now = widths[c];
                let broken_at = |w: usize| widths_here.iter().filter(|&&x| x > w).count();
                for &target in widths_here.iter().filter(|&&w| w > now && w - now <= spare) {
                    let gain = broken_at(now) - broken_at(target);
                    let rate = gain as f64 / (target - now) as f64;
                    if best
                        .is_none_or(|(r, cost, _)| rate > r || (rate == r && target - now < cost))
                    {
                        best = Some((rate, target - now, c));
                    }
                }
            }
            match best {
                Some((_, cost, c)) => {
                    widths[c] += cost;
                    spare -= cost;
                }
                None => return widths,
            }
        }
    }

    fn table(&self, widths: &[usize], shown: &[bool], width: usize) -> String {
        let mut t = Table::new();
        t.load_preset(presets::UTF8_BORDERS_ONLY)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(u16::try_from(width).unwrap_or(u16::MAX))
            .set_header(self.columns.iter().map(|c| c.header).collect::<Vec<_>>());
        for row in &self.rows {
            t.add_row(row.iter().map(|c| c.text.as_str()).collect::<Vec<_>>());
        }
        // Columns are set apart by the preset's blank separator and one
        // space of padding on their left; the last one has one on its
        // right, before the border too: two columns per column in all.
        let last_shown = shown.iter().rposition(|&s| s);
        for (c, column) in self.columns.iter().enumerate() {
            let Some(col) = t.column_mut(c) else { continue };
            if column.right {
                col.set_cell_alignment(CellAlignment::Right);
            }
            let padding = if Some(c) == last_shown {
                (1, 1)
            } else {
                (1, 0)
            };
            col.set_padding(padding);
            let constraint = if shown[c] {
                let width = widths[c] + usize::from(padding.0 + padding.1);
                let width = u16::try_from(width).unwrap_or(u16::MAX);
                ColumnConstraint::Absolute(ColumnWidth::Fixed(width))
            } else {
                ColumnConstraint::Hidden
            };
            col.set_constraint(constraint);
        }
        t.to_string()
    }

    /// One block per row: its first cell on a line of its own, then the
    /// other cells as "header value" pairs, wrapped, each pair whole.
    fn blocks(&self, width: usize) -> String {
        const INDENT: &str = "       ";
        let room = width.saturating_sub(INDENT.len());
        let mut out = String::new();
        for row in &self.rows {
            // The label indented if it fits so, flush left if only that way.
            let label = glued(&row[0].text.replace('\n', " "));
            let indent = if width_of(&label) + 3 <= width {
                "   "
            } else {
                ""
            };
            out.push_str(&wrap(&label, width, indent, indent));
            let mut text = String::new();
            for (column, cell) in self.columns.iter().zip(row).skip(1) {
                if cell.text.is_empty() {
                    continue;
                }
                let units = cell.glued(column.cells);
                let header = glued(column.header);
                // The header with its value if they fit a line together,
                // else with its first unit if that fits, else apart.
                let first = units.split(' ').next().unwrap_or("");
                let together = |value: &str| width_of(&header) + 1 + width_of(value) <= room;
                let pair = if together(&units) {
                    glued(&format!("{header} {units}"))
                } else if together(first) {
                    format!("{header}{GLUE}{units}")
                } else {
                    format!("{header} {units}")
                };
                if !text.is_empty() {
                    text.push_str("   ");
                }
                text.push_str(&pair);
            }
            out.push_str(&wrap(&text, width, INDENT, INDENT));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn longest(text: &str) -> usize {
        text.lines().map(width_of).max().unwrap_or(0)
    }

    fn sample_grid(label: &str) -> Grid {
        let mut g = Grid::new(vec![
            key("lock"),
            whole("address", 3),
            figure("acquired", 0),
            figure("contended", 0),
            words("sites", 2),
            figure("hold (timed)", 1),
        ]);
        g.row(vec![
            Cell::id(label.to_string()),
            "0x55ccb4dfe140".to_string().into(),
            "80000".to_string().into(),
            "10037".to_string().into(),
            "S1 S2 S5".to_string().into(),
            "2.61 ms (10037)".to_string().into(),
        ]);
        g
    }

    #[test]
    fn wide_enough_shows_every_column_unbroken() {
        let text = sample_grid("L3").render(100);
        assert!(longest(&text) <= 100, "{text}");
        for whole in ["0x55ccb4dfe140", "contended", "2.61 ms (10037)", "S1 S2 S5"] {
            assert!(text.contains(whole), "{whole} in\n{text}");
        }
        assert!(!text.contains("left out"), "{text}");
    }

    #[test]
    fn narrow_leaves_out_columns_by_rank_and_says_so() {
        let text = sample_grid("L3").render(50);
        assert!(longest(&text) <= 50, "{text}");
        assert!(!text.contains("0x55ccb4dfe140"), "{text}");
        assert!(text.contains("left out at this width: address"), "{text}");
        assert!(
            text.contains("80000") && text.contains("contended"),
            "{text}"
        );
    }

    #[test]
    fn a_long_id_is_never_split() {
        let id = "count_own_item@sample.c:53#2";
        let text = sample_grid(id).render(60);
        assert!(longest(&text) <= 60, "{text}");
        assert!(text.contains(id), "{text}");
        // Too long for any grid: the row becomes a block, the id whole.
        let id = "a_very_long_function_name_in_a_namespace@some_file.cc:1234";
        let text = sample_grid(id).render(60);
        assert!(longest(&text) <= 60, "{text}");
        assert!(text.contains(id), "{text}");
        assert!(text.contains("acquired 80000"), "{text}");
    }

    #[test]
    fn an_id_with_spaces_is_never_broken() {
        let id = "std::map<int, int>::lock@m.cc:12";
        let mut g = Grid::new(vec![key("lock"), figure("acquired", 0), words("sites", 1)]);
        g.row(vec![
            Cell::id(id.to_string()),
            "5".to_string().into(),
            Cell::lines(format!("{id}\nother@x.cc:1")),
        ]);
        for width in [40, 50, 60, 100] {
            let text = g.render(width);
            assert!(longest(&text) <= width, "{width}:\n{text}");
            let starts: Vec<&str> = text.lines().filter(|l| l.contains("std::map<")).collect();
            assert!(!starts.is_empty(), "{width}:\n{text}");
            assert!(
                starts.iter().all(|l| l.contains(id)),
                "{width}: the id whole wherever it is:\n{text}"
            );
        }
    }
}
