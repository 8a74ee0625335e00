//! The documents hold together: the README stays a front page (under 150 lines, with the
//! manual in docs/GUIDE.md), and every relative link in the README, the guide and the other
//! documents names a file that exists and, after a `#`, a heading that file has. Links to
//! web addresses are not followed: the tests run without a network.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents whose links are checked, relative to the root.
fn documents() -> Vec<PathBuf> {
    let mut documents: Vec<PathBuf> = [
        "README.md",
        "HACKING.md",
        "ARCHITECTURE.md",
        "bench/README.md",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    let docs = root().join("docs");
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "md") {
            documents.push(path.strip_prefix(root()).unwrap().to_path_buf());
        }
    }
    documents.sort();
    documents
}

/// The lines of a document outside its fenced code blocks.
fn outside_fences(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push(line);
        }
    }
    lines
}

/// The text of a document with fenced code blocks and inline code taken out, so that a
/// bracket in an example is not read as a link.
fn prose(text: &str) -> String {
    let mut out = String::new();
    for line in outside_fences(text) {
        let mut in_code = false;
        for character in line.chars() {
            if character == '`' {
                in_code = !in_code;
            } else if !in_code {
                out.push(character);
            }
        }
        out.push('\n');
    }
    out
}

/// The anchors GitHub makes of a document's headings: lower case, everything but letters,
/// digits, spaces, hyphens and underscores dropped (inline code keeps its text), spaces as
/// hyphens; a repeated heading gets `-1`, `-2` and so on.
fn anchors(text: &str) -> HashSet<String> {
    let mut anchors = HashSet::new();
    for line in outside_fences(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base: String = heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = base.clone();
        let mut repeat = 0;
        while anchors.contains(&anchor) {
            repeat += 1;
            anchor = format!("{base}-{repeat}");
        }
        anchors.insert(anchor);
    }
    anchors
}

/// The targets of the document's `[text](target)` and `![alt](target)` links.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut links = Vec::new();
    let mut rest = prose.as_str();
    while let Some(start) = rest.find("](") {
        rest = &rest[start + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = &rest[..end];
        if !target.contains(char::is_whitespace) {
            links.push(target.to_string());
        }
        rest = &rest[end..];
    }
    links
}

#[test]
fn the_readme_is_a_front_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let line_count = readme.lines().count();
    assert!(
        line_count < 150,
        "README.md has {line_count} lines: it is the front page, the manual is docs/GUIDE.md"
    );
    assert!(
        links(&readme).iter().any(|link| link == "docs/GUIDE.md"),
        "README.md does not link to docs/GUIDE.md"
    );
}

#[test]
fn every_relative_link_in_the_documents_resolves() {
    let mut broken = Vec::new();
    let documents = documents();
    assert!(documents.contains(&PathBuf::from("docs/GUIDE.md")));
    for document in &documents {
        let text = std::fs::read_to_string(root().join(document)).unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = match link.split_once('#') {
                Some((path, fragment)) => (path, Some(fragment)),
                None => (link.as_str(), None),
            };
            let target = if path.is_empty() {
                root().join(document)
            } else {
                root().join(document).parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", document.display()));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if target
                .extension()
                .is_some_and(|extension| extension == "md")
            {
                let target_text = std::fs::read_to_string(&target).unwrap();
                if !anchors(&target_text).contains(fragment) {
                    broken.push(format!(
                        "{}: {link}: {} has no such heading",
                        document.display(),
                        target.strip_prefix(root()).unwrap_or(&target).display()
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# The nvrec guide\n## Export for the field's tools\n## On a board (aarch64)\n\
                ```sh\n# not a heading\n```\n## Reports, ratings and `--json`\n## Set up\n## Set up\n";
    let anchors = anchors(text);
    for anchor in [
        "the-nvrec-guide",
        "export-for-the-fields-tools",
        "on-a-board-aarch64",
        "reports-ratings-and---json",
        "set-up",
        "set-up-1",
    ] {
        assert!(
            anchors.contains(anchor),
            "{anchor} missing from {anchors:?}"
        );
    }
    assert!(!anchors.contains("not-a-heading"));
    assert_eq!(
        links("see [a](docs/A.md#b), `[c](d)` and ![e](images/f.png)\n```\n[g](h)\n```\n"),
        ["docs/A.md#b", "images/f.png"]
    );
}

/// Every source file of every crate, relative to the root (a module's tests kept in a file of
/// their own, `tests.rs`, are its module's).
fn source_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs")
            && path.file_name().is_some_and(|name| name != "tests.rs")
        {
            found.push(path.strip_prefix(root()).unwrap().to_path_buf());
        }
    }
}

/// How ARCHITECTURE.md names a source file: a crate's root by the crate (`crates/nvrec-app/`),
/// a folder module by its folder (`engine/`), any other file by its name (`place.rs`).
fn name_in_map(path: &Path) -> String {
    let file = path.file_name().unwrap().to_str().unwrap();
    let parent = path.parent().unwrap();
    match file {
        "lib.rs" | "main.rs" if parent.ends_with("src") => {
            format!("{}/", parent.parent().unwrap().display())
        }
        "mod.rs" => format!("{}/", parent.file_name().unwrap().to_str().unwrap()),
        _ => file.to_string(),
    }
}

#[test]
fn the_code_map_names_every_crate_and_module() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let crates = root().join("crates");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let source = entry.unwrap().path().join("src");
        if source.is_dir() {
            source_files(&source, &mut files);
        }
    }
    assert!(files.len() > 100, "{} source files found", files.len());
    let unnamed: Vec<String> = files
        .iter()
        .map(|path| (path, name_in_map(path)))
        .filter(|(_, name)| !map.contains(name.as_str()))
        .map(|(path, name)| format!("{} (as {name})", path.display()))
        .collect();
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md's code map does not name: {unnamed:#?}"
    );
}
