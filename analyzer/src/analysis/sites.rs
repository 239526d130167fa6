//! The sites of the report: what makes two recorded call chains one line
//! of the program's own code, and a site's totals and verdict.

use crate::analysis::sharing::site_status;
use crate::model::frames::first_own_frame;
use crate::model::*;

/// What makes two recorded sites one site of the report: the first frame in
/// the program's own code — its line when known, else its code address.
#[derive(Hash, PartialEq, Eq)]
pub enum SiteKey {
    Line {
        function: Option<String>,
        path: String,
        line: u32,
    },
    Code {
        module: Option<String>,
        address: String,
    },
}

pub fn site_key(chain: &[Frame]) -> SiteKey {
    let Some(own) = chain.get(first_own_frame(chain)) else {
        return SiteKey::Code {
            module: None,
            address: String::new(),
        };
    };
    match (&own.path, own.line) {
        (Some(path), Some(line)) => SiteKey::Line {
            function: own.function.clone(),
            path: path.clone(),
            line,
        },
        _ => SiteKey::Code {
            module: own.module.clone(),
            address: own.offset.clone().unwrap_or_else(|| own.address.clone()),
        },
    }
}

/// A site of the report: line `id`, named and with its call chain, and
/// what was counted there.
pub fn new_site(
    id: SiteId,
    (name, call_chain): (String, Vec<Frame>),
    totals: &mut crate::analysis::locks::SiteTotals,
    threshold: f64,
) -> Site {
    let t = totals.totals;
    let ratio = if t.engagements == 0 {
        0.0
    } else {
        totals.weighted / t.engagements as f64
    };
    let own = call_chain.get(first_own_frame(&call_chain));
    Site {
        id,
        name,
        function: own.and_then(|f| f.function.clone()),
        file: own.and_then(|f| f.file.clone()),
        line: own.and_then(|f| f.line),
        path: own.and_then(|f| f.path.clone()),
        locks: std::mem::take(&mut totals.locks),
        engagements: t.engagements,
        contended: t.contended,
        task_switches: t.task_switches,
        wait_ns: t.wait_ns,
        hold_ns: t.hold_ns,
        wait: None,
        ratio,
        status: site_status(t.engagements, t.task_switches, ratio, threshold),
        sharing_ratio: ratio,
        basis: "sharing",
        suitable_accesses: None,
        unsuitable_accesses: None,
        engagement_ratios: None,
        unsuitable_engagements: None,
        reasons: Vec::new(),
        predicted_gain: None,
        call_chain,
    }
}
