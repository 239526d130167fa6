//! The module graph of a crate's sources, for the layering tests of the
//! shim and the analyzer (`shim/tests/layering.rs`,
//! `analyzer/tests/layering.rs`, which include this file by path): which
//! module uses which, and the circles among them.
//!
//! A module "uses" another when it names it in a path (`crate::a::b`,
//! `super::b`, `b::` from the parent of `b`, or inside `use x::{…}`).
//! Comments, visibilities (`pub(super)`, `pub(crate)`, `pub(in …)`), the
//! binary's `main.rs` and unit-test code are not uses: tests may drive a
//! crate from its top.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Module path (`recorder::tables::lanes`, `crate` for lib.rs) → source.
pub fn modules(src: &Path) -> BTreeMap<String, String> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("the crate's sources are readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(src)
                .expect("under src")
                .with_extension("");
            let rel = rel.to_string_lossy().replace('/', "::");
            let name = match rel.strip_suffix("::mod") {
                Some(parent) => parent.to_string(),
                None if rel == "lib" => "crate".to_string(),
                None => rel,
            };
            // Unit-test files (`tests.rs`, `x_tests.rs`) and the binary's
            // `main.rs` are not part of the layering.
            let leaf = name.rsplit("::").next().unwrap_or(&name);
            if name == "main" || leaf == "tests" || leaf.ends_with("_tests") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a readable source");
            found.insert(name, without_noise(&text));
        }
    }
    found
}

/// The source without comments, visibility paths and unit-test modules.
pub fn without_noise(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        out.push_str(code);
        out.push('\n');
    }
    // Unit tests sit at the end of their file: `mod tests { … }`, or a
    // `mod tests;` in a file of its own (skipped above).
    for tests in ["#[cfg(test)]\nmod tests", "#[cfg(test)]\n#[path"] {
        if let Some(at) = out.find(tests) {
            out.truncate(at);
        }
    }
    let out = out.replace("pub(super)", "").replace("pub(crate)", "");
    // `pub(in crate::recorder)`: a visibility, not a use.
    let mut kept = String::new();
    let mut rest = out.as_str();
    while let Some(at) = rest.find("pub(in ") {
        kept.push_str(&rest[..at]);
        rest = &rest[at..];
        rest = &rest[rest.find(')').map_or(rest.len(), |p| p + 1)..];
    }
    kept.push_str(rest);
    kept
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path in `code` that starts at `crate`, `super` or `self`, with a
/// `{…}` group expanded one level (`a::{b, c::D}` → `a::b`, `a::c::D`).
fn rooted_paths(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = (i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':')
            && ["crate", "super", "self"].iter().any(|root| {
                let end = i + root.len();
                end <= chars.len()
                    && chars[i..end].iter().collect::<String>() == *root
                    && chars.get(end) == Some(&':')
            });
        if !starts {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut word = String::new();
        while i < chars.len() {
            let c = chars[i];
            if is_ident(c) {
                word.push(c);
                i += 1;
            } else if c == ':' && chars.get(i + 1) == Some(&':') {
                segments.push(std::mem::take(&mut word));
                i += 2;
                if chars.get(i) == Some(&'{') {
                    let close = chars[i..]
                        .iter()
                        .position(|&c| c == '}')
                        .map_or(chars.len(), |p| i + p);
                    let group: String = chars[i + 1..close].iter().collect();
                    for item in group.split(',') {
                        // `c::D as E`: the path is `c::D`.
                        let item = item.split_whitespace().next().unwrap_or("");
                        let mut path = segments.clone();
                        path.extend(
                            item.split("::")
                                .filter(|s| !s.is_empty() && *s != "self" && *s != "*")
                                .map(String::from),
                        );
                        paths.push(path);
                    }
                    i = close;
                    segments.clear();
                    break;
                }
            } else {
                break;
            }
        }
        if !segments.is_empty() {
            if !word.is_empty() {
                segments.push(word);
            }
            paths.push(segments);
        }
    }
    paths
}

/// The module a path names (its longest prefix that is a module).
fn resolve(from: &str, path: &[String], known: &BTreeSet<String>) -> Option<String> {
    let mut base: Vec<String> = if from == "crate" {
        Vec::new()
    } else {
        from.split("::").map(String::from).collect()
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    let mut best = None;
    for take in 1..=rest.len() {
        let mut full = base.clone();
        full.extend(rest[..take].iter().cloned());
        let name = full.join("::");
        if known.contains(&name) {
            best = Some(name);
        }
    }
    best
}

pub fn uses(modules: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    let mut graph = BTreeMap::new();
    for (name, code) in modules {
        let mut to = BTreeSet::new();
        for path in rooted_paths(code) {
            if let Some(target) = resolve(name, &path, &known) {
                to.insert(target);
            }
        }
        // Paths through a child module (`lanes::Lane` in recorder/mod.rs).
        let prefix = if name == "crate" {
            String::new()
        } else {
            format!("{name}::")
        };
        let chars: Vec<char> = code.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            if is_ident(chars[i]) && (i == 0 || !is_ident(chars[i - 1]) && chars[i - 1] != ':') {
                let start = i;
                while i < chars.len() && is_ident(chars[i]) {
                    i += 1;
                }
                if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
                    let mut child =
                        format!("{prefix}{}", chars[start..i].iter().collect::<String>());
                    if known.contains(&child) {
                        // Down a folder: `tables::lanes::init()` in
                        // recorder/mod.rs uses `recorder::tables::lanes`.
                        while chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
                            let from = i + 2;
                            let mut end = from;
                            while end < chars.len() && is_ident(chars[end]) {
                                end += 1;
                            }
                            let deeper =
                                format!("{child}::{}", chars[from..end].iter().collect::<String>());
                            if end == from || !known.contains(&deeper) {
                                break;
                            }
                            child = deeper;
                            i = end;
                        }
                        to.insert(child);
                    }
                }
            } else {
                i += 1;
            }
        }
        to.remove(name);
        to.remove("crate");
        graph.insert(name.clone(), to);
    }
    graph
}

/// Strongly connected components with more than one module (Tarjan).
pub fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    impl<'g> Walk<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in &self.graph[v] {
                let w = w.as_str();
                if !self.graph.contains_key(w) {
                    continue;
                }
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}
