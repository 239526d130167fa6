//! JSON: the model serialised as schema `locksuit.report/1`.

use crate::model::Report;

pub fn render(report: &Report) -> String {
    // The model holds only strings, numbers, bools, options and vectors, so
    // serialisation cannot fail; fall back to an empty object defensively.
    serde_json::to_string_pretty(report).unwrap_or_else(|_| "{}".to_string()) + "\n"
}
