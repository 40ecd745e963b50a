//! Task-phrase judgments: what the guides call a task, mapped to the API pages they send the
//! reader to.
//!
//! The Rust docs ship guides beside the API pages (the book, Rust by Example, the reference,
//! the nomicon, the edition guide). A guide page or section is about a task ("Boxing errors",
//! "Input functions", "Reading lines") and links the API items that do it. Its title or
//! heading is the query and the items it links are relevant, with every re-export of them:
//! the judgment comes from the guide's author, not from the words of the page being matched,
//! so a model trained on it learns what answers a task rather than which page repeats the
//! query. A page or section counts when it links one to three distinct items: more is a list,
//! not an answer. Translations (Rust by Example's `es`, `ja`, `zh`, `ko`), whole-book
//! `print.html` pages and generic headings ("See also", "Summary") are left out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use scraper::{Html, Selector};
use url::Url;

use super::known_items::{numbered, Item, KnownItem};
use super::QueryClass;
use crate::corpus::html::html_files;

/// The guides read, under the docs directory.
const GUIDES: [&str; 5] = [
    "book",
    "rust-by-example",
    "reference",
    "nomicon",
    "edition-guide",
];
/// Translations and whole-book pages.
const SKIPPED: [&str; 8] = [
    "/es/",
    "/ja/",
    "/zh/",
    "/zh-CN/",
    "/ko/",
    "print.html",
    "toc.html",
    "404.html",
];
/// Headings that name no task.
const GENERIC: [&str; 8] = [
    "see also",
    "summary",
    "example",
    "examples",
    "note",
    "notes",
    "exercise",
    "keyboard shortcuts",
];
/// Most distinct items a task may link.
const MAX_LINKED: usize = 3;

/// Derives up to `max` task queries (a deterministic sample by `seed`) from the guides under
/// `dir`, whose documented `items` ([`super::known_items::items`]) are the answers.
pub fn derive_tasks(
    dir: &Path,
    items: &[Item],
    max: usize,
    seed: u64,
) -> anyhow::Result<Vec<KnownItem>> {
    // Every page of an item, by any of its pages.
    let mut pages_of: HashMap<String, Vec<String>> = HashMap::new();
    for item in items {
        for id in &item.ids {
            pages_of.insert(id.clone(), item.ids.clone());
        }
    }
    let mut files = Vec::new();
    for guide in GUIDES {
        let root = dir.join(guide);
        if root.is_dir() {
            files.extend(html_files(&root)?);
        }
    }
    let base = Url::parse("file:///docs/").expect("valid");
    let mut tasks: Vec<(String, Vec<String>)> = files
        .par_iter()
        .filter_map(|path| {
            let id = path.strip_prefix(dir).ok()?.to_str()?.replace('\\', "/");
            if SKIPPED.iter().any(|s| format!("/{id}").contains(s)) {
                return None;
            }
            let html = std::fs::read_to_string(path).ok()?;
            Some(page_tasks(&html, &base.join(&id).ok()?, &base, &pages_of))
        })
        .flatten()
        .collect();
    // One judgment per query text: the first (by page order) wins.
    tasks.sort();
    let mut seen = BTreeSet::new();
    tasks.retain(|(query, _)| seen.insert(query.to_lowercase()));
    tasks.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    tasks.truncate(max);
    Ok(numbered(tasks, "tk", QueryClass::Task))
}

/// The tasks of one guide page at `url`: its title with the items its introduction links, and
/// each `h2`/`h3` section's heading with the items the section links.
fn page_tasks(
    html: &str,
    url: &Url,
    base: &Url,
    pages_of: &HashMap<String, Vec<String>>,
) -> Vec<(String, Vec<String>)> {
    let doc = Html::parse_document(html);
    let selector = Selector::parse("main h1, main h2, main h3, main a[href]").expect("valid");
    // The title takes the items its introduction (before the first section) links; each
    // section, those linked under its heading.
    let mut intro_links = BTreeSet::new();
    let mut title: Option<String> = None;
    let mut sections: Vec<(String, BTreeSet<String>)> = Vec::new();
    for element in doc.select(&selector) {
        let name = element.value().name();
        if name == "a" {
            let Some(target) = element
                .value()
                .attr("href")
                .and_then(|h| item_page(h, url, base))
                .filter(|t| pages_of.contains_key(t))
            else {
                continue;
            };
            match sections.last_mut() {
                Some((_, links)) => links.insert(target),
                None => intro_links.insert(target),
            };
            continue;
        }
        let text = element.text().collect::<String>();
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if name == "h1" {
            title.get_or_insert(text);
        } else {
            sections.push((text, BTreeSet::new()));
        }
    }
    let mut out = Vec::new();
    let mut push = |query: String, links: &BTreeSet<String>| {
        let query = query.trim_end_matches(':').trim().to_string();
        if links.is_empty()
            || links.len() > MAX_LINKED
            || query.chars().filter(|c| c.is_alphabetic()).count() < 3
            || GENERIC.contains(&query.to_lowercase().as_str())
        {
            return;
        }
        let mut relevant: BTreeMap<String, ()> = BTreeMap::new();
        for link in links {
            for id in &pages_of[link] {
                relevant.insert(id.clone(), ());
            }
        }
        out.push((query, relevant.into_keys().collect()));
    };
    if let Some(title) = title {
        push(title, &intro_links);
    }
    for (heading, links) in &sections {
        push(heading.clone(), links);
    }
    out
}

/// The docs-relative id of an item page a link points to (relative, or on
/// doc.rust-lang.org), without its fragment.
fn item_page(href: &str, page: &Url, base: &Url) -> Option<String> {
    let target = match Url::parse(href) {
        Ok(absolute) => {
            if absolute.host_str() != Some("doc.rust-lang.org") {
                return None;
            }
            let path = absolute.path().trim_start_matches('/');
            let path = path
                .strip_prefix("stable/")
                .or_else(|| path.strip_prefix("nightly/"))
                .or_else(|| path.strip_prefix("beta/"))
                .unwrap_or(path);
            path.to_string()
        }
        Err(_) => {
            let joined = page.join(href).ok()?;
            joined.path().strip_prefix(base.path())?.to_string()
        }
    };
    let name = target.rsplit('/').next()?;
    super::known_items::item_of(name)?;
    Some(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, html: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, html).unwrap();
    }

    #[test]
    fn titles_and_sections_link_their_items() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let item = |summary: &str| {
            format!(
                "<html><head><meta name=\"description\" content=\"{summary}\"></head><body></body></html>"
            )
        };
        write(
            d,
            "std/collections/struct.HashMap.html",
            &item("A hash map."),
        );
        write(
            d,
            "std/collections/hash_map/struct.HashMap.html",
            &item("A hash map."),
        );
        write(d, "std/boxed/struct.Box.html", &item("A pointer type."));
        write(d, "std/error/trait.Error.html", &item("Errors."));
        write(
            d,
            "rust-by-example/std/hash.html",
            r#"<html><body><main><h1>Storing values by key</h1>
            <p>Use <a href="../../std/collections/struct.HashMap.html#method.new">HashMap</a>.</p>
            <h2>See also:</h2><p><a href="https://doc.rust-lang.org/std/boxed/struct.Box.html">Box</a></p>
            <h2>Boxing errors</h2><p><a href="../../std/boxed/struct.Box.html">Box</a> and
            <a href="https://doc.rust-lang.org/stable/std/error/trait.Error.html">Error</a>,
            <a href="https://example.org/std/error/trait.Error.html">elsewhere</a></p>
            </main></body></html>"#,
        );
        write(
            d,
            "rust-by-example/es/std/hash.html",
            r#"<html><body><main><h1>Valores</h1><a href="../../../std/boxed/struct.Box.html">Box</a></main></body></html>"#,
        );
        write(
            d,
            "book/print.html",
            r#"<html><body><main><h1>All</h1><a href="../std/boxed/struct.Box.html">Box</a></main></body></html>"#,
        );
        let items = super::super::known_items::items(d).unwrap();
        let mut tasks = derive_tasks(d, &items, 10, 1).unwrap();
        tasks.sort_by(|a, b| a.query.cmp(&b.query));
        let got: Vec<(&str, &[String])> = tasks
            .iter()
            .map(|t| (t.query.as_str(), t.relevant.as_slice()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "Boxing errors",
                    &[
                        "std/boxed/struct.Box.html".to_string(),
                        "std/error/trait.Error.html".into()
                    ][..]
                ),
                (
                    "Storing values by key",
                    &[
                        "std/collections/hash_map/struct.HashMap.html".to_string(),
                        "std/collections/struct.HashMap.html".into(),
                    ][..]
                ),
            ]
        );
        assert!(tasks.iter().all(|t| t.class == QueryClass::Task));
    }
}
