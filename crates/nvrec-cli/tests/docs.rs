//! The documents hold together: the README stays a front page (under 150 lines, with the
//! manual in docs/GUIDE.md), and every relative link in the README, the guide and the other
//! documents names a file that exists and, after a `#`, a heading that file has. Links to
//! web addresses are not followed: the tests run without a network.
//!
//! And they are held to the binary: every `nvrec COMMAND ... --option` the README and the
//! guide write (in shell blocks and inline code) names a command and options the built
//! binary's `--help` lists, and the guide names every option of `record`, each `bench`,
//! `selftest`, `write` and `read` beside the command.

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

/// The texts between backticks in `cell`.
fn ticked(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// Whether Rust `source` defines a struct, enum or type alias `name`.
fn defines(source: &str, name: &str) -> bool {
    ["struct", "enum", "type"].iter().any(|kind| {
        source
            .match_indices(&format!("{kind} {name}"))
            .any(|(at, found)| {
                let next = source[at + found.len()..].chars().next();
                !next.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
    })
}

/// ARCHITECTURE.md's table of the writer's stages holds to the code: every file a row names
/// exists, the stage is a struct in one of them, and every type the row says it owns is
/// defined in the library.
#[test]
fn the_writer_stage_table_names_what_the_code_has() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let table = map
        .find("| stage | owns | file |")
        .expect("the stage table");
    let rows: Vec<&str> = map[table..]
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .collect();
    assert!(rows.len() >= 6, "{rows:#?}");
    let recording = root().join("crates/nvrec/src/recording");
    let mut library = Vec::new();
    source_files(&root().join("crates/nvrec/src"), &mut library);
    let library: String = library
        .iter()
        .map(|path| std::fs::read_to_string(root().join(path)).unwrap())
        .collect();
    for row in rows {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (stage, owns, files) = (ticked(cells[1])[0], cells[2], ticked(cells[3]));
        let source: String = files
            .iter()
            .map(|file| {
                let path = recording.join(file);
                std::fs::read_to_string(&path)
                    .unwrap_or_else(|_| panic!("{stage}: no {}", path.display()))
            })
            .collect();
        assert!(
            defines(&source, stage),
            "{stage} is not a struct of {files:?}"
        );
        for name in ticked(owns) {
            let bare = name.starts_with(|c: char| c.is_ascii_uppercase())
                && name.chars().all(|c| c.is_alphanumeric());
            if bare {
                assert!(
                    defines(&library, name),
                    "{stage} owns {name}, which is nowhere"
                );
            }
        }
    }
}

/// Every room of the writer and of the reader (a file of `recording/writer/` or
/// `recording/reader/`) has tests of its own, and ARCHITECTURE.md names it.
#[test]
fn every_writer_and_reader_room_has_tests_of_its_own_and_is_named() {
    let map = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut rooms = 0;
    for part in ["writer", "reader"] {
        let dir = root().join("crates/nvrec/src/recording").join(part);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_string();
            let source = std::fs::read_to_string(&path).unwrap();
            assert!(
                source.contains("#[test]"),
                "{part}/{name} has no test of its own"
            );
            assert!(
                map.contains(&format!("`{name}`")) || map.contains(&format!("{part}/{name}")),
                "ARCHITECTURE.md does not name {part}/{name}"
            );
            rooms += 1;
        }
    }
    assert!(rooms >= 20, "{rooms} rooms");
}

/// A piece of a document where commands are written: a line of a shell block (with its
/// continuation lines), or an inline code span; with the line it starts on.
struct Piece {
    document: &'static str,
    line_number: usize,
    text: String,
}

/// The lines of a shell block that are commands: all of a `sh` or `bash` block, only the
/// `$ ` lines of any other (a command shown with its output); a line ending in `\` goes on
/// to the next.
fn shell_pieces(document: &'static str, text: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut fence: Option<bool> = None; // Some(whether every line is a command)
    let mut pending: Option<Piece> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(language) = trimmed.strip_prefix("```") {
            fence = match fence {
                Some(_) => None,
                None => Some(matches!(language.trim(), "sh" | "bash" | "shell")),
            };
            continue;
        }
        let Some(all_commands) = fence else { continue };
        let command = match (&pending, all_commands) {
            (Some(_), _) | (None, true) => trimmed,
            (None, false) => match trimmed.strip_prefix("$ ") {
                Some(command) => command,
                None => continue,
            },
        };
        let (body, continued) = match command.strip_suffix('\\') {
            Some(body) => (body, true),
            None => (command, false),
        };
        let piece = pending.get_or_insert_with(|| Piece {
            document,
            line_number: index + 1,
            text: String::new(),
        });
        piece.text.push(' ');
        piece.text.push_str(&strip_comment(body));
        if !continued {
            pieces.extend(pending.take().filter(|piece| !piece.text.trim().is_empty()));
        }
    }
    pieces
}

/// A shell line without its comment: from a `#` that starts a word, outside quotes.
fn strip_comment(line: &str) -> String {
    let mut quote: Option<char> = None;
    let mut previous = ' ';
    for (at, character) in line.char_indices() {
        match (quote, character) {
            (Some(open), _) if character == open => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(character),
            (None, '#') if previous.is_whitespace() => return line[..at].to_string(),
            _ => {}
        }
        previous = character;
    }
    line.to_string()
}

/// The inline code spans of a document's prose (outside fenced blocks), a span that wraps
/// onto the next line taken whole, and `\|` (a pipe in a table) as `|`.
fn inline_pieces(document: &'static str, text: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut fenced = false;
    let mut open: Option<Piece> = None;
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            open = None;
            continue;
        }
        if fenced {
            continue;
        }
        if line.trim().is_empty() {
            open = None; // A span never crosses a paragraph.
            continue;
        }
        let mut rest = line;
        loop {
            match open.as_mut() {
                Some(span) => match rest.find('`') {
                    Some(end) => {
                        span.text.push_str(&rest[..end]);
                        rest = &rest[end + 1..];
                        let mut span = open.take().unwrap();
                        span.text = span.text.replace("\\|", "|");
                        pieces.push(span);
                    }
                    None => {
                        span.text.push_str(rest);
                        span.text.push(' ');
                        break;
                    }
                },
                None => match rest.find('`') {
                    Some(start) => {
                        rest = &rest[start + 1..];
                        open = Some(Piece {
                            document,
                            line_number: index + 1,
                            text: String::new(),
                        });
                    }
                    None => break,
                },
            }
        }
    }
    pieces
}

/// A shell word or an operator (`|`, `;`, `&`, `(`, `)`, `<`, `>`, `$(`).
#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Operator,
}

/// Splits a command line into words (quotes taken off) and operators.
fn tokens(line: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    let mut characters = line.chars().peekable();
    while let Some(character) = characters.next() {
        if let Some(open) = quote {
            if character == open {
                quote = None;
            } else {
                word.get_or_insert_with(String::new).push(character);
            }
            continue;
        }
        match character {
            '\'' | '"' => {
                quote = Some(character);
                word.get_or_insert_with(String::new);
            }
            '$' if characters.peek() == Some(&'(') => {
                characters.next();
                tokens.extend(word.take().map(Token::Word));
                tokens.push(Token::Operator);
            }
            '|' | ';' | '&' | '(' | ')' | '<' | '>' => {
                tokens.extend(word.take().map(Token::Word));
                tokens.push(Token::Operator);
            }
            _ if character.is_whitespace() => tokens.extend(word.take().map(Token::Word)),
            _ => word.get_or_insert_with(String::new).push(character),
        }
    }
    tokens.extend(word.take().map(Token::Word));
    tokens
}

/// Every `nvrec ...` of a line: the words after `nvrec` up to the next operator, where
/// `nvrec` is in a command's place (first, after an operator, a variable set for it or
/// `sudo`), not an argument (`cargo bench -p nvrec`).
fn invocations(line: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut current: Option<Vec<String>> = None;
    let mut command_place = true;
    for token in tokens(line) {
        match token {
            Token::Word(word) if word == "nvrec" && command_place => {
                current = Some(Vec::new());
                command_place = false;
            }
            Token::Word(word) => {
                command_place = command_place
                    && (word == "sudo" || (word.contains('=') && !word.starts_with('-')));
                if let Some(words) = current.as_mut() {
                    words.push(word);
                }
            }
            Token::Operator => {
                found.extend(current.take());
                command_place = true;
            }
        }
    }
    found.extend(current);
    found
}

/// What the built binary's `--help` says of a command: its options (with their visible
/// aliases) and its subcommands.
#[derive(Default)]
struct Help {
    options: HashSet<String>,
    subcommands: Vec<String>,
}

fn help(command: &[String]) -> Help {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_nvrec"))
        .args(command)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "nvrec {} --help: {}",
        command.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout).unwrap();
    let mut found = Help::default();
    let mut in_commands = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if line == "Commands:" {
            in_commands = true;
            continue;
        }
        if in_commands {
            match trimmed.split_whitespace().next() {
                Some(name) if line.starts_with("  ") => {
                    if name != "help" {
                        found.subcommands.push(name.to_string());
                    }
                    continue;
                }
                _ => in_commands = false,
            }
        }
        if trimmed.starts_with('-') {
            // `-h, --help`, `--size <BYTES>`: the names before the value or the description.
            let words = trimmed.split([' ', ',']).filter(|word| !word.is_empty());
            for word in words.take_while(|word| word.starts_with('-')) {
                let name = word.split(['=', '<', '[']).next().unwrap();
                if name.starts_with("--") {
                    found.options.insert(name.to_string());
                }
            }
        }
        if let Some(at) = line.find("[aliases: ") {
            let aliases = &line[at + "[aliases: ".len()..];
            let aliases = &aliases[..aliases.find(']').unwrap_or(aliases.len())];
            for alias in aliases.split(", ") {
                found.options.insert(alias.trim().to_string());
            }
        }
    }
    found
}

/// The help of every command path asked for, each run once.
#[derive(Default)]
struct Helps(std::collections::HashMap<Vec<String>, Help>);

impl Helps {
    fn of(&mut self, command: &[String]) -> &Help {
        self.0
            .entry(command.to_vec())
            .or_insert_with(|| help(command))
    }
}

/// Options a command takes only to refuse them with a reason (exit 2), kept out of its
/// `--help`: the documents may name them, to say that they are refused.
const REFUSED: [(&str, &str); 1] = [("selftest", "--stop-after")];

#[test]
fn each_option_documented_as_refused_is_refused_with_a_reason() {
    for (command, option) in REFUSED {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_nvrec"))
            .args(command.split(' '))
            .args([option, "1s", "/nonexistent/nvrec-docs-test.img"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command} {option}: {said}");
        assert!(said.contains(option), "{command} {option}: {said}");
        assert!(
            !said.contains("unexpected argument"),
            "{command} {option} is unknown, not refused with a reason: {said}"
        );
    }
}

/// A use of an option the binary does not have, or of a command it does not have.
fn check_invocation(helps: &mut Helps, words: &[String]) -> Result<(), String> {
    let mut command: Vec<String> = Vec::new();
    let mut options: Vec<&str> = Vec::new();
    for word in words {
        if word == "--" {
            break; // What follows is no option.
        }
        if word.starts_with('-') {
            // `--from/--to`: two options, as prose writes them.
            options.extend(word.split('/').filter(|option| option.starts_with('-')));
        } else if helps.of(&command).subcommands.contains(word) {
            command.push(word.clone());
        } else if command.is_empty() && word.ends_with(':') {
            return Ok(()); // A line nvrec prints (`nvrec write: finished, ...`), quoted.
        } else if command.is_empty() {
            return Err(format!("nvrec has no command {word:?}"));
        }
        // Anything else is a target or an option's value.
    }
    let known = &helps.of(&command).options;
    let missing: Vec<&str> = options
        .iter()
        .filter(|option| option.starts_with("--"))
        .map(|option| option.split('=').next().unwrap())
        .filter(|option| !known.contains(*option))
        .filter(|option| !REFUSED.contains(&(command.join(" ").as_str(), *option)))
        .collect();
    match missing.as_slice() {
        [] => Ok(()),
        _ => Err(format!(
            "nvrec {} has no {}",
            command.join(" "),
            missing.join(", ")
        )),
    }
}

/// The documents whose commands are held to the binary: the front page and the manual.
const COMMAND_DOCUMENTS: [&str; 2] = ["README.md", "docs/GUIDE.md"];

/// Every `nvrec ...` the documents write, in shell blocks and inline code, with where it is.
/// An inline span that begins with a command and names an option (`verify --strict`,
/// `bench overwrite --size`) is read as `nvrec` followed by it.
fn documented_invocations(helps: &mut Helps) -> Vec<(String, Vec<String>)> {
    let commands = helps.of(&[]).subcommands.clone();
    let mut found = Vec::new();
    for document in COMMAND_DOCUMENTS {
        let text = std::fs::read_to_string(root().join(document)).unwrap();
        let mut pieces = shell_pieces(document, &text);
        for mut span in inline_pieces(document, &text) {
            let first = span.text.split_whitespace().next().unwrap_or("");
            if commands.iter().any(|command| command == first) && span.text.contains(" --") {
                span.text = format!("nvrec {}", span.text);
            }
            pieces.push(span);
        }
        for piece in pieces {
            for words in invocations(&piece.text) {
                let place = format!(
                    "{}:{}: nvrec {}",
                    piece.document,
                    piece.line_number,
                    words.join(" ")
                );
                found.push((place, words));
            }
        }
    }
    found
}

#[test]
fn every_option_the_documents_give_a_command_is_in_its_help() {
    let mut helps = Helps::default();
    let invocations = documented_invocations(&mut helps);
    assert!(
        invocations.len() > 100,
        "only {} uses of nvrec found in {COMMAND_DOCUMENTS:?}",
        invocations.len()
    );
    if std::env::var_os("NVREC_DOCS_DUMP").is_some() {
        for (place, _) in &invocations {
            eprintln!("{place}");
        }
    }
    let misses: Vec<String> = invocations
        .iter()
        .filter_map(|(place, words)| {
            check_invocation(&mut helps, words)
                .err()
                .map(|miss| format!("{place}\n    {miss}"))
        })
        .collect();
    assert!(
        misses.is_empty(),
        "{} uses in the documents that the binary refuses:\n{}",
        misses.len(),
        misses.join("\n")
    );
}

/// Whether `text` names `word` whole (`--size` is not named by `--size-max`, `fill` not
/// by `refill` or `fills`).
fn names(text: &str, word: &str) -> bool {
    let part_of_word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric()) && !after.is_some_and(part_of_word)
    })
}

/// A document's paragraphs: text between blank lines, a fenced block whole, and a paragraph
/// that ends in `:` (one that introduces a table or a block) together with the next.
fn paragraphs(text: &str) -> Vec<String> {
    let mut paragraphs = Vec::new();
    let mut current = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let joins = current.trim_end().ends_with(':');
        if line.trim().is_empty() && !fenced && !joins {
            paragraphs.push(std::mem::take(&mut current));
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    paragraphs.push(current);
    paragraphs
}

#[test]
fn the_guide_names_every_option_of_record_bench_selftest_write_and_read() {
    let guide = std::fs::read_to_string(root().join("docs/GUIDE.md")).unwrap();
    let paragraphs = paragraphs(&guide);
    let mut helps = Helps::default();
    let mut commands: Vec<Vec<String>> = ["record", "selftest", "write", "read"]
        .iter()
        .map(|command| vec![command.to_string()])
        .collect();
    let bench = vec!["bench".to_string()];
    for sub in helps.of(&bench).subcommands.clone() {
        commands.push(vec!["bench".into(), sub]);
    }
    assert!(commands.len() >= 9, "{commands:?}");
    // An option is named for a command where one paragraph names both (`record`, or a
    // bench by its own name: `fill`, `overwrite`).
    let mut unnamed = Vec::new();
    for command in &commands {
        let name = command.last().unwrap();
        let mut options: Vec<&String> = helps
            .of(command)
            .options
            .iter()
            // The global options, which every command has.
            .filter(|option| !["--help", "--json"].contains(&option.as_str()))
            .collect();
        options.sort();
        for option in options {
            let named = paragraphs
                .iter()
                .any(|paragraph| names(paragraph, name) && names(paragraph, option));
            if !named {
                unnamed.push(format!("nvrec {} {option}", command.join(" ")));
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "options docs/GUIDE.md never names beside their command:\n{}",
        unnamed.join("\n")
    );
}

#[test]
fn commands_are_read_from_shell_lines_as_a_shell_reads_them() {
    let words = |line: &str| -> Vec<Vec<String>> { invocations(&strip_comment(line)) };
    let owned = |list: &[&[&str]]| -> Vec<Vec<String>> {
        list.iter()
            .map(|words| words.iter().map(|word| word.to_string()).collect())
            .collect()
    };
    assert_eq!(
        words("capture-tool | nvrec record --label 'a b' /dev/x &  # --not-this"),
        owned(&[&["record", "--label", "a b", "/dev/x"]])
    );
    assert_eq!(
        words("sleep 3; nvrec mark --before=2m /r.img; wait; nvrec --json ls $(cat t) > x"),
        owned(&[&["mark", "--before=2m", "/r.img"], &["--json", "ls"],])
    );
    assert_eq!(
        words("echo \"nvrec --in-quotes\" && nvrec-netgen send && nvrec ls a#b"),
        owned(&[&["ls", "a#b"]])
    );
    assert_eq!(
        words("cargo bench -p nvrec --bench x; sudo X=1 nvrec devices"),
        owned(&[&["devices"]])
    );
    let text = "x\n```sh\nnvrec record --ring \\\n    --max-marked 50% /d &\n# nvrec no\n```\n\
                ```\n$ nvrec plan --rate 1G\nnvrec   reference\n```\n\
                and `nvrec ls SET \\| head -1` or `bench\noverwrite --size`.\n";
    let shell: Vec<String> = shell_pieces("t", text)
        .into_iter()
        .map(|piece| piece.text.trim().to_string())
        .collect();
    assert_eq!(
        shell,
        [
            "nvrec record --ring  --max-marked 50% /d &",
            "nvrec plan --rate 1G"
        ]
    );
    let inline: Vec<String> = inline_pieces("t", text)
        .into_iter()
        .map(|piece| piece.text)
        .collect();
    assert_eq!(inline, ["nvrec ls SET | head -1", "bench overwrite --size"]);
}
