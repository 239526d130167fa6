//! The documents agree with each other and with the tree: the README's
//! build command for the sample is the one in `examples/sample.c`'s header,
//! and every relative link in the README and `docs/` leads to a file (and,
//! with a `#fragment`, to a heading in it).

use locksuit_tests::workspace_root;
use std::path::{Path, PathBuf};

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `cc …` command that builds `examples/sample.c` in `text`, as words.
fn sample_build_command(text: &str, what: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|l| l.contains("cc ") && l.contains("examples/sample.c"))
        .unwrap_or_else(|| panic!("{what}: no cc command for examples/sample.c"));
    let from_cc = &line[line.find("cc ").unwrap()..];
    let command = from_cc.split("&&").next().unwrap();
    command.split_whitespace().map(str::to_string).collect()
}

#[test]
fn readme_and_the_sample_agree_on_how_to_build_it() {
    let root = workspace_root();
    let readme = sample_build_command(&read(&root.join("README.md")), "README.md");
    let header = sample_build_command(&read(&root.join("examples/sample.c")), "examples/sample.c");
    assert_eq!(readme, header, "README.md and examples/sample.c's header");
    assert!(readme.contains(&"-O1".to_string()), "{readme:?}");
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(markdown: &str) -> Vec<String> {
    let mut in_code = false;
    let mut found = Vec::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            found.push(anchor(line.trim_start_matches('#')));
        }
    }
    found
}

/// The targets of the inline links `[text](target)` in `markdown`.
fn link_targets(markdown: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = markdown;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        if let Some(end) = rest.find(')') {
            targets.push(rest[..end].to_string());
        }
    }
    targets
}

#[test]
fn relative_links_in_the_documents_resolve() {
    let root = workspace_root();
    let mut documents: Vec<PathBuf> = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "md") {
            documents.push(entry.path());
        }
    }
    let mut checked = 0;
    for doc in &documents {
        let text = read(doc);
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, fragment) = match target.split_once('#') {
                Some((file, fragment)) => (file, Some(fragment)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                doc.clone()
            } else {
                doc.parent().unwrap().join(file)
            };
            assert!(
                path.exists(),
                "{}: link to {target}: {} does not exist",
                doc.display(),
                path.display()
            );
            if let Some(fragment) = fragment {
                let headings = anchors(&read(&path));
                assert!(
                    headings.iter().any(|h| h == fragment),
                    "{}: link to {target}: no heading #{fragment} in {} ({headings:?})",
                    doc.display(),
                    path.display()
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 5,
        "the documents link to each other: {checked} links"
    );
}
