//! A flame graph (SVG) of the stacks under a weight, drawn by the
//! `inferno` crate from the folded lines.

use crate::model::stacks::Weight;
use crate::model::Report;

pub fn write(report: &Report, weight: Weight, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let lines = super::folded::lines(report, weight);
    let mut options = inferno::flamegraph::Options::default();
    options.title = match weight {
        Weight::Wait => "locksuit: time blocked, by call stack",
        Weight::Hold => "locksuit: time locks were held, by call stack",
        Weight::Contentions => "locksuit: contended acquisitions, by call stack",
        Weight::Acquisitions => "locksuit: acquisitions, by call stack",
    }
    .to_string();
    options.count_name = weight.unit().to_string();
    if lines.is_empty() {
        // inferno refuses an empty graph; say why in the picture instead.
        options.subtitle = Some("nothing recorded under this weight".to_string());
        return inferno::flamegraph::from_lines(&mut options, ["(none) 1"], out)
            .map_err(std::io::Error::other);
    }
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(std::io::Error::other)
}
