//! The module map of `docs/architecture.md`, checked against the code: the imports of `src/`
//! (every `use` and every `crate::`/`super::` path outside `#[cfg(test)]` modules) drawn as a
//! graph of files, which must have no circle, and whose arrows between top-level modules must
//! all run down the layers the document's table names. A module's files may use their own
//! module's face (its `mod.rs`): that is how Rust modules are built, not a circle. Source files
//! stay under the document's line limit unless its "Long files" list says why. No network, no
//! build of the crate's code: it reads text.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type ModPath = Vec<String>;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn name(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".to_owned()
    } else {
        m.join("::")
    }
}

/// The modules a file declares as test-only (`#[cfg(test)] mod tests;`), kept in files of
/// their own.
fn test_modules(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    lines
        .windows(2)
        .filter(|w| w[0] == "#[cfg(test)]")
        .filter_map(|w| w[1].strip_prefix("mod ")?.strip_suffix(';'))
        .map(str::to_owned)
        .collect()
}

/// Every module file the library builds: its path (`["storage", "s3"]`) and its file. The
/// binary's `main.rs` is not the library's, and files of test-only modules are left out.
fn modules() -> BTreeMap<ModPath, PathBuf> {
    let mut all = every_module_file();
    let tests: Vec<ModPath> = all
        .iter()
        .flat_map(|(module, file)| {
            let text = fs::read_to_string(file).expect("read a source file");
            test_modules(&text).into_iter().map(move |name| {
                let mut child = module.clone();
                child.push(name);
                child
            })
        })
        .collect();
    all.retain(|module, _| !tests.iter().any(|t| module.starts_with(t)));
    all
}

fn every_module_file() -> BTreeMap<ModPath, PathBuf> {
    fn walk(dir: &Path, prefix: &ModPath, out: &mut BTreeMap<ModPath, PathBuf>) {
        let mut entries: Vec<_> = fs::read_dir(dir)
            .expect("read src/")
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .expect("utf-8 file name")
                .to_owned();
            if path.is_dir() {
                let mut next = prefix.clone();
                next.push(stem);
                walk(&path, &next, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut module = prefix.clone();
                match stem.as_str() {
                    "mod" => {}
                    "lib" if prefix.is_empty() => {}
                    "main" if prefix.is_empty() => continue,
                    _ => module.push(stem),
                }
                out.insert(module, path);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&repo("src"), &Vec::new(), &mut out);
    out
}

/// The code the library builds: line comments dropped, and the file cut where an inline
/// `#[cfg(test)] mod … {` begins (tests may import anything they test).
fn library_code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            match lines.peek().map(|next| next.trim()) {
                Some(next) if next.starts_with("mod ") && next.ends_with('{') => break,
                Some(next) if next.starts_with("mod ") && next.ends_with(';') => {
                    lines.next();
                    continue;
                }
                _ => {}
            }
        }
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The paths of a use tree (`a::{b, c::{d, e as f}}`), each as its segments.
fn use_paths(tree: &str) -> Vec<Vec<String>> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(tree[start..i].to_owned());
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(tree[start..].to_owned());
    let mut out = Vec::new();
    for part in parts.iter().map(|p| p.trim()).filter(|p| !p.is_empty()) {
        match (part.find('{'), part.rfind('}')) {
            (Some(open), Some(close)) => {
                let head: Vec<String> = segments(part[..open].trim().trim_end_matches(':'));
                for tail in use_paths(&part[open + 1..close]) {
                    out.push(head.iter().cloned().chain(tail).collect());
                }
            }
            _ => {
                let without_alias = part.split_whitespace().next().unwrap_or(part);
                out.push(segments(without_alias));
            }
        }
    }
    out
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Every path the code names from the crate's root or a parent: `use` trees, and `crate::…` /
/// `super::…` written inline.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut statement: Option<String> = None;
    for line in code.lines() {
        let trimmed = line.trim_start();
        if statement.is_none() {
            let rest = ["use ", "pub use ", "pub(crate) use ", "pub(super) use "]
                .iter()
                .find_map(|p| trimmed.strip_prefix(p));
            if let Some(rest) = rest {
                statement = Some(String::new());
                statement.as_mut().expect("just set").push_str(rest);
            }
        } else if let Some(s) = statement.as_mut() {
            s.push_str(trimmed);
        }
        if let Some(s) = statement.as_ref() {
            if let Some(end) = s.find(';') {
                out.extend(use_paths(&s[..end]));
                statement = None;
            }
        }
    }
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for anchor in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(anchor).map(|i| i + from) {
            from = i + anchor.len();
            if code[..i].chars().next_back().is_some_and(is_ident) || code[..i].ends_with("super::")
            {
                continue;
            }
            let end = code[i..]
                .find(|c: char| !(is_ident(c) || c == ':'))
                .map_or(code.len(), |e| e + i);
            out.push(segments(&code[i..end]));
        }
    }
    out
}

/// The module a path lands in: the longest prefix that is a module file.
fn resolve(
    from: &ModPath,
    path: &[String],
    modules: &BTreeMap<ModPath, PathBuf>,
) -> Option<ModPath> {
    let mut absolute: ModPath = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("super") | Some("self") => from.clone(),
        _ => return None,
    };
    let mut rest = path;
    if rest.first().is_some_and(|s| s == "crate" || s == "self") {
        rest = &rest[1..];
    }
    while rest.first().is_some_and(|s| s == "super") {
        absolute.pop();
        rest = &rest[1..];
    }
    absolute.extend(rest.iter().cloned());
    (0..=absolute.len())
        .rev()
        .map(|n| absolute[..n].to_vec())
        .find(|m| modules.contains_key(m))
}

/// Module → the modules it imports (its own module's face and itself left out).
fn graph(modules: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut edges = BTreeMap::new();
    for (module, file) in modules {
        let text = fs::read_to_string(file).expect("read a source file");
        let targets = named_paths(&library_code(&text))
            .iter()
            .filter_map(|p| resolve(module, p, modules))
            .filter(|t| !module.starts_with(t))
            .collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

/// One circle of the graph, if there is any (depth-first search with colours).
fn find_circle(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        Open,
        Done,
    }
    fn visit(
        node: &ModPath,
        edges: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        colour: &mut BTreeMap<ModPath, Colour>,
        stack: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        colour.insert(node.clone(), Colour::Open);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            match colour.get(next) {
                Some(Colour::Open) => {
                    let at = stack.iter().position(|m| m == next).expect("on the stack");
                    let mut circle = stack[at..].to_vec();
                    circle.push(next.clone());
                    return Some(circle);
                }
                Some(Colour::Done) => {}
                None => {
                    if let Some(circle) = visit(next, edges, colour, stack) {
                        return Some(circle);
                    }
                }
            }
        }
        stack.pop();
        colour.insert(node.clone(), Colour::Done);
        None
    }
    let mut colour = BTreeMap::new();
    for node in edges.keys() {
        if !colour.contains_key(node) {
            if let Some(circle) = visit(node, edges, &mut colour, &mut Vec::new()) {
                return Some(circle);
            }
        }
    }
    None
}

/// The text of `docs/architecture.md` between `<!-- name -->` and `<!-- /name -->`.
fn doc_section(name: &str) -> String {
    let doc = fs::read_to_string(repo("docs/architecture.md")).expect("docs/architecture.md");
    let open = format!("<!-- {name} -->");
    let close = format!("<!-- /{name} -->");
    let start = doc
        .find(&open)
        .unwrap_or_else(|| panic!("{open} in the document"))
        + open.len();
    let end = doc[start..]
        .find(&close)
        .unwrap_or_else(|| panic!("{close} in the document"))
        + start;
    doc[start..end].to_owned()
}

/// The layer table: `| 3 | `auth`, `catalog` | … |` → {"auth": 3, "catalog": 3}.
fn documented_layers() -> BTreeMap<String, u32> {
    let mut layers = BTreeMap::new();
    for row in doc_section("layers").lines() {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let Some(layer) = cells.get(1).and_then(|c| c.parse::<u32>().ok()) else {
            continue;
        };
        for module in cells[2].split(',') {
            let module = module.trim().trim_matches('`').trim_end_matches('/');
            let module = module.trim_end_matches(".rs");
            assert!(
                layers.insert(module.to_owned(), layer).is_none(),
                "`{module}` is in two rows of the layer table"
            );
        }
    }
    layers
}

#[test]
fn the_imports_draw_no_circle() {
    let edges = graph(&modules());
    if let Some(circle) = find_circle(&edges) {
        let names: Vec<String> = circle.iter().map(name).collect();
        panic!(
            "an import circle: {} (docs/architecture.md, \"Which way imports run\")",
            names.join(" → ")
        );
    }
}

#[test]
fn every_arrow_between_top_level_modules_runs_down_the_documented_layers() {
    let modules = modules();
    let layers = documented_layers();
    let tops: BTreeSet<String> = modules.keys().filter_map(|m| m.first().cloned()).collect();
    let undocumented: Vec<&String> = tops.iter().filter(|t| !layers.contains_key(*t)).collect();
    assert!(
        undocumented.is_empty(),
        "top-level modules missing from docs/architecture.md's layer table: {undocumented:?}"
    );
    let stale: Vec<&String> = layers.keys().filter(|l| !tops.contains(*l)).collect();
    assert!(
        stale.is_empty(),
        "the layer table names modules that do not exist: {stale:?}"
    );
    let mut upward = Vec::new();
    for (from, targets) in graph(&modules) {
        let Some(from_top) = from.first() else {
            continue;
        };
        for to in targets {
            let Some(to_top) = to.first() else {
                continue;
            };
            if from_top != to_top && layers[from_top] <= layers[to_top] {
                upward.push(format!(
                    "{} (layer {}) → {} (layer {})",
                    name(&from),
                    layers[from_top],
                    name(&to),
                    layers[to_top]
                ));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports that do not run down the layers:\n{}",
        upward.join("\n")
    );
}

/// The files over the document's line limit, each with the reason it gives:
/// `- \`src/…\` (N lines): why`.
fn documented_long_files() -> BTreeMap<String, String> {
    doc_section("long-files")
        .lines()
        .filter_map(|line| {
            let rest = line.trim().strip_prefix("- `")?;
            let (path, why) = rest.split_once('`')?;
            Some((path.to_owned(), why.trim().to_owned()))
        })
        .collect()
}

/// The line limit the document states: `… no source file over N lines …`.
fn documented_line_limit() -> usize {
    let section = doc_section("long-files");
    let words: Vec<&str> = section.split_whitespace().collect();
    words
        .windows(3)
        .find(|w| {
            w[0] == "over" && w[2].trim_end_matches(|c: char| !c.is_alphanumeric()) == "lines"
        })
        .and_then(|w| w[1].parse().ok())
        .expect("the long-files section states its limit: \"over N lines\"")
}

#[test]
fn no_source_file_is_over_the_limit_unless_the_document_says_why() {
    let limit = documented_line_limit();
    let listed = documented_long_files();
    let mut over = Vec::new();
    let mut long = BTreeSet::new();
    for file in every_module_file().values() {
        let lines = fs::read_to_string(file).expect("read").lines().count();
        let path = file
            .strip_prefix(env!("CARGO_MANIFEST_DIR"))
            .expect("under the repository")
            .to_string_lossy()
            .trim_start_matches('/')
            .to_owned();
        if lines > limit {
            long.insert(path.clone());
            let explained = listed
                .get(&path)
                .is_some_and(|why| why.chars().any(char::is_alphabetic));
            if !explained {
                over.push(format!("{path} ({lines} lines)"));
            }
        }
    }
    assert!(
        over.is_empty(),
        "source files over {limit} lines that docs/architecture.md's \"Long files\" does not explain: {over:?}"
    );
    let stale: Vec<&String> = listed.keys().filter(|p| !long.contains(*p)).collect();
    assert!(
        stale.is_empty(),
        "docs/architecture.md explains long files that are no longer over {limit} lines: {stale:?}"
    );
}

/// The checks themselves, on small inputs: each finds what it is for.
#[test]
fn the_reader_finds_use_trees_inline_paths_and_circles() {
    assert_eq!(
        use_paths("crate::domain::{keys::{FinalKey, TmpKey}, ids as i}"),
        vec![
            segments("crate::domain::keys::FinalKey"),
            segments("crate::domain::keys::TmpKey"),
            segments("crate::domain::ids"),
        ]
    );
    let code = library_code(
        "use super::super::x::Y;\nfn f() { crate::a::b(); } // crate::c::d\n#[cfg(test)]\nmod tests {\n use crate::e;\n}\n",
    );
    let named = named_paths(&code);
    let with_files =
        "mod a;\n#[cfg(test)]\nmod tests;\nuse crate::b::C;\n#[cfg(test)]\nmod properties;\n";
    assert_eq!(test_modules(with_files), vec!["tests", "properties"]);
    assert!(named_paths(&library_code(with_files)).contains(&segments("crate::b::C")));
    assert!(named.contains(&segments("super::super::x::Y")), "{named:?}");
    assert!(named.contains(&segments("crate::a::b")), "{named:?}");
    assert!(
        !named.iter().any(|p| p.contains(&"c".to_owned())),
        "{named:?}"
    );
    assert!(
        !named.iter().any(|p| p.contains(&"e".to_owned())),
        "{named:?}"
    );

    let m = |s: &str| segments(s);
    let known: BTreeMap<ModPath, PathBuf> = [m("a"), m("a::b"), m("c")]
        .into_iter()
        .map(|k| (k, PathBuf::new()))
        .collect();
    assert_eq!(
        resolve(&m("a::b"), &m("super::super::c::f"), &known),
        Some(m("c"))
    );
    assert_eq!(resolve(&m("a::b"), &m("super::g"), &known), Some(m("a")));
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    edges.insert(m("a"), [m("c")].into());
    edges.insert(m("c"), [m("a::b")].into());
    edges.insert(m("a::b"), BTreeSet::new());
    assert_eq!(find_circle(&edges), None);
    edges.insert(m("a::b"), [m("a")].into());
    assert_eq!(
        find_circle(&edges),
        Some(vec![m("a"), m("c"), m("a::b"), m("a")])
    );
}
