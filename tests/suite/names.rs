//! Names as users type them, on real rustdoc pages (`tests/fixtures/rustdoc`): HTML ingest
//! reads the item's name and path from rustdoc's page heading, the default search finds the
//! item however its name is typed (`HashMap`, `hash_map`, `hash map`, `hashmap`,
//! `std::collections::HashMap`), and the reranker's name features equal a brute-force
//! computation from the stored names.

use std::path::{Path, PathBuf};

use rankd::corpus::html::read_pages;
use rankd::corpus::Document;
use rankd::features::{FeatureSet, Prf};
use rankd::search::{Engine, SearchQuery};
use rankd::text::{IndexConfig, ModelKind, TextIndex};

const PAGES: [&str; 4] = [
    "std/collections/struct.HashMap.html",
    "std/collections/hash_map/index.html",
    "std/fs/fn.read_to_string.html",
    "std/hash/struct.RandomState.html",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rustdoc")
}

fn pages() -> Vec<Document> {
    let dir = fixtures();
    let files: Vec<PathBuf> = PAGES.iter().map(|p| dir.join(p)).collect();
    let base = url::Url::parse("https://doc.rust-lang.org/").unwrap();
    let corpus = read_pages(
        &dir,
        &files,
        &base,
        rankd::corpus::html::HtmlOptions::default(),
        &|| {},
    );
    assert!(corpus.errors.is_empty(), "{:?}", corpus.errors);
    corpus.documents
}

fn engine(dir: &Path) -> Engine {
    let index = TextIndex::open_or_create(dir, Some(IndexConfig::default())).unwrap();
    index.upsert(pages()).unwrap();
    Engine::new(index)
}

#[test]
fn html_ingest_reads_the_item_path_and_name_from_the_page_heading() {
    let names: Vec<(String, String, String)> = pages()
        .into_iter()
        .map(|d| {
            let kind = d.extra.get("kind").and_then(|k| k.as_str()).unwrap_or("");
            (d.id, d.name, kind.to_string())
        })
        .collect();
    let want = [
        (
            "std/collections/hash_map/index.html",
            "std::collections::hash_map",
            "module",
        ),
        (
            "std/collections/struct.HashMap.html",
            "std::collections::HashMap",
            "struct",
        ),
        (
            "std/fs/fn.read_to_string.html",
            "std::fs::read_to_string",
            "function",
        ),
        (
            "std/hash/struct.RandomState.html",
            "std::hash::RandomState",
            "struct",
        ),
    ];
    for (id, name, kind) in want {
        assert!(
            names
                .iter()
                .any(|(i, n, k)| i == id && n == name && k == kind),
            "{id}: {names:?}"
        );
    }
}

#[test]
fn the_item_ranks_first_however_its_name_is_typed() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    for (typed, id) in [
        ("HashMap", "std/collections/struct.HashMap.html"),
        ("hash_map", "std/collections/struct.HashMap.html"),
        ("hash map", "std/collections/struct.HashMap.html"),
        ("hashmap", "std/collections/struct.HashMap.html"),
        (
            "std::collections::HashMap",
            "std/collections/struct.HashMap.html",
        ),
        ("random state", "std/hash/struct.RandomState.html"),
        ("read to string", "std/fs/fn.read_to_string.html"),
        ("hashmap struct", "std/collections/struct.HashMap.html"),
        ("hash_map module", "std/collections/hash_map/index.html"),
        ("std::fs::read_to_string", "std/fs/fn.read_to_string.html"),
    ] {
        let hits = engine.search(&SearchQuery::new(typed, 4)).unwrap().hits;
        assert_eq!(hits.first().map(|h| h.id.as_str()), Some(id), "{typed}");
    }
}

/// The query as a name, and a name's trailing paths, reduced to lowercase letters and digits
/// (written apart from `rankd::features::name`, with a character loop instead of its helpers).
fn squeeze(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The words of an identifier: split at `_` and before an uppercase letter that follows a
/// lowercase one (enough for these pages' ASCII names).
fn words(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut prev_lower = false;
    for c in s.chars() {
        if !c.is_ascii_alphanumeric() {
            prev_lower = false;
            out.push(String::new());
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            out.push(String::new());
        }
        if out.is_empty() {
            out.push(String::new());
        }
        out.last_mut().unwrap().push(c.to_ascii_lowercase());
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
    }
    out.retain(|w| !w.is_empty());
    out
}

fn brute_force(query: &str, name: &str) -> [f32; 3] {
    let segments: Vec<&str> = name.split("::").collect();
    let q = squeeze(query);
    let (mut exact, mut prefix) = (0.0, 0.0);
    for start in 0..segments.len() {
        let tail = squeeze(&segments[start..].concat());
        if !q.is_empty() && tail == q {
            exact = 1.0;
        }
        if !q.is_empty() && tail.starts_with(&q) {
            prefix = 1.0;
        }
    }
    let last = words(segments.last().unwrap());
    let query_words = words(query);
    let covered = last.iter().filter(|w| query_words.contains(w)).count();
    let coverage = if name.is_empty() || last.is_empty() {
        0.0
    } else {
        covered as f32 / last.len() as f32
    };
    [exact, prefix, coverage]
}

#[test]
fn name_features_equal_a_brute_force_computation() {
    let dir = tempfile::tempdir().unwrap();
    let engine = engine(dir.path());
    let index = &engine.index;
    let searcher = index.reader.searcher();
    let set = FeatureSet::current();
    let cols: Vec<usize> = ["name.exact", "name.prefix", "name.coverage"]
        .iter()
        .map(|n| set.get(n).unwrap())
        .collect();
    let mut exact = 0;
    for q in [
        "HashMap",
        "hash map",
        "hash",
        "std::collections",
        "collections::hash_map",
        "read_to_string",
        "random",
        "state random",
        "string",
    ] {
        let window = engine
            .window(&searcher, q, ModelKind::Bm25F, 10, Prf::Skip)
            .unwrap()
            .unwrap();
        for (row, c) in window.candidates.iter().enumerate() {
            let doc: tantivy::TantivyDocument = searcher.doc(c.address).unwrap();
            let name = index.stored(&doc).name;
            let got: Vec<f32> = cols.iter().map(|&c| window.features.row(row)[c]).collect();
            assert_eq!(got, brute_force(q, &name), "{q:?} on {name:?}");
            exact += usize::from(got[0] == 1.0);
        }
    }
    assert!(exact >= 4, "only {exact} exact matches");
}
