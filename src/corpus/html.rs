//! A directory of HTML pages → documents: title, headings, visible body text, out-links
//! resolved to absolute URLs, and (second pass) the anchor text of every in-link collected
//! into the target's `anchor` field — the classic web-search field. An API page made by
//! rustdoc also gives the name and path of the item it documents (`name`) and its kind
//! (`kind`: `struct`, `trait`, ...; indexed with the name).
//!
//! Pages that only redirect (`<meta http-equiv="refresh">`, e.g. rustdoc's re-export stubs)
//! are not documents: links to them are followed to where they redirect.
//!
//! The head's indexing rules are honoured as a web crawler honours them:
//! - `<meta name="robots" content="noindex">` (or `none`; names and values case-insensitive,
//!   Google's robots meta specification): the page is skipped and counted
//!   ([`HtmlOptions::index_noindex`] keeps it). mdBook's whole-book `print.html` and its
//!   `toc.html` carry it. Its links are still *followed*, as Google follows a noindex page's
//!   links unless it also says `nofollow`: their anchor text reaches the pages they point to.
//!   They are no edges of the link graph, which is a graph of indexed documents (SPEC §2): a
//!   page outside the index has no node to pass PageRank from (Google too treats a page that
//!   stays noindex as nofollow in the long run, so it passes no rank).
//! - `nofollow` (or `none`): the page's links are not followed: no anchor text, no edges.
//! - `<link rel="canonical" href>` naming another page of the ingest: the page is a duplicate
//!   of that one and is folded onto it, as a redirect is: not a document, links to it count
//!   for the canonical page (its in-links and their anchor text), and its own links are
//!   dropped (they are the canonical page's again; counting them would double its votes).
//!   A canonical URL outside the ingest, or a cycle of them, is a hint not taken.
//! - Language: `<html lang>`, else `<meta http-equiv="Content-Language">`, else the page's
//!   own `hreflang` alternate, kept as the primary subtag ([`super::lang`]).
//!   `<link rel="alternate" hreflang href>` links the language versions of one page: every
//!   version takes the first (smallest) URL of the versions in the ingest as its
//!   [`Document::translation_of`], so `collapse=page` groups them even when their URLs do not
//!   show it (the index configuration's page rules cover paths like `/ja/`).
//!
//! Without `--base-url` pages are addressed by `file://` URLs, which have no host, and the
//! link graph keys documents by host-ful URLs (SPEC §2 normalisation) or by id: a link from
//! one page of the ingest to another is therefore stored as the target's id (its path under
//! the directory), so the graph keeps it whatever the base (the Rust docs: ~360k links,
//! not 0).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use scraper::{ElementRef, Html, Node, Selector};
use url::Url;

use super::{Document, RecordError};

/// Anchor texts kept per target page; popular pages (std's `Option`) have tens of thousands.
const MAX_ANCHORS_PER_PAGE: usize = 200;

/// Redirect and canonical chains are short; the bound guards against cycles.
const MAX_HOPS: usize = 8;

/// Elements whose text is not part of a page's visible content.
const INVISIBLE: &[&str] = &[
    "script", "style", "noscript", "template", "head", "nav", "svg",
];

/// How pages are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HtmlOptions {
    /// Index pages whose robots meta says `noindex` (`rankd ingest --index-noindex`).
    pub index_noindex: bool,
}

/// The outcome of reading one directory.
pub struct HtmlCorpus {
    pub documents: Vec<Document>,
    pub errors: Vec<RecordError>,
    /// Pages skipped because they only redirect elsewhere.
    pub redirects: usize,
    /// Pages skipped because their robots meta says `noindex`.
    pub noindex: usize,
    /// Pages folded onto the canonical page they name.
    pub canonical: usize,
}

/// One parsed page before the anchor pass.
enum Page {
    Content(Box<Parsed>),
    Redirect {
        from: String,
        to: String,
    },
    /// A `noindex` page: its followed out-links `(absolute URL, anchor text)` only.
    NoIndex(Vec<(String, String)>),
}

/// A content page: its document, its followed out-links `(absolute URL, anchor text)`, and
/// what its head says of duplicates and translations.
struct Parsed {
    doc: Document,
    links: Vec<(String, String)>,
    /// `<link rel="canonical">`, absolute, without fragment.
    canonical: Option<String>,
    /// `hreflang` alternates, absolute, without fragment.
    alternates: Vec<String>,
}

/// Every `*.html`/`*.htm` file under `dir`, in path order.
pub(crate) fn html_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in walkdir::WalkDir::new(dir).sort_by_file_name() {
        let entry = entry?;
        let ext = entry.path().extension().and_then(|e| e.to_str());
        if entry.file_type().is_file() && matches!(ext, Some("html" | "htm")) {
            files.push(entry.into_path());
        }
    }
    Ok(files)
}

/// Reads `files` (all under `dir`), pages addressed as `base` joined with their path relative
/// to `dir`. `progress` is called once per file read.
pub fn read_pages(
    dir: &Path,
    files: &[PathBuf],
    base: &Url,
    options: HtmlOptions,
    progress: &(dyn Fn() + Sync),
) -> HtmlCorpus {
    let parsed: Vec<Result<Page, RecordError>> = files
        .par_iter()
        .map(|path| {
            let page = read_page(dir, path, base, options);
            progress();
            page
        })
        .collect();
    // In path order: content pages, and noindex pages whose links still give anchor text.
    let mut pages: Vec<Source> = Vec::new();
    let mut errors = Vec::new();
    let mut redirect_to = HashMap::new();
    let mut noindex = 0;
    for p in parsed {
        match p {
            Ok(Page::Content(page)) => pages.push(Source::Page(page)),
            Ok(Page::NoIndex(links)) => {
                noindex += 1;
                pages.push(Source::Links(links));
            }
            Ok(Page::Redirect { from, to }) => {
                redirect_to.insert(from, to);
            }
            Err(e) => errors.push(e),
        }
    }
    let redirects = redirect_to.len();
    let canonical = fold_canonical(&mut pages, &mut redirect_to);
    let documents = attach_anchors(pages, &redirect_to);
    HtmlCorpus {
        documents,
        errors,
        redirects,
        noindex,
        canonical,
    }
}

/// What the anchor pass reads, in path order.
enum Source {
    Page(Box<Parsed>),
    /// A page that is no document but whose links are followed.
    Links(Vec<(String, String)>),
}

/// Where `u` finally leads through `redirect_to` (redirects and folded duplicates).
fn resolve(redirect_to: &HashMap<String, String>, u: &str) -> String {
    let mut u = u.to_string();
    for _ in 0..MAX_HOPS {
        match redirect_to.get(&u) {
            Some(next) => u = next.clone(),
            None => break,
        }
    }
    u
}

/// Folds each page whose canonical URL leads to another page of `pages` onto the end of its
/// chain of canonical pages: it leaves `pages` and joins `redirect_to`. Returns how many.
fn fold_canonical(pages: &mut Vec<Source>, redirect_to: &mut HashMap<String, String>) -> usize {
    let url_of = |s: &Source| match s {
        Source::Page(p) => p.doc.url.clone(),
        Source::Links(_) => None,
    };
    let by_url: HashMap<String, usize> = pages
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((url_of(s)?, i)))
        .collect();
    // The other page each page names as canonical.
    let named: Vec<Option<usize>> = pages
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let Source::Page(p) = s else { return None };
            let j = *by_url.get(&resolve(redirect_to, p.canonical.as_ref()?))?;
            (j != i).then_some(j)
        })
        .collect();
    let mut folded = HashMap::new();
    for (i, first) in named.iter().enumerate() {
        let Some(mut j) = *first else { continue };
        for _ in 0..MAX_HOPS {
            match named[j] {
                Some(k) => j = k,
                None => {
                    let (from, to) = (url_of(&pages[i]), url_of(&pages[j]));
                    folded.insert(from.expect("a page"), to.expect("a page"));
                    break;
                }
            }
        }
    }
    pages.retain(|s| url_of(s).is_none_or(|u| !folded.contains_key(&u)));
    let count = folded.len();
    redirect_to.extend(folded);
    count
}

fn read_page(
    dir: &Path,
    path: &Path,
    base: &Url,
    options: HtmlOptions,
) -> Result<Page, RecordError> {
    let err = |message: String| RecordError {
        origin: path.display().to_string(),
        line: None,
        message,
    };
    let bytes = std::fs::read(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        err(format!(
            "not valid UTF-8 (byte {}); convert the page to UTF-8",
            e.utf8_error().valid_up_to() + 1
        ))
    })?;
    let rel = path
        .strip_prefix(dir)
        .map_err(|_| err("not under the input directory".into()))?;
    let id = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/");
    let url = base
        .join(&id)
        .map_err(|e| err(format!("cannot form a URL for {id}: {e}")))?;
    parse_page(id, url, &text, options).map_err(err)
}

/// Extracts a page's fields, its followed out-links `(absolute URL, anchor text)` and what
/// its head says; a page nested deeper than [`super::html_parse::MAX_DEPTH`] is refused.
fn parse_page(id: String, url: Url, html: &str, options: HtmlOptions) -> Result<Page, String> {
    let doc = super::html_parse::parse_document(html).map_err(|depth| {
        format!(
            "elements nest {depth} deep; pages nested deeper than {} are not read \
             (browsers stop nesting there)",
            super::html_parse::MAX_DEPTH
        )
    })?;
    if let Some(to) = meta_refresh(&doc, &url) {
        return Ok(Page::Redirect {
            from: strip_fragment(url).to_string(),
            to,
        });
    }
    let robots = Robots::of(&doc);
    let sel = |s: &str| Selector::parse(s).expect("static selector");
    let mut links = Vec::new();
    if !robots.nofollow {
        for a in doc.select(&sel("a[href]")) {
            let href = a.value().attr("href").unwrap_or("");
            let Ok(target) = url.join(href) else { continue };
            if !matches!(target.scheme(), "http" | "https" | "file") {
                continue;
            }
            links.push((
                strip_fragment(target).to_string(),
                collapse(&a.text().collect::<String>()),
            ));
        }
    }
    if robots.noindex && !options.index_noindex {
        return Ok(Page::NoIndex(links));
    }
    let title = doc
        .select(&sel("title"))
        .next()
        .map(|t| collapse(&t.text().collect::<String>()))
        .unwrap_or_default();
    let headings = doc
        .select(&sel("h1, h2, h3, h4, h5, h6"))
        .map(|h| collapse(&h.text().collect::<String>()))
        .filter(|h| !h.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    let mut body = String::new();
    let root = doc
        .select(&sel("body"))
        .next()
        .unwrap_or(doc.root_element());
    visible_text(root, &mut body);
    // `links` becomes the document's out-links in the anchor pass, once redirects are known.
    let prose = prose(&doc);
    let (name, kind) = rustdoc_item(&doc).unwrap_or_default();
    let mut extra = serde_json::Map::new();
    if !kind.is_empty() {
        extra.insert("kind".into(), kind.into());
    }
    let head = Head::of(&doc, &url);
    let doc = Document {
        id,
        url: Some(strip_fragment(url).to_string()),
        title,
        name,
        headings,
        body: collapse(&body),
        prose,
        extra,
        lang: head.lang,
        ..Default::default()
    };
    Ok(Page::Content(Box::new(Parsed {
        doc,
        links,
        canonical: head.canonical,
        alternates: head.alternates,
    })))
}

/// `<meta name="robots">`'s directives (Google's robots meta specification: comma-separated,
/// case-insensitive; `none` is `noindex, nofollow`). Several robots metas add up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Robots {
    noindex: bool,
    nofollow: bool,
}

impl Robots {
    fn of(doc: &Html) -> Robots {
        let sel = Selector::parse("meta[name][content]").expect("static selector");
        let mut robots = Robots::default();
        for meta in doc.select(&sel) {
            let e = meta.value();
            if !e
                .attr("name")
                .is_some_and(|n| n.trim().eq_ignore_ascii_case("robots"))
            {
                continue;
            }
            for directive in e.attr("content").unwrap_or("").split(',') {
                let d = directive.trim();
                let none = d.eq_ignore_ascii_case("none");
                robots.noindex |= none || d.eq_ignore_ascii_case("noindex");
                robots.nofollow |= none || d.eq_ignore_ascii_case("nofollow");
            }
        }
        robots
    }
}

/// What a page's head says of its language, its canonical URL and its language versions.
#[derive(Debug, Default, PartialEq)]
struct Head {
    lang: Option<String>,
    canonical: Option<String>,
    alternates: Vec<String>,
}

impl Head {
    fn of(doc: &Html, url: &Url) -> Head {
        let sel = |s: &str| Selector::parse(s).expect("static selector");
        let rel_is = |e: &scraper::node::Element, name: &str| {
            e.attr("rel").is_some_and(|r| {
                r.split_ascii_whitespace()
                    .any(|r| r.eq_ignore_ascii_case(name))
            })
        };
        let absolute = |href: &str| {
            url.join(href.trim())
                .ok()
                .map(|u| strip_fragment(u).to_string())
        };
        let own = strip_fragment(url.clone()).to_string();
        let mut head = Head::default();
        let mut own_hreflang = None;
        for link in doc.select(&sel("link[rel][href]")) {
            let e = link.value();
            let href = e.attr("href").unwrap_or("");
            if head.canonical.is_none() && rel_is(e, "canonical") {
                head.canonical = absolute(href);
            }
            if rel_is(e, "alternate") {
                if let (Some(tag), Some(to)) = (e.attr("hreflang"), absolute(href)) {
                    if to == own {
                        own_hreflang = super::lang::normalize(tag);
                    }
                    head.alternates.push(to);
                }
            }
        }
        let content_language = || {
            doc.select(&sel("meta[http-equiv][content]")).find_map(|m| {
                let e = m.value();
                e.attr("http-equiv")
                    .is_some_and(|h| h.trim().eq_ignore_ascii_case("content-language"))
                    .then(|| super::lang::normalize(e.attr("content")?.split(',').next()?))
                    .flatten()
            })
        };
        head.lang = doc
            .root_element()
            .value()
            .attr("lang")
            .and_then(super::lang::normalize)
            .or_else(content_language)
            .or(own_hreflang);
        head
    }
}

/// The item an API page documents, from rustdoc's main heading: its path and name, the
/// breadcrumbs (`std::collections`) and the heading's name (`<h1>Struct <span>HashMap</span>`)
/// joined by `::` (`std::collections::HashMap`), and its kind, the heading's words before the
/// name, lowercased (`struct`). `None` for a page rustdoc did not make.
fn rustdoc_item(doc: &Html) -> Option<(String, String)> {
    let sel = |s: &str| Selector::parse(s).expect("static selector");
    let heading = doc.select(&sel(".main-heading")).next()?;
    let h1 = heading.select(&sel("h1")).next()?;
    let name = h1.select(&sel("span")).next()?;
    let name: String = name.text().collect::<String>().trim().to_string();
    if name.is_empty() {
        return None;
    }
    let kind = h1
        .children()
        .map_while(|c| c.value().as_text().map(|t| t.to_string()))
        .collect::<String>();
    let kind = collapse(&kind).to_lowercase();
    let path = heading
        .select(&sel(".rustdoc-breadcrumbs"))
        .next()
        .map(|b| b.text().collect::<String>().trim().to_string())
        .filter(|p| !p.is_empty());
    let name = match path {
        Some(path) => format!("{path}::{name}"),
        None => name,
    };
    Some((name, kind))
}

/// `<meta http-equiv="refresh" content="0;URL=target">` → the absolute target.
fn meta_refresh(doc: &Html, url: &Url) -> Option<String> {
    let sel = Selector::parse("meta[http-equiv]").expect("static selector");
    let meta = doc.select(&sel).find(|m| {
        m.value()
            .attr("http-equiv")
            .is_some_and(|v| v.eq_ignore_ascii_case("refresh"))
    })?;
    let content = meta.value().attr("content")?;
    let (_, target) = content.split_once(['=', ';']).map(|(a, b)| {
        let b = b.trim();
        match b.get(..4) {
            Some(p) if p.eq_ignore_ascii_case("url=") => (a, &b[4..]),
            _ => (a, b),
        }
    })?;
    let target = target.trim().trim_matches(|c| c == '\'' || c == '"');
    url.join(target).ok().map(|u| strip_fragment(u).to_string())
}

/// Inline elements: their text runs on with their neighbours' in the prose.
const INLINE: &[&str] = &[
    "a", "abbr", "b", "cite", "code", "em", "i", "kbd", "mark", "q", "s", "samp", "small", "span",
    "strong", "sub", "sup", "time", "u", "var", "wbr",
];

/// Elements whose text is prose a snippet can quote.
const PROSE: &[&str] = &["p", "li", "dd", "blockquote", "figcaption"];

/// The page's prose for its snippets: the visible text of each paragraph, list item and
/// description, one per line, without code blocks; an element inside another prose element
/// is part of that one's line. Empty for a page without such elements (the body is used).
fn prose(doc: &Html) -> String {
    let selector = Selector::parse(&PROSE.join(", ")).expect("static selector");
    let mut out = String::new();
    for element in doc.select(&selector) {
        let nested = element.ancestors().any(|a| {
            a.value().as_element().is_some_and(|e| {
                PROSE.contains(&e.name()) || e.name() == "pre" || INVISIBLE.contains(&e.name())
            })
        });
        if nested {
            continue;
        }
        let mut text = String::new();
        visible_text_without(element, &mut text, &["pre"]);
        let line = collapse(&text);
        if !line.is_empty() {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

fn visible_text(element: ElementRef, out: &mut String) {
    visible_text_without(element, out, &[]);
}

/// The visible text of `element`, leaving out the elements named in `skip` too. The walk
/// keeps its own stack (`None`: the padding after an element), so no page's nesting
/// reaches the thread's stack.
fn visible_text_without(element: ElementRef, out: &mut String, skip: &[&str]) {
    let mut stack: Vec<Option<_>> = element.children().rev().map(Some).collect();
    while let Some(step) = stack.pop() {
        let Some(child) = step else {
            out.push(' ');
            continue;
        };
        match child.value() {
            Node::Text(t) => {
                out.push_str(t);
            }
            Node::Element(e) => {
                if INVISIBLE.contains(&e.name()) || skip.contains(&e.name()) {
                    continue;
                }
                // Prose keeps inline markup inside its words ("a `Vec`." reads "a Vec.");
                // the body pads every element, as it always has (the index depends on it).
                let pad = skip.is_empty() || !INLINE.contains(&e.name());
                if pad {
                    out.push(' ');
                    stack.push(None);
                }
                stack.extend(child.children().rev().map(Some));
            }
            _ => {}
        }
    }
}

/// The second pass: every followed link's anchor text goes to its target page (following
/// redirects and folded duplicates), each page's out-links are rewritten to the pages they
/// finally reach, and language versions get their [`Document::translation_of`].
fn attach_anchors(sources: Vec<Source>, redirect_to: &HashMap<String, String>) -> Vec<Document> {
    let resolve = |u: &str| resolve(redirect_to, u);
    let by_url: HashMap<String, usize> = sources
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            Source::Page(p) => Some((p.doc.url.clone()?, i)),
            Source::Links(_) => None,
        })
        .collect();
    let id_of = |j: usize| match &sources[j] {
        Source::Page(p) => p.doc.id.clone(),
        Source::Links(_) => unreachable!("by_url holds pages only"),
    };
    let ids: HashMap<usize, String> = by_url.values().map(|&j| (j, id_of(j))).collect();
    // A link to a page of this ingest without a host (a file URL) is stored as the page's id.
    let link_to = |u: &str| -> String {
        let target = resolve(u);
        match by_url.get(&target) {
            Some(j) if Url::parse(&target).is_ok_and(|t| !t.has_host()) => ids[j].clone(),
            _ => target,
        }
    };
    let mut anchors: Vec<Vec<String>> = vec![Vec::new(); sources.len()];
    let mut docs = Vec::with_capacity(by_url.len());
    for (i, source) in sources.into_iter().enumerate() {
        let links = match &source {
            Source::Page(p) => &p.links,
            Source::Links(links) => links,
        };
        for (target, text) in links {
            if text.is_empty() {
                continue;
            }
            if let Some(&j) = by_url.get(&resolve(target)) {
                if j != i && anchors[j].len() < MAX_ANCHORS_PER_PAGE {
                    anchors[j].push(text.clone());
                }
            }
        }
        let Source::Page(page) = source else {
            continue;
        };
        let Parsed {
            mut doc,
            links,
            alternates,
            ..
        } = *page;
        let mut resolved: Vec<String> = links
            .iter()
            .filter(|(u, _)| by_url.get(&resolve(u)) != Some(&i))
            .map(|(u, _)| link_to(u))
            .collect();
        resolved.sort();
        resolved.dedup();
        doc.links = resolved;
        let own = doc.url.clone().expect("HTML pages have URLs");
        let first_version = alternates
            .iter()
            .map(|u| resolve(u))
            .filter(|u| by_url.contains_key(u))
            .fold(own.clone(), |a, u| a.min(u));
        doc.translation_of = (first_version != own).then_some(first_version);
        docs.push((i, doc));
    }
    docs.into_iter()
        .map(|(i, mut doc)| {
            doc.anchor = std::mem::take(&mut anchors[i]).join("\n");
            doc
        })
        .collect()
}

fn strip_fragment(mut u: Url) -> Url {
    u.set_fragment(None);
    u
}

/// Collapses runs of whitespace to one space and trims.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, html: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, html).unwrap();
    }

    #[test]
    fn prose_keeps_paragraphs_and_items_without_code_blocks() {
        let doc = Html::parse_document(
            r#"<body><nav><p>menu</p></nav><pre>fn main() {}</pre>
            <p>Creates a <code>Vec</code>, <em>empty</em>.</p>
            <ul><li>one <p>inner</p></li></ul><div><p>before<pre>x = 1</pre></p></div>
            <dl><dt>Vec</dt><dd>A growable array.</dd></dl></body>"#,
        );
        assert_eq!(
            prose(&doc),
            "Creates a Vec, empty.\none inner\nbefore\nA growable array.\n"
        );
        assert_eq!(prose(&Html::parse_document("<body>only text</body>")), "");
    }

    /// Issue 30, N4: the text walk needs no thread stack (300 000 nested `<span>`s aborted
    /// the ingest), and a page nested past the bound is a record error naming it, its
    /// neighbours read.
    #[test]
    fn deep_nesting_is_no_crash() {
        let depth = 50_000;
        let page = format!(
            "<body>{}deep{}</body>",
            "<span>".repeat(depth),
            "</span>".repeat(depth)
        );
        let text = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                let doc = Html::parse_document(&page);
                let mut text = String::new();
                visible_text(doc.root_element(), &mut text);
                collapse(&text)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(text, "deep");
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.html", "<title>A</title><p>fine</p>");
        write(
            dir.path(),
            "deep.html",
            &format!("<body>{}x</body>", "<div>".repeat(100_000)),
        );
        let files = html_files(dir.path()).unwrap();
        let base = Url::parse("https://example.org/").unwrap();
        let c = read_pages(dir.path(), &files, &base, HtmlOptions::default(), &|| {});
        assert_eq!(c.documents.len(), 1);
        assert_eq!(c.errors.len(), 1);
        assert!(c.errors[0].origin.ends_with("deep.html"));
        assert!(
            c.errors[0]
                .message
                .contains("pages nested deeper than 512 are not read"),
            "{}",
            c.errors[0].message
        );
    }

    #[test]
    fn rustdoc_pages_name_their_item() {
        let name = |html: &str| rustdoc_item(&Html::parse_document(html));
        // rustdoc's markup (rustc 1.95), trimmed.
        assert_eq!(
            name(
                r#"<body class="rustdoc struct"><main><div class="main-heading">
                <div class="rustdoc-breadcrumbs"><a href="../index.html">std</a>::<wbr><a
                href="index.html">collections</a></div><h1>Struct <span class="struct">Hash<wbr>Map</span>&nbsp;<button
                id="copy-path">Copy item path</button></h1></div>"#
            )
            .unwrap(),
            ("std::collections::HashMap".into(), "struct".into())
        );
        assert_eq!(
            name(r#"<div class="main-heading"><h1>Primitive Type <span class="primitive">u8</span></h1></div>"#)
                .unwrap(),
            ("u8".into(), "primitive type".into())
        );
        assert_eq!(name("<h1>Struct <span>HashMap</span></h1>"), None);
        assert_eq!(
            name(r#"<div class="main-heading"><h1>Title</h1></div>"#),
            None
        );
    }

    #[test]
    fn extracts_fields_links_and_anchor_text() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "index.html",
            r#"<html><head><title> Home  page </title><style>.x{}</style></head>
            <body><nav><a href="b/page.html">Sidebar noise</a></nav>
            <h1>Welcome</h1><p>Hello <b>world</b>.<script>var x = 1;</script></p>
            <a href="b/page.html#part">The B page</a> <a href="old.html">old</a>
            <a href="mailto:x@y.z">mail</a> <a href="https://other.org/x">ext</a></body></html>"#,
        );
        write(
            dir.path(),
            "b/page.html",
            r#"<title>B</title><h2>Section</h2><p>text <a href="../index.html">home</a><a href="page.html">self</a>"#,
        );
        write(
            dir.path(),
            "old.html",
            r#"<html><head><meta http-equiv="refresh" content="0;URL=b/page.html"></head></html>"#,
        );
        // Broken HTML still parses (html5ever recovers as browsers do).
        write(
            dir.path(),
            "broken.html",
            "<title>Broken</title><p>unclosed <div><b>bold",
        );
        let files = html_files(dir.path()).unwrap();
        let base = Url::parse("https://site.test/docs/").unwrap();
        let c = read_pages(dir.path(), &files, &base, HtmlOptions::default(), &|| {});
        assert!(c.errors.is_empty());
        assert_eq!(c.redirects, 1);
        assert_eq!(c.documents.len(), 3);
        let get = |id: &str| c.documents.iter().find(|d| d.id == id).unwrap();
        let home = get("index.html");
        assert_eq!(home.title, "Home page");
        assert_eq!(home.headings, "Welcome");
        assert!(home.body.contains("Hello world"), "{}", home.body);
        assert!(
            !home.body.contains("var x") && !home.body.contains("Sidebar"),
            "{}",
            home.body
        );
        assert_eq!(
            home.url.as_deref(),
            Some("https://site.test/docs/index.html")
        );
        // The fragment is dropped, the redirect followed, mailto ignored.
        assert_eq!(
            home.links,
            vec!["https://other.org/x", "https://site.test/docs/b/page.html"]
        );
        let b = get("b/page.html");
        // Anchor text from the nav link, the content link and the redirecting link; not "self".
        assert_eq!(b.anchor, "Sidebar noise\nThe B page\nold");
        assert_eq!(b.links, vec!["https://site.test/docs/index.html"]);
        assert_eq!(get("index.html").anchor, "home");
        assert!(get("broken.html").body.contains("unclosed bold"));
    }

    /// Without a base URL (file URLs, no host) the links between the pages of the ingest
    /// still reach the link graph: they are stored as the target pages' ids.
    #[test]
    fn links_between_pages_survive_without_a_base_url() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "index.html",
            r#"<title>Home</title><a href="b/page.html#x">B</a><a href="old.html">old</a>
            <a href="https://other.org/x">ext</a><a href="index.html">self</a>"#,
        );
        write(
            dir.path(),
            "b/page.html",
            r#"<title>B</title><a href="../index.html">home</a>"#,
        );
        write(
            dir.path(),
            "old.html",
            r#"<meta http-equiv="refresh" content="0;URL=b/page.html">"#,
        );
        let files = html_files(dir.path()).unwrap();
        let base = Url::from_directory_path(dir.path().canonicalize().unwrap()).unwrap();
        let c = read_pages(dir.path(), &files, &base, HtmlOptions::default(), &|| {});
        let get = |id: &str| c.documents.iter().find(|d| d.id == id).unwrap();
        assert_eq!(
            get("index.html").links,
            vec!["b/page.html", "https://other.org/x"]
        );
        assert_eq!(get("b/page.html").links, vec!["index.html"]);
        assert_eq!(get("b/page.html").anchor, "B\nold");
        // Links that are ids become edges of the link graph (`graph::build`'s tests; the
        // HTML ingest end to end: `tests/suite/hardening_cli.rs`).
    }

    #[test]
    fn non_utf8_pages_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("bad.html"), b"<p>caf\xe9</p>").unwrap();
        let files = html_files(dir.path()).unwrap();
        let c = read_pages(
            dir.path(),
            &files,
            &Url::parse("https://s.t/").unwrap(),
            HtmlOptions::default(),
            &|| {},
        );
        assert_eq!(c.documents.len(), 0);
        assert!(
            c.errors[0].to_string().contains("bad.html") && c.errors[0].message.contains("UTF-8")
        );
    }

    fn read(dir: &Path, options: HtmlOptions) -> HtmlCorpus {
        let files = html_files(dir).unwrap();
        let base = Url::parse("https://site.test/").unwrap();
        read_pages(dir, &files, &base, options, &|| {})
    }

    fn ids(c: &HtmlCorpus) -> Vec<&str> {
        c.documents.iter().map(|d| d.id.as_str()).collect()
    }

    /// mdBook's `print.html` and `toc.html` say noindex: they are skipped and counted, their
    /// links still give anchor text but are no edges; `nofollow` and `none` follow nothing.
    #[test]
    fn noindex_pages_are_skipped_and_counted_their_links_followed() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.html", "<title>A</title><p>apple</p>");
        write(dir.path(), "b.html", "<title>B</title><p>banana</p>");
        write(
            dir.path(),
            "print.html",
            r#"<html><head><META NAME="Robots" CONTENT="NoIndex"></head>
            <body><a href="a.html">from print</a><p>apple banana</p></body></html>"#,
        );
        write(
            dir.path(),
            "toc.html",
            r#"<meta name="robots" content="none"><a href="b.html">from toc</a>"#,
        );
        write(
            dir.path(),
            "stub.html",
            r#"<meta name="robots" content="noindex,follow"><a href="b.html">from stub</a>"#,
        );
        write(
            dir.path(),
            "quiet.html",
            r#"<meta name="robots" content="index, nofollow"><a href="a.html">from quiet</a>"#,
        );
        let c = read(dir.path(), HtmlOptions::default());
        assert_eq!(ids(&c), ["a.html", "b.html", "quiet.html"]);
        assert_eq!((c.noindex, c.canonical, c.redirects), (3, 0, 0));
        let get = |id: &str| c.documents.iter().find(|d| d.id == id).unwrap();
        assert_eq!(get("a.html").anchor, "from print");
        assert_eq!(get("b.html").anchor, "from stub");
        assert!(get("quiet.html").links.is_empty());

        // --index-noindex keeps them, as before robots metas were read.
        let c = read(
            dir.path(),
            HtmlOptions {
                index_noindex: true,
            },
        );
        assert_eq!(c.documents.len(), 6);
        assert_eq!(c.noindex, 0);
        let print = c.documents.iter().find(|d| d.id == "print.html").unwrap();
        assert_eq!(print.links, ["https://site.test/a.html"]);
    }

    /// A duplicate naming another page as canonical is folded onto it: its in-links and their
    /// anchor text go to the canonical page; chains are followed, cycles and URLs outside the
    /// ingest are ignored.
    #[test]
    fn canonical_duplicates_are_folded_onto_their_page() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "page.html", "<title>Page</title><p>text</p>");
        write(
            dir.path(),
            "copy.html",
            r#"<link rel="canonical" href="https://site.test/page.html#top"><title>Copy</title>
            <a href="other.html">copy's link</a>"#,
        );
        write(
            dir.path(),
            "copy2.html",
            r#"<link rel="Canonical" href="copy.html"><title>Copy of copy</title>"#,
        );
        write(
            dir.path(),
            "self.html",
            r#"<link rel="canonical" href="self.html"><title>Self</title>"#,
        );
        write(
            dir.path(),
            "away.html",
            r#"<link rel="canonical" href="https://elsewhere.test/x"><title>Away</title>"#,
        );
        write(
            dir.path(),
            "x.html",
            r#"<link rel="canonical" href="y.html">"#,
        );
        write(
            dir.path(),
            "y.html",
            r#"<link rel="canonical" href="x.html">"#,
        );
        write(
            dir.path(),
            "other.html",
            r#"<a href="copy.html">to the copy</a><a href="copy2.html">to copy 2</a>
            <a href="page.html">to the page</a>"#,
        );
        let c = read(dir.path(), HtmlOptions::default());
        assert_eq!(
            ids(&c),
            [
                "away.html",
                "other.html",
                "page.html",
                "self.html",
                "x.html",
                "y.html"
            ]
        );
        assert_eq!(c.canonical, 2);
        let get = |id: &str| c.documents.iter().find(|d| d.id == id).unwrap();
        assert_eq!(
            get("page.html").anchor,
            "to the copy\nto copy 2\nto the page"
        );
        assert_eq!(get("other.html").links, ["https://site.test/page.html"]);
        // The copy's own link is not followed twice: `other.html` has no in-link anchor.
        assert_eq!(get("other.html").anchor, "");
    }

    #[test]
    fn language_comes_from_html_lang_then_content_language_then_hreflang() {
        let dir = tempfile::tempdir().unwrap();
        let versions = r#"<link rel="alternate" hreflang="en" href="https://site.test/fn.html">
            <link rel="alternate" hreflang="ja" href="/ja/fn.html">
            <link rel="alternate" hreflang="x-default" href="/fn.html">"#;
        write(
            dir.path(),
            "fn.html",
            &format!(r#"<html lang="en-US"><head>{versions}</head><title>Functions</title>"#),
        );
        write(
            dir.path(),
            "ja/fn.html",
            &format!("<html><head>{versions}</head><title>関数</title>"),
        );
        write(
            dir.path(),
            "es/fn.html",
            r#"<meta http-equiv="content-language" content="es-ES, en"><title>Funciones</title>"#,
        );
        write(
            dir.path(),
            "none.html",
            r#"<html lang="und"><title>?</title>"#,
        );
        let c = read(dir.path(), HtmlOptions::default());
        let get = |id: &str| c.documents.iter().find(|d| d.id == id).unwrap();
        assert_eq!(get("fn.html").lang.as_deref(), Some("en"));
        assert_eq!(get("ja/fn.html").lang.as_deref(), Some("ja"));
        assert_eq!(get("es/fn.html").lang.as_deref(), Some("es"));
        assert_eq!(get("none.html").lang, None);
        // The versions share the smallest URL among them.
        assert_eq!(get("fn.html").translation_of, None);
        assert_eq!(
            get("ja/fn.html").translation_of.as_deref(),
            Some("https://site.test/fn.html")
        );
        assert_eq!(get("es/fn.html").translation_of, None);
    }
}
