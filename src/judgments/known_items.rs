//! Known-item judgments derived from the Rust documentation's own structure.
//!
//! Every API item page (`std/vec/struct.Vec.html`, `core/iter/trait.Iterator.html`, ...)
//! carries the item's one-line summary in `<meta name="description">`, written by the item's
//! authors, not by us. A known-item query is what a user who remembers the item roughly would
//! type: the words of the item's name (`Vec`; `split_whitespace` → `split whitespace`) and the
//! first content words of its summary. The relevant documents are the item's page and its
//! re-exports (the same kind, name and summary under `std`, `core` and `alloc`): grade 1.
//! Items without a summary (rustdoc then writes "API documentation for the Rust `X` ...") are
//! skipped, as are items whose query would be a single word, and the platform intrinsics
//! under `arch/` and `core/core_arch/` (about 25 000 pages named after CPU instructions, whose summaries repeat the
//! instruction's name: they would swamp a uniform sample with queries no one types).

use std::collections::BTreeMap;
use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::QueryClass;
use crate::corpus::html::html_files;

/// Item kinds rustdoc writes one page for.
const ITEM_KINDS: [&str; 10] = [
    "struct",
    "enum",
    "trait",
    "fn",
    "macro",
    "type",
    "constant",
    "union",
    "static",
    "primitive",
];
/// Summary words added to the name words.
const SUMMARY_WORDS: usize = 4;
/// Pages are only read up to this many bytes: the `<head>` is far smaller.
const HEAD_BYTES: usize = 16 * 1024;

/// Known-item queries derived unless told otherwise (`rankd known-items`, the demo), and the
/// seed of their sample.
pub(crate) const DEFAULT_QUERIES: usize = 2000;
pub(crate) const DEFAULT_SEED: u64 = 1;

/// One derived query and its relevant documents.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownItem {
    pub qid: String,
    pub query: String,
    /// Ids (paths under the docs directory) of the item's pages.
    pub relevant: Vec<String>,
    pub class: QueryClass,
}

/// One documented item: its kind, name, summary and every page of it (re-exports of the same
/// kind, name and summary are one item).
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub kind: String,
    pub name: String,
    pub summary: Option<String>,
    /// Sorted.
    pub ids: Vec<String>,
}

/// What makes pages one item: kind, name and summary.
type ItemKey = (String, String, Option<String>);

/// Every item page under `dir` but the platform intrinsics (`arch/`, and `core/core_arch/`
/// where rustdoc also writes them), grouped into items.
pub fn items(dir: &Path) -> anyhow::Result<Vec<Item>> {
    let files = html_files(dir)?;
    let pages: Vec<(ItemKey, String)> = files
        .par_iter()
        .filter_map(|path| {
            if path
                .components()
                .any(|c| c.as_os_str() == "arch" || c.as_os_str() == "core_arch")
            {
                return None;
            }
            let name = path.file_name()?.to_str()?;
            let (kind, item) = item_of(name)?;
            let summary = summary(path);
            let id = path
                .strip_prefix(dir)
                .ok()?
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            Some(((kind.to_string(), item.to_string(), summary), id))
        })
        .collect();
    let mut groups: BTreeMap<ItemKey, Vec<String>> = BTreeMap::new();
    for (key, id) in pages {
        groups.entry(key).or_default().push(id);
    }
    Ok(groups
        .into_iter()
        .map(|((kind, name, summary), mut ids)| {
            ids.sort();
            Item {
                kind,
                name,
                summary,
                ids,
            }
        })
        .collect())
}

/// Derives up to `max` known-item queries from the documented `items` ([`items`]), a
/// deterministic sample (by `seed`).
pub fn derive(items: &[Item], max: usize, seed: u64) -> Vec<KnownItem> {
    let mut candidates: Vec<(String, Vec<String>)> = items
        .iter()
        .filter_map(|item| {
            let query = query_for(&item.name, item.summary.as_deref()?)?;
            Some((query, item.ids.clone()))
        })
        .collect();
    candidates.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    candidates.truncate(max);
    numbered(candidates, "ki", QueryClass::KnownItem)
}

/// Derives up to `max` item-name queries: an item's name as users type it, one form per item
/// chosen by `seed` among the words spaced (`hash map`), joined (`hashmap`), the identifier
/// (`HashMap`) and its path (`std::collections::HashMap`). Only items whose name no other item
/// shares (in any letter case) are asked for: `iter` names a hundred `Iter`s, and no one of
/// them is the answer; and only items users type ([`typed_by_users`]).
pub fn derive_names(items: &[Item], max: usize, seed: u64) -> Vec<KnownItem> {
    let mut owners: BTreeMap<String, usize> = BTreeMap::new();
    for item in items {
        *owners.entry(item.name.to_lowercase()).or_default() += 1;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut candidates: Vec<(String, Vec<String>)> = items
        .iter()
        .filter(|item| owners[&item.name.to_lowercase()] == 1 && typed_by_users(item))
        .map(|item| {
            let forms = name_forms(item);
            let query = forms[rand::Rng::random_range(&mut rng, 0..forms.len())].clone();
            (query, item.ids.clone())
        })
        .collect();
    candidates.shuffle(&mut rng);
    candidates.truncate(max);
    numbered(candidates, "nm", QueryClass::ItemName)
}

/// Whether users type the item's name: it is in `std` (what programs import), and not one of
/// the compiler's intrinsics.
fn typed_by_users(item: &Item) -> bool {
    item.ids
        .iter()
        .any(|id| id.starts_with("std/") && !id.starts_with("std/intrinsics/"))
}

/// The ways a user types an item's name (distinct, in a fixed order); a macro's identifier
/// and path end with its `!`.
fn name_forms(item: &Item) -> Vec<String> {
    let words = name_words(&item.name);
    let bang = if item.kind == "macro" { "!" } else { "" };
    let mut forms = vec![
        words.join(" "),
        words.concat(),
        format!("{}{bang}", item.name),
    ];
    // The path of the item's first `std` page, else its first page.
    let page = item
        .ids
        .iter()
        .find(|id| id.starts_with("std/"))
        .unwrap_or(&item.ids[0]);
    let mut path: Vec<&str> = page.split('/').collect();
    path.pop();
    if item.kind != "primitive" && !path.is_empty() {
        forms.push(format!("{}::{}{bang}", path.join("::"), item.name));
    }
    let mut seen = std::collections::HashSet::new();
    forms.retain(|f| seen.insert(f.clone()));
    forms
}

/// Queries numbered `{prefix}00001`, ... in order.
pub(crate) fn numbered(
    candidates: Vec<(String, Vec<String>)>,
    prefix: &str,
    class: QueryClass,
) -> Vec<KnownItem> {
    candidates
        .into_iter()
        .enumerate()
        .map(|(i, (query, relevant))| KnownItem {
            qid: format!("{prefix}{:05}", i + 1),
            query,
            relevant,
            class,
        })
        .collect()
}

/// Judged queries as a TREC queries file (`qid text` per line) and TREC qrels (relevant
/// documents, by id).
pub(crate) fn to_trec(queries: &[&crate::training::JudgedQuery]) -> (String, String) {
    let mut text = String::new();
    let mut qrels = String::new();
    for q in queries {
        text.push_str(&format!("{} {}\n", q.qid, q.text));
        let mut relevant: Vec<(&String, &i32)> = q.grades.iter().collect();
        relevant.sort();
        for (id, grade) in relevant {
            qrels.push_str(&format!("{} 0 {id} {grade}\n", q.qid));
        }
    }
    (text, qrels)
}

/// Judged queries of the items.
pub fn judged(items: &[KnownItem]) -> Vec<crate::training::JudgedQuery> {
    items
        .iter()
        .map(|item| crate::training::JudgedQuery {
            qid: item.qid.clone(),
            text: item.query.clone(),
            grades: item.relevant.iter().map(|id| (id.clone(), 1)).collect(),
        })
        .collect()
}

/// `struct.Vec.html` → `("struct", "Vec")`.
pub(crate) fn item_of(file_name: &str) -> Option<(&str, &str)> {
    let stem = file_name.strip_suffix(".html")?;
    let (kind, name) = stem.split_once('.')?;
    // `macro.print!.html` is rustdoc's redirect to `macro.print.html`, not a page.
    (ITEM_KINDS.contains(&kind) && !name.is_empty() && !name.contains(['.', '!']))
        .then_some((kind, name))
}

/// The page's `<meta name="description">`, unless it is the generic sentence rustdoc writes
/// for an undocumented item.
fn summary(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = vec![0; HEAD_BYTES];
    let mut file = std::fs::File::open(path).ok()?;
    let n = file.read(&mut head).ok()?;
    head.truncate(n);
    let text = String::from_utf8_lossy(&head);
    let end = text.find("</head>").map(|i| i + "</head>".len())?;
    let html = scraper::Html::parse_document(&text[..end]);
    let selector = scraper::Selector::parse(r#"meta[name="description"]"#).expect("valid");
    let content = html
        .select(&selector)
        .next()?
        .value()
        .attr("content")?
        .trim()
        .to_string();
    (!content.is_empty() && !content.starts_with("API documentation for the Rust"))
        .then_some(content)
}

/// Name words plus the first summary words that are not stop words or name words.
fn query_for(name: &str, summary: &str) -> Option<String> {
    let mut words = name_words(name);
    let name_count = words.len();
    let summary_words = crate::text::schema::tokens(crate::text::config::Analyzer::En, summary);
    for w in summary_words {
        if words.len() >= name_count + SUMMARY_WORDS {
            break;
        }
        if w.chars().any(|c| c.is_alphabetic()) && !words.contains(&w) {
            words.push(w);
        }
    }
    (words.len() >= 2).then(|| words.join(" "))
}

/// `split_whitespace` → `[split, whitespace]`, `HashMap` → `[hash, map]`, `Vec` → `[vec]`.
pub(crate) fn name_words(name: &str) -> Vec<String> {
    let mut words = Vec::new();
    for part in name.split('_').filter(|p| !p.is_empty()) {
        let mut current = String::new();
        let chars: Vec<char> = part.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            let boundary = c.is_uppercase()
                && i > 0
                && (chars[i - 1].is_lowercase()
                    || chars.get(i + 1).is_some_and(|n| n.is_lowercase()));
            if boundary && !current.is_empty() {
                words.push(current.to_lowercase());
                current.clear();
            }
            current.push(c);
        }
        if !current.is_empty() {
            words.push(current.to_lowercase());
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_words() {
        assert_eq!(name_words("split_whitespace"), ["split", "whitespace"]);
        assert_eq!(name_words("HashMap"), ["hash", "map"]);
        assert_eq!(name_words("Vec"), ["vec"]);
        assert_eq!(name_words("TcpStream"), ["tcp", "stream"]);
        assert_eq!(name_words("IOError"), ["io", "error"]);
    }

    #[test]
    fn item_pages_are_recognised() {
        assert_eq!(item_of("struct.Vec.html"), Some(("struct", "Vec")));
        assert_eq!(item_of("fn.spawn.html"), Some(("fn", "spawn")));
        assert_eq!(item_of("index.html"), None);
        assert_eq!(item_of("all.html"), None);
        assert_eq!(item_of("struct.Vec.js"), None);
        assert_eq!(item_of("macro.println!.html"), None, "a redirect");
    }

    #[test]
    fn derives_queries_from_summaries_and_groups_reexports() {
        let dir = tempfile::tempdir().unwrap();
        let page = |rel: &str, desc: &str| {
            let path = dir.path().join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(
                path,
                format!(
                    "<html><head><meta name=\"description\" content=\"{desc}\"><title>x</title></head><body>b</body></html>"
                ),
            )
            .unwrap();
        };
        let vec_desc = "A contiguous growable array type, written as `Vec&lt;T&gt;`.";
        page("std/vec/struct.Vec.html", vec_desc);
        page("alloc/vec/struct.Vec.html", vec_desc);
        page(
            "std/fn.spawn.html",
            "API documentation for the Rust `spawn` fn in crate `std`.",
        );
        page("std/index.html", "The Rust Standard Library");
        let items = derive(&super::items(dir.path()).unwrap(), 10, 1);
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(items[0].query, "vec contiguous growable array type");
        assert_eq!(
            items[0].relevant,
            ["alloc/vec/struct.Vec.html", "std/vec/struct.Vec.html"]
        );
        assert_eq!(items[0].class, QueryClass::KnownItem);

        // Names: every item whose name is its own, documented or not, in one of its forms.
        page("std/collections/struct.HashMap.html", "A hash map.");
        page("std/vec/struct.Iter.html", "An iterator over a vector.");
        page("std/slice/struct.Iter.html", "An iterator over a slice.");
        let names = derive_names(&super::items(dir.path()).unwrap(), 10, 1);
        let mut queries: Vec<&str> = names.iter().map(|n| n.query.as_str()).collect();
        queries.sort();
        assert_eq!(names.len(), 3, "Iter is two items' name: {names:?}");
        let hash_map = names
            .iter()
            .find(|n| n.relevant == ["std/collections/struct.HashMap.html"])
            .unwrap();
        assert!(
            [
                "hash map",
                "hashmap",
                "HashMap",
                "std::collections::HashMap"
            ]
            .contains(&hash_map.query.as_str()),
            "{hash_map:?}"
        );
        assert!(names
            .iter()
            .all(|n| n.class == QueryClass::ItemName && n.qid.starts_with("nm")));
    }

    #[test]
    fn name_forms_are_distinct() {
        let item = |kind: &str, name: &str, id: &str| Item {
            kind: kind.into(),
            name: name.into(),
            summary: None,
            ids: vec![id.into()],
        };
        assert_eq!(
            name_forms(&item(
                "struct",
                "HashMap",
                "std/collections/struct.HashMap.html"
            )),
            [
                "hash map",
                "hashmap",
                "HashMap",
                "std::collections::HashMap"
            ]
        );
        assert_eq!(
            name_forms(&item("fn", "spawn", "std/thread/fn.spawn.html")),
            ["spawn", "std::thread::spawn"]
        );
        assert_eq!(
            name_forms(&item("primitive", "u8", "std/primitive.u8.html")),
            ["u8"]
        );
        assert_eq!(
            name_forms(&item("macro", "println", "std/macro.println.html")),
            ["println", "println!", "std::println!"]
        );
    }
}
