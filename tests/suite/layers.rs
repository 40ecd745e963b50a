//! The shape of the imports, read from the source with `syn`.
//!
//! **Layers** (STYLE.md, README "Layout"): front ends (`cli`, `api`, `admin` jobs) call the
//! library's entry points (`search`, `training`, ...), which call the rest; the library never
//! imports a front end, nothing but `src/cli/` and `src/main.rs` imports `crate::cli`, and the
//! top-level modules form no import cycle. Every path a file names (`use`, expressions, types,
//! macro arguments, test code and re-exports included) is an edge from the file's top-level
//! module to the top-level module the path starts in once `crate::`, `self::` and `super::` are
//! spelled out.
//!
//! **Files**: the files form no import cycle either, so each file can be read knowing only
//! the files it imports. A path names an *item*; the edge goes from the file naming it to the
//! file defining it, found the way rustc finds it: through child modules, `use` imports and
//! re-exports, and glob imports (`super::PairCount` in `pairwise/avx2.rs` is an edge to
//! `pairwise/counts.rs`, where `pairwise/mod.rs` re-exports it from). Paths in serde's string
//! attributes (`#[serde(with = "super::sidecar::f64_bits")]`) count. What is not an edge:
//! - a file naming an item of an enclosing module's file (`pairwise/avx2.rs` using a type
//!   defined in `pairwise/mod.rs`, any file using `lib.rs`): a module and its submodules refer
//!   to each other by nature. The other way, a `mod.rs` using its submodules' items, is an
//!   edge, so a cycle that leaves the folder and comes back through its `mod.rs` is seen;
//! - a re-export (`pub use`, `pub(crate) use`): it is followed to the defining file, and is not
//!   itself a use of that file by the re-exporting one;
//! - test code: items under `#[cfg(test)]` and files declared by a `#[cfg(test)] mod`
//!   (`graph/testutil.rs`): a test reaching for helpers that call the code under test is not a
//!   cycle of the design.
//!
//! Paths the checker cannot resolve (items made by macros, dependencies' paths) are no edges.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// Front ends: they parse, print, route and run jobs; nobody below imports them.
const FRONT_ENDS: &[&str] = &["cli", "api", "admin"];
/// Entry points of the library, called by the front ends.
const ENTRY_POINTS: &[&str] = &["search", "cluster", "training", "judgments", "active"];

/// A module path from the crate root: `["pairwise", "sse"]`.
type ModPath = Vec<String>;

/// One module (a file's, or an inline `mod x { .. }`) and what its scope holds.
#[derive(Default)]
struct Module {
    /// Index into [`Crate::files`].
    file: usize,
    /// Items defined here: functions, types, traits, constants, statics, macros.
    items: BTreeSet<String>,
    /// `use` imports: the name they bind → the path as written.
    uses: BTreeMap<String, Vec<String>>,
    /// `use path::*` imports: the paths as written.
    globs: Vec<Vec<String>>,
    /// Under `#[cfg(test)]`, itself or an enclosing module.
    test: bool,
}

/// A path named in a module, as written.
struct Ref {
    module: ModPath,
    path: Vec<String>,
    /// A `pub use` (any visibility but private).
    reexport: bool,
    /// In test code.
    test: bool,
}

/// What a path resolves to.
#[derive(Debug, PartialEq)]
enum Target {
    Module(ModPath),
    Item(usize),
}

#[derive(Default)]
struct Crate {
    /// Paths relative to `src/`: `pairwise/sse.rs`.
    files: Vec<String>,
    modules: BTreeMap<ModPath, Module>,
    refs: Vec<Ref>,
}

/// The module path of a file: `lib.rs` → `[]`, `a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`.
fn file_module(rel: &str) -> ModPath {
    let mut parts: ModPath = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string() == "test")
    })
}

/// A `use` tree as (bound name, path, is a glob): `a::{self, b::C as D, e::*}` →
/// `(a, [a])`, `(D, [a, b, C])`, `(_, [a, e])` glob.
fn flatten_use(tree: &syn::UseTree, prefix: &[String], out: &mut Vec<(String, Vec<String>, bool)>) {
    let join = |name: &syn::Ident| [prefix, &[name.to_string()]].concat();
    match tree {
        syn::UseTree::Path(p) => flatten_use(&p.tree, &join(&p.ident), out),
        syn::UseTree::Name(n) if n.ident == "self" => {
            if let Some(last) = prefix.last() {
                out.push((last.clone(), prefix.to_vec(), false));
            }
        }
        syn::UseTree::Name(n) => out.push((n.ident.to_string(), join(&n.ident), false)),
        syn::UseTree::Rename(r) if r.ident == "self" => {
            out.push((r.rename.to_string(), prefix.to_vec(), false))
        }
        syn::UseTree::Rename(r) => out.push((r.rename.to_string(), join(&r.ident), false)),
        syn::UseTree::Glob(_) => out.push(("*".into(), prefix.to_vec(), true)),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| flatten_use(t, prefix, out)),
    }
}

/// The paths `a::b::c` in a token stream (macro arguments, attributes), groups included;
/// with `strings`, also string literals that parse as such a path.
fn token_paths(tokens: TokenStream, strings: bool, out: &mut Vec<Vec<String>>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => token_paths(g.stream(), strings, out),
            TokenTree::Literal(l) if strings => {
                let lit = syn::parse_str::<syn::LitStr>(&l.to_string()).map(|s| s.value());
                if let Ok(path) = lit.and_then(|v| syn::parse_str::<syn::Path>(&v)) {
                    if path.leading_colon.is_none() && path.segments.len() > 1 {
                        out.push(path.segments.iter().map(|s| s.ident.to_string()).collect());
                    }
                }
            }
            TokenTree::Ident(first) => {
                let mut path = vec![first.to_string()];
                let colons = |j: usize| matches!((tokens.get(j), tokens.get(j + 1)), (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b))) if a.as_char() == ':' && b.as_char() == ':');
                let after_colons = i > 1 && colons(i - 2);
                while colons(i + 1) {
                    let Some(TokenTree::Ident(next)) = tokens.get(i + 3) else {
                        break;
                    };
                    path.push(next.to_string());
                    i += 3;
                }
                if path.len() > 1 && !after_colons {
                    out.push(path);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Collects the paths of one item's body.
struct Paths<'a> {
    krate: &'a mut Crate,
    module: ModPath,
    test: bool,
}

impl Paths<'_> {
    fn push(&mut self, path: Vec<String>, reexport: bool) {
        self.krate.refs.push(Ref {
            module: self.module.clone(),
            path,
            reexport,
            test: self.test,
        });
    }

    /// `f` with `test` set when `attrs` say `#[cfg(test)]`.
    fn under(&mut self, attrs: &[syn::Attribute], f: impl FnOnce(&mut Self)) {
        let outer = self.test;
        self.test |= is_cfg_test(attrs);
        f(self);
        self.test = outer;
    }
}

impl<'ast> Visit<'ast> for Paths<'_> {
    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            self.push(
                p.segments.iter().map(|s| s.ident.to_string()).collect(),
                false,
            );
        }
        syn::visit::visit_path(self, p);
    }
    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        let mut found = Vec::new();
        token_paths(m.tokens.clone(), false, &mut found);
        found.into_iter().for_each(|p| self.push(p, false));
    }
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if !a.path().is_ident("doc") {
            let mut found = Vec::new();
            if let syn::Meta::List(l) = &a.meta {
                token_paths(l.tokens.clone(), true, &mut found);
            }
            found.into_iter().for_each(|p| self.push(p, false));
        }
    }
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        // A `use` inside a function body: an edge, though not in the module's scope.
        let mut found = Vec::new();
        flatten_use(&u.tree, &[], &mut found);
        found.into_iter().for_each(|(_, p, _)| self.push(p, false));
    }
    fn visit_item(&mut self, i: &'ast syn::Item) {
        let attrs = item_attrs(i);
        self.under(attrs, |s| syn::visit::visit_item(s, i));
    }
    fn visit_impl_item(&mut self, i: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match i {
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Const(c) => &c.attrs,
            syn::ImplItem::Type(t) => &t.attrs,
            _ => &[],
        };
        self.under(attrs, |s| syn::visit::visit_impl_item(s, i));
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    use syn::Item::*;
    let ident = match item {
        Const(i) => &i.ident,
        Enum(i) => &i.ident,
        ExternCrate(i) => &i.ident,
        Fn(i) => &i.sig.ident,
        Macro(i) => i.ident.as_ref()?,
        Static(i) => &i.ident,
        Struct(i) => &i.ident,
        Trait(i) => &i.ident,
        TraitAlias(i) => &i.ident,
        Type(i) => &i.ident,
        Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

impl Crate {
    /// The crate of `(path relative to src/, source)` files (`main.rs`, a binary, left out).
    fn parse(files: &[(String, String)]) -> Crate {
        let mut krate = Crate::default();
        let mut test_modules = Vec::new();
        for (index, (rel, text)) in files.iter().enumerate() {
            krate.files.push(rel.clone());
            let file = syn::parse_file(text).unwrap_or_else(|e| panic!("src/{rel}: {e}"));
            krate.items(
                file_module(rel),
                index,
                &file.items,
                false,
                &mut test_modules,
            );
        }
        // A module declared `#[cfg(test)] mod x;`: everything under it is test code.
        for test in test_modules {
            for (path, module) in krate.modules.iter_mut() {
                if path.starts_with(&test) {
                    module.test = true;
                }
            }
        }
        krate
    }

    fn items(
        &mut self,
        path: ModPath,
        file: usize,
        items: &[syn::Item],
        test: bool,
        test_modules: &mut Vec<ModPath>,
    ) {
        let module = self.modules.entry(path.clone()).or_default();
        module.file = file;
        module.test |= test;
        for item in items {
            let test = test || is_cfg_test(item_attrs(item));
            match item {
                syn::Item::Mod(m) => {
                    let child = [path.clone(), vec![m.ident.to_string()]].concat();
                    match &m.content {
                        Some((_, inner)) => self.items(child, file, inner, test, test_modules),
                        None if test => test_modules.push(child),
                        None => {}
                    }
                }
                syn::Item::Use(u) => {
                    let reexport = !matches!(u.vis, syn::Visibility::Inherited);
                    let mut found = Vec::new();
                    flatten_use(&u.tree, &[], &mut found);
                    for (name, p, glob) in found {
                        let module = self.modules.get_mut(&path).unwrap();
                        if glob {
                            module.globs.push(p.clone());
                        } else if name != "_" {
                            module.uses.insert(name, p.clone());
                        }
                        self.refs.push(Ref {
                            module: path.clone(),
                            path: p,
                            reexport,
                            test,
                        });
                    }
                }
                _ => {
                    if let Some(name) = item_name(item) {
                        self.modules.get_mut(&path).unwrap().items.insert(name);
                    }
                    let mut paths = Paths {
                        krate: self,
                        module: path.clone(),
                        test,
                    };
                    syn::visit::visit_item(&mut paths, item);
                }
            }
        }
    }

    /// `path` as written in `module`, from the crate root: `crate::`, `self::` and `super::`
    /// spelled out; any other start is looked up in `module`.
    fn absolute(module: &[String], path: &[String]) -> Option<ModPath> {
        let (first, rest) = path.split_first()?;
        match first.as_str() {
            "crate" => Some(rest.to_vec()),
            "self" => Some([module, rest].concat()),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
                Some([&base[..], rest].concat())
            }
            _ => Some([module, path].concat()),
        }
    }

    /// What `path`, written in `module`, names.
    fn resolve(&self, module: &[String], path: &[String], depth: u8) -> Option<Target> {
        let absolute = Self::absolute(module, path)?;
        self.lookup(&[], &absolute, depth)
    }

    /// What `rest` names in `module`: a child module, an item defined here, or through an
    /// import, a re-export or a glob.
    fn lookup(&self, module: &[String], rest: &[String], depth: u8) -> Option<Target> {
        if depth > 32 {
            return None;
        }
        let Some((first, tail)) = rest.split_first() else {
            return Some(Target::Module(module.to_vec()));
        };
        let child = [module, std::slice::from_ref(first)].concat();
        if self.modules.contains_key(&child) {
            return self.lookup(&child, tail, depth + 1);
        }
        let here = self.modules.get(module)?;
        if here.items.contains(first) {
            return Some(Target::Item(here.file));
        }
        if let Some(imported) = here.uses.get(first) {
            if imported.len() > 1 || imported[0] != *first {
                return self.resolve(module, &[imported, tail].concat(), depth + 1);
            }
        }
        here.globs
            .iter()
            .find_map(|glob| match self.resolve(module, glob, depth + 1) {
                Some(Target::Module(source)) => self.lookup(&source, rest, depth + 1),
                _ => None,
            })
    }

    fn file_of(&self, target: &Target) -> usize {
        match target {
            Target::Item(file) => *file,
            Target::Module(path) => self.modules[path].file,
        }
    }

    /// The file import graph (see the module doc): file → file it imports → one path that
    /// makes the edge.
    fn file_graph(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let test_files: BTreeSet<usize> = self
            .modules
            .values()
            .filter(|m| m.test)
            .map(|m| m.file)
            .collect();
        let test_files: BTreeSet<usize> = test_files
            .into_iter()
            .filter(|f| {
                self.modules
                    .values()
                    .filter(|m| m.file == *f)
                    .all(|m| m.test)
            })
            .collect();
        let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for r in &self.refs {
            let module = &self.modules[&r.module];
            if r.test || r.reexport || module.test {
                continue;
            }
            let Some(target) = self.resolve(&r.module, &r.path, 0) else {
                continue;
            };
            let (from, to) = (module.file, self.file_of(&target));
            let own = file_module(&self.files[from]);
            let enclosing =
                (0..own.len()).any(|n| self.modules.get(&own[..n]).is_some_and(|m| m.file == to));
            if from == to || enclosing || test_files.contains(&to) {
                continue;
            }
            graph
                .entry(self.files[from].clone())
                .or_default()
                .entry(self.files[to].clone())
                .or_insert_with(|| r.path.join("::"));
        }
        graph
    }

    /// Top-level module → the top-level modules it refers to, and every file naming `crate::cli`.
    fn module_graph(&self) -> (BTreeMap<String, BTreeSet<String>>, Vec<String>) {
        let tops: BTreeSet<&String> = self
            .modules
            .keys()
            .filter(|p| p.len() == 1)
            .map(|p| &p[0])
            .collect();
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut cli_importers = BTreeSet::new();
        for r in &self.refs {
            let Some(from) = r.module.first() else {
                continue;
            };
            let node = graph.entry(from.clone()).or_default();
            let Some(to) = Self::absolute(&r.module, &r.path).and_then(|p| p.first().cloned())
            else {
                continue;
            };
            if !tops.contains(&to) || to == *from {
                continue;
            }
            if to == "cli" {
                cli_importers.insert(self.files[self.modules[&r.module].file].clone());
            }
            node.insert(to);
        }
        (graph, cli_importers.into_iter().collect())
    }
}

fn read_src() -> Crate {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let path = entry.unwrap().into_path();
        if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            if rel != "main.rs" {
                files.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    Crate::parse(&files)
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

/// Every file on a cycle, each with the shortest cycle through it (breadth-first), a cycle
/// named once: `a.rs → b.rs (super::b::X) → a.rs (super::a::Y)`.
fn file_cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut cycles = Vec::new();
    for start in graph.keys() {
        let mut parent: BTreeMap<&String, &String> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        let mut closing = None;
        while let Some(node) = queue.pop_front() {
            for next in graph.get(node).into_iter().flat_map(|e| e.keys()) {
                if next == start {
                    closing = Some(node);
                    break;
                }
                if !parent.contains_key(next) {
                    parent.insert(next, node);
                    queue.push_back(next);
                }
            }
            if closing.is_some() {
                break;
            }
        }
        let Some(mut node) = closing else { continue };
        let mut cycle = vec![start];
        while node != start {
            cycle.push(node);
            node = parent[node];
        }
        cycle[1..].reverse();
        let members: BTreeSet<&String> = cycle.iter().copied().collect();
        if seen.insert(members) {
            let mut text = format!("src/{start}");
            for (i, from) in cycle.iter().enumerate() {
                let to = cycle.get(i + 1).unwrap_or(&start);
                text += &format!(" → src/{to} ({})", graph[*from][*to]);
            }
            cycles.push(text);
        }
    }
    cycles
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
    let (_, importers) = read_src().module_graph();
    assert!(
        importers.is_empty(),
        "crate::cli is imported outside src/cli/: {importers:?}"
    );
}

#[test]
fn the_modules_form_no_cycle_and_point_down() {
    let (graph, _) = read_src().module_graph();
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
fn the_files_form_no_cycle() {
    let krate = read_src();
    let graph = krate.file_graph();
    // The checker sees the repository: the pairwise kernels import the loss they compute.
    assert!(
        graph["pairwise/sse.rs"].contains_key("pairwise/loss.rs"),
        "{:?}",
        graph["pairwise/sse.rs"]
    );
    let cycles = file_cycles(&graph);
    assert!(
        cycles.is_empty(),
        "file import cycles:\n{}",
        cycles.join("\n")
    );
}

fn files(sources: &[(&str, &str)]) -> Crate {
    Crate::parse(
        &sources
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect::<Vec<_>>(),
    )
}

#[test]
fn the_checker_sees_what_it_must() {
    // Top-level modules: grouped imports, nested groups, paths in expressions and macros, not
    // comments or strings, `super::` spelled out.
    let krate = files(&[
        (
            "lib.rs",
            "pub mod a; pub mod text; pub mod eval; pub mod links; pub mod cli;",
        ),
        (
            "a/mod.rs",
            "use crate::{text::X, eval::{a, b}}; // crate::cli\n\
             mod b; fn f() { let s = \"crate::cli::x\"; assert!(super::links::y()); }",
        ),
        ("a/b.rs", "fn g() { super::super::cli::run(); }"),
        ("text.rs", ""),
        ("eval.rs", ""),
        ("links.rs", ""),
        ("cli.rs", ""),
    ]);
    let (graph, cli) = krate.module_graph();
    assert_eq!(
        graph["a"],
        BTreeSet::from(["text", "eval", "links", "cli"].map(String::from))
    );
    assert_eq!(cli, ["a/b.rs"]);

    // Files: an item's defining file through re-exports, globs and serde's string paths; no
    // edges to enclosing modules, from re-exports or from test code.
    let krate = files(&[
        ("lib.rs", "pub mod p; pub mod q;"),
        (
            "p/mod.rs",
            "mod a; mod b; mod c; #[cfg(test)] mod util; pub use a::Shared; pub struct Own;\n\
             pub(crate) use c::*; fn run() { b::go() }",
        ),
        ("p/a.rs", "use super::Own; pub struct Shared; #[cfg(test)] mod tests { use super::super::util::h; }"),
        ("p/b.rs", "use super::{Shared, Deep}; pub fn go() {}"),
        ("p/c.rs", "pub struct Deep; #[derive(S)] struct T { #[serde(with = \"crate::q::bits\")] x: u8 }"),
        ("p/util.rs", "use super::b::go;"),
        ("q.rs", "pub mod bits {} pub fn f() { crate::p::Own; }"),
    ]);
    let graph = krate.file_graph();
    let edges: Vec<(&str, &str)> = graph
        .iter()
        .flat_map(|(f, t)| t.keys().map(move |t| (f.as_str(), t.as_str())))
        .collect();
    assert_eq!(
        edges,
        [
            ("p/b.rs", "p/a.rs"),
            ("p/b.rs", "p/c.rs"),
            ("p/c.rs", "q.rs"),
            ("p/mod.rs", "p/b.rs"),
            ("q.rs", "p/mod.rs")
        ]
    );
    assert_eq!(graph["p/b.rs"]["p/c.rs"], "super::Deep");
    assert_eq!(
        file_cycles(&graph),
        ["src/p/b.rs → src/p/c.rs (super::Deep) → src/q.rs (crate::q::bits) → src/p/mod.rs (crate::p::Own) → src/p/b.rs (b::go)"]
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
