//! The direction of the layers (STYLE.md, README "Layout"): front ends (`cli`, `api`, `admin`
//! jobs) call the library's entry points (`search`, `training`, ...), which call the rest; the
//! library never imports a front end, nothing but `src/cli/` and `src/main.rs` imports
//! `crate::cli`, and the top-level modules form no import cycle.
//!
//! The graph is read from the source: every `crate::module` path outside comments (grouped
//! `use crate::{a::X, b}` imports included) is an edge from the file's top-level module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Front ends: they parse, print, route and run jobs; nobody below imports them.
const FRONT_ENDS: &[&str] = &["cli", "api", "admin"];
/// Entry points of the library, called by the front ends.
const ENTRY_POINTS: &[&str] = &["search", "cluster", "training", "judgments", "active"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of `text` without `//` comments (a `//` inside a string literal ends the line's
/// code early, which can only hide an edge inside that literal).
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(|l| l.split("//").next().unwrap_or(""))
}

/// The top-level modules a line of code names after `root::`.
fn referenced(line: &str, root: &str) -> Vec<String> {
    let mut out = Vec::new();
    let pattern = format!("{root}::");
    let mut rest = line;
    while let Some(i) = rest.find(&pattern) {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + pattern.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // `use crate::{a::X, b, c::{d, e}}`: the names at depth 0 of the group.
            let mut depth = 0;
            let mut name = String::new();
            let mut at_start = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        at_start = true;
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 && at_start {
                    if c.is_alphanumeric() || c == '_' {
                        name.push(c);
                    } else if !name.is_empty() {
                        out.push(std::mem::take(&mut name));
                        at_start = false;
                    }
                }
            }
            if !name.is_empty() {
                out.push(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push(name);
            }
        }
    }
    out
}

/// Top-level module → the top-level modules it refers to, and every file naming `crate::cli`.
fn module_graph() -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut cli_importers = Vec::new();
    for file in files {
        let rel = file
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let top = rel
            .split('/')
            .next()
            .unwrap()
            .trim_end_matches(".rs")
            .to_string();
        if top == "main" || top == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let node = graph.entry(top.clone()).or_default();
        for line in code_lines(&text) {
            for target in referenced(line, "crate") {
                if target == "cli" && top != "cli" {
                    cli_importers.push(rel.clone());
                }
                if target != top {
                    node.insert(target);
                }
            }
        }
    }
    (graph, cli_importers)
}

/// A cycle of the graph, if it has one (depth-first search).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == next).unwrap();
                    let mut cycle = path[start..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn layer(module: &str) -> u8 {
    if FRONT_ENDS.contains(&module) {
        0
    } else if ENTRY_POINTS.contains(&module) {
        1
    } else {
        2
    }
}

#[test]
fn only_the_command_line_imports_the_command_line() {
    let (_, importers) = module_graph();
    assert!(
        importers.is_empty(),
        "crate::cli is imported outside src/cli/: {importers:?}"
    );
}

#[test]
fn the_modules_form_no_cycle_and_point_down() {
    let (graph, _) = module_graph();
    assert!(graph.contains_key("search") && graph.contains_key("training"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import cycle: {}", cycle.join(" → "));
    }
    let mut upward = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            if graph.contains_key(to) && layer(to) < layer(from) {
                upward.push(format!("{from} → {to}"));
            }
        }
    }
    assert!(upward.is_empty(), "imports against the layers: {upward:?}");
}

#[test]
fn the_checker_sees_what_it_must() {
    // The parser: grouped imports, nested groups, paths in expressions, and not comments.
    assert_eq!(
        referenced("use crate::{text::X, eval::{a, b}, links};", "crate"),
        ["text", "eval", "links"]
    );
    assert_eq!(
        referenced(
            "let x = crate::search::Engine::new(crate::text::y);",
            "crate"
        ),
        ["search", "text"]
    );
    assert_eq!(
        referenced("let my_crate::x = 1;", "crate"),
        Vec::<String>::new()
    );
    assert_eq!(
        code_lines("a(); // crate::cli\n").collect::<Vec<_>>(),
        ["a(); "]
    );
    // The cycle finder finds a planted cycle and accepts a chain.
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default();
    assert_eq!(find_cycle(&g), None);
    g.get_mut("c").unwrap().insert("a".into());
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
}
