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
//! under `arch/` (about 20 000 pages named after CPU instructions, whose summaries repeat the
//! instruction's name: they would swamp a uniform sample with queries no one types).

use std::collections::BTreeMap;
use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

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
}

/// Derives up to `max` known-item queries from the documentation in `dir`, a deterministic
/// sample (by `seed`) over the distinct documented items.
pub fn derive(dir: &Path, max: usize, seed: u64) -> anyhow::Result<Vec<KnownItem>> {
    let files = html_files(dir)?;
    let items: Vec<((String, String, String), String)> = files
        .par_iter()
        .filter_map(|path| {
            if path.components().any(|c| c.as_os_str() == "arch") {
                return None;
            }
            let name = path.file_name()?.to_str()?;
            let (kind, item) = item_of(name)?;
            let summary = summary(path)?;
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
    // The same item re-exported: one query, every page relevant.
    let mut groups: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for (key, id) in items {
        groups.entry(key).or_default().push(id);
    }
    let mut candidates: Vec<(String, Vec<String>)> = groups
        .into_iter()
        .filter_map(|((_, name, summary), mut ids)| {
            let query = query_for(&name, &summary)?;
            ids.sort();
            Some((query, ids))
        })
        .collect();
    candidates.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    candidates.truncate(max);
    Ok(candidates
        .into_iter()
        .enumerate()
        .map(|(i, (query, relevant))| KnownItem {
            qid: format!("ki{:05}", i + 1),
            query,
            relevant,
        })
        .collect())
}

/// The items as a TREC queries file (`qid text` per line) and TREC qrels.
pub(crate) fn to_trec(items: &[KnownItem]) -> (String, String) {
    let mut queries = String::new();
    let mut qrels = String::new();
    for item in items {
        queries.push_str(&format!("{} {}\n", item.qid, item.query));
        for id in &item.relevant {
            qrels.push_str(&format!("{} 0 {id} 1\n", item.qid));
        }
    }
    (queries, qrels)
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
fn item_of(file_name: &str) -> Option<(&str, &str)> {
    let stem = file_name.strip_suffix(".html")?;
    let (kind, name) = stem.split_once('.')?;
    (ITEM_KINDS.contains(&kind) && !name.is_empty() && !name.contains('.')).then_some((kind, name))
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
fn name_words(name: &str) -> Vec<String> {
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
        let items = derive(dir.path(), 10, 1).unwrap();
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(items[0].query, "vec contiguous growable array type");
        assert_eq!(
            items[0].relevant,
            ["alloc/vec/struct.Vec.html", "std/vec/struct.Vec.html"]
        );
    }
}
