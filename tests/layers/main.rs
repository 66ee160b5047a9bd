//! The module map of `docs/architecture.md`, checked against the code: the imports of `src/`
//! (every `use` and every `crate::`/`super::` path outside `#[cfg(test)]` modules) drawn as a
//! graph of files, which must have no circle, and whose arrows between top-level modules must
//! all run down the layers the document's table names. A module's files may use their own
//! module's face (its `mod.rs`): that is how Rust modules are built, not a circle. Source files
//! stay under the document's line limit unless its "Long files" list says why. No network, no
//! build of the crate's code: it reads text.
//!
//! Read: `use` trees (grouped, aliased, `self`, globs, after attributes, any visibility), paths
//! from `crate::`, `super::`, `self::` or a child module, followed through the re-exports of the
//! module they land in. Not read (none is used in `src/`; an outside review grepped for each):
//! the crate renamed (`use crate as x`, `extern crate self as x`, `use crate::{self as x}`), a
//! glob of the crate root, macros called by path, byte and C raw strings (`br"…"`, `cr"…"`), a
//! `use` that does not start its line, and code on the same line after a test module.

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

/// The text with comments dropped and the insides of string and character literals blanked
/// (newlines kept), so that neither a `//` in a string nor a path in a message is read as code.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                out.push(blank(chars[i]));
                i += 1;
            }
            i += 2;
        } else if c == 'r' && !prev_ident && matches!(next, Some('"') | Some('#')) {
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            out.push_str("r\"");
            i = j + 1;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
            out.push('"');
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if let Some(&d) = chars.get(i) {
                    out.push(blank(d));
                }
                i += 1;
            }
            out.push('"');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal ('x', '\n', '\u{…}'); a lifetime has no closing quote.
            let mut j = i + 2;
            while j < chars.len() && chars[j] != '\'' {
                j += 1;
            }
            out.push_str("' '");
            i = j + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// `{` minus `}` on a line of [`code_only`] text.
fn braces(line: &str) -> i64 {
    line.chars()
        .map(|c| match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        })
        .sum()
}

/// The code the library builds: [`code_only`] text without its `#[cfg(test)]` modules (an
/// inline one is skipped to its closing brace; code after it is read).
fn library_code(text: &str) -> String {
    let code = code_only(text);
    let mut out = String::new();
    let mut lines = code.lines().peekable();
    let mut skipping: Option<i64> = None;
    while let Some(line) = lines.next() {
        if let Some(depth) = skipping.as_mut() {
            *depth += braces(line);
            if *depth <= 0 {
                skipping = None;
            }
            continue;
        }
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("#[cfg(test)]") {
            let rest = rest.trim();
            let module = if rest.is_empty() {
                lines.peek().map(|next| next.trim().to_owned())
            } else {
                Some(rest.to_owned())
            };
            if let Some(module) =
                module.filter(|m| m.starts_with("mod ") || m.starts_with("pub mod "))
            {
                if rest.is_empty() {
                    lines.next();
                }
                if module.ends_with('{') {
                    skipping = Some(braces(&module));
                }
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The paths of a use tree (`a::{b, c::{d, e as f}}`), each as its segments, with the name it
/// is bound to here (the alias, or the last segment; `None` for a glob).
fn use_paths(tree: &str) -> Vec<(Vec<String>, Option<String>)> {
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
                for (tail, bound) in use_paths(&part[open + 1..close]) {
                    // `a::{self}` binds `a`.
                    let bound = if tail.is_empty() {
                        head.last().cloned()
                    } else {
                        bound
                    };
                    out.push((head.iter().cloned().chain(tail).collect(), bound));
                }
            }
            _ => {
                let mut words = part.split_whitespace();
                let mut path = segments(words.next().unwrap_or(part));
                let alias = match (words.next(), words.next()) {
                    (Some("as"), Some(alias)) => Some(alias.to_owned()),
                    _ => None,
                };
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                }
                let bound = match path.last().map(String::as_str) {
                    Some("*") => None,
                    last => alias.or(last.map(str::to_owned)),
                };
                out.push((path, bound));
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

/// A `use` statement's tree, if `line` starts one (after any attributes and visibility).
fn use_statement_start(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    while rest.starts_with("#[") {
        let end = rest.find(']')?;
        rest = rest[end + 1..].trim_start();
    }
    if let Some(after) = rest.strip_prefix("pub(") {
        let end = after.find(')')?;
        rest = after[end + 1..].trim_start();
    } else if let Some(after) = rest.strip_prefix("pub ") {
        rest = after.trim_start();
    }
    rest.strip_prefix("use ")
}

/// Every `use` statement of the code: its paths with the names they bind.
fn use_statements(code: &str) -> Vec<(Vec<String>, Option<String>)> {
    use_statements_of(code, false)
}

/// [`use_statements`], or only the re-exporting ones (`pub use`, `pub(crate) use`, …).
fn use_statements_of(code: &str, only_pub: bool) -> Vec<(Vec<String>, Option<String>)> {
    let mut out = Vec::new();
    let mut statement: Option<String> = None;
    for line in code.lines() {
        match statement.as_mut() {
            None => {
                let public = line.trim_start().starts_with("pub");
                statement = use_statement_start(line)
                    .filter(|_| public || !only_pub)
                    .map(str::to_owned);
            }
            Some(s) => s.push_str(line.trim()),
        }
        if let Some(s) = statement.as_ref() {
            if let Some(end) = s.find(';') {
                out.extend(use_paths(&s[..end]));
                statement = None;
            }
        }
    }
    out
}

/// Every path the code names from the crate's root, a parent or itself: `use` trees, and
/// `crate::…` / `super::…` written inline.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = use_statements(code).into_iter().map(|(p, _)| p).collect();
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    for anchor in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(anchor).map(|i| i + from) {
            from = i + anchor.len();
            if code[..i].chars().next_back().is_some_and(is_ident)
                || code[..i].ends_with("super::")
                || code[..i].ends_with("self::")
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

/// What each module re-exports: the name it binds → the path it names (`pub use s3::S3Store`).
type Reexports = BTreeMap<ModPath, BTreeMap<String, Vec<String>>>;

fn reexports(modules: &BTreeMap<ModPath, PathBuf>) -> Reexports {
    modules
        .iter()
        .map(|(module, file)| {
            let code = library_code(&fs::read_to_string(file).expect("read a source file"));
            let bound = use_statements_of(&code, true)
                .into_iter()
                .filter_map(|(path, name)| Some((name?, path)))
                .collect();
            (module.clone(), bound)
        })
        .collect()
}

/// The module a path lands in: the longest prefix that is a module file, followed through
/// that module's re-exports (`storage::S3Store` lands in `storage::s3`). Paths from the root,
/// a parent, the module itself, or one of its child modules are read; others are other crates.
fn resolve(
    from: &ModPath,
    path: &[String],
    modules: &BTreeMap<ModPath, PathBuf>,
    reexports: &Reexports,
) -> Option<ModPath> {
    resolve_within(from, path, modules, reexports, 0)
}

fn resolve_within(
    from: &ModPath,
    path: &[String],
    modules: &BTreeMap<ModPath, PathBuf>,
    reexports: &Reexports,
    depth: usize,
) -> Option<ModPath> {
    let first = path.first()?;
    let mut absolute: ModPath = match first.as_str() {
        "crate" => Vec::new(),
        "super" | "self" => from.clone(),
        child if modules.contains_key(&[from.clone(), vec![child.to_owned()]].concat()) => {
            from.clone()
        }
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
    let module = (0..=absolute.len())
        .rev()
        .map(|n| absolute[..n].to_vec())
        .find(|m| modules.contains_key(m))?;
    let item = absolute.get(module.len());
    let target = item.and_then(|i| reexports.get(&module)?.get(i));
    match target {
        Some(target) if depth < 8 => {
            let mut next = target.clone();
            next.extend(absolute[module.len() + 1..].iter().cloned());
            Some(resolve_within(&module, &next, modules, reexports, depth + 1).unwrap_or(module))
        }
        _ => Some(module),
    }
}

/// Module → the modules it imports (its own module's face and itself left out).
fn graph(modules: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let reexports = reexports(modules);
    let mut edges = BTreeMap::new();
    for (module, file) in modules {
        let text = fs::read_to_string(file).expect("read a source file");
        let targets = named_paths(&library_code(&text))
            .iter()
            .filter_map(|p| resolve(module, p, modules, &reexports))
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
    let bound = |tree: &str| -> Vec<(Vec<String>, Option<String>)> { use_paths(tree) };
    assert_eq!(
        bound("crate::domain::{keys::{FinalKey, TmpKey}, ids as i, jobs::*, self}"),
        vec![
            (
                segments("crate::domain::keys::FinalKey"),
                Some("FinalKey".into())
            ),
            (
                segments("crate::domain::keys::TmpKey"),
                Some("TmpKey".into())
            ),
            (segments("crate::domain::ids"), Some("i".into())),
            (segments("crate::domain::jobs::*"), None),
            (segments("crate::domain"), Some("domain".into())),
        ]
    );
    let code = library_code(concat!(
        "use super::super::x::Y;\n",
        "fn f() { crate::a::b(); } // crate::c::d\n",
        "fn g() { let _ = \"http://host/ crate::s::t\"; crate::after::string(); }\n",
        "#[allow(unused)] pub(in crate::q) use crate::{attr::A, grouped::B};\n",
        "#[cfg(test)]\nmod tests {\n use crate::e;\n fn h() { if true { crate::e2::x(); } }\n}\n",
        "fn after_tests() { crate::late::z(); }\n",
        "/* crate::block::c */\n",
    ));
    let named = named_paths(&code);
    for found in [
        "super::super::x::Y",
        "crate::a::b",
        "crate::after::string",
        "crate::attr::A",
        "crate::grouped::B",
        "crate::late::z",
    ] {
        assert!(named.contains(&segments(found)), "{found}: {named:?}");
    }
    for hidden in ["c", "s", "e", "e2", "block"] {
        assert!(
            !named.iter().any(|p| p.contains(&hidden.to_owned())),
            "{hidden}: {named:?}"
        );
    }
    let with_files =
        "mod a;\n#[cfg(test)]\nmod tests;\nuse crate::b::C;\n#[cfg(test)]\nmod properties;\n";
    assert_eq!(test_modules(with_files), vec!["tests", "properties"]);
    assert!(named_paths(&library_code(with_files)).contains(&segments("crate::b::C")));

    let m = |s: &str| segments(s);
    let known: BTreeMap<ModPath, PathBuf> = [m("a"), m("a::b"), m("c"), m("s"), m("s::inner")]
        .into_iter()
        .map(|k| (k, PathBuf::new()))
        .collect();
    // `s` re-exports `inner::Thing` (as `storage` re-exports `s3::S3Store`).
    let mut reexported = Reexports::new();
    reexported.insert(
        m("s"),
        [("Thing".to_owned(), m("inner::Thing"))]
            .into_iter()
            .collect(),
    );
    let resolve = |from: &str, path: &str| resolve(&m(from), &m(path), &known, &reexported);
    assert_eq!(resolve("a::b", "super::super::c::f"), Some(m("c")));
    assert_eq!(resolve("a::b", "super::g"), Some(m("a")));
    assert_eq!(
        resolve("a", "b::g"),
        Some(m("a::b")),
        "a child module by name"
    );
    assert_eq!(resolve("c", "crate::s::Thing"), Some(m("s::inner")));
    assert_eq!(resolve("c", "crate::s::Other"), Some(m("s")));
    assert_eq!(resolve("c", "tokio::spawn"), None, "another crate");

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
