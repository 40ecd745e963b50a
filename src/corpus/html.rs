//! A directory of HTML pages → documents: title, headings, visible body text, out-links
//! resolved to absolute URLs, and (second pass) the anchor text of every in-link collected
//! into the target's `anchor` field — the classic web-search field. An API page made by
//! rustdoc also gives the name and path of the item it documents (`name`) and its kind
//! (`kind`: `struct`, `trait`, ...; indexed with the name).
//!
//! Pages that only redirect (`<meta http-equiv="refresh">`, e.g. rustdoc's re-export stubs)
//! are not documents: links to them are followed to where they redirect.
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

/// Elements whose text is not part of a page's visible content.
const INVISIBLE: &[&str] = &[
    "script", "style", "noscript", "template", "head", "nav", "svg",
];

/// The outcome of reading one directory.
pub struct HtmlCorpus {
    pub documents: Vec<Document>,
    pub errors: Vec<RecordError>,
    /// Pages skipped because they only redirect elsewhere.
    pub redirects: usize,
}

/// One parsed page before the anchor pass.
enum Page {
    Content(Box<Document>, Vec<(String, String)>),
    Redirect { from: String, to: String },
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
    progress: &(dyn Fn() + Sync),
) -> HtmlCorpus {
    let parsed: Vec<Result<Page, RecordError>> = files
        .par_iter()
        .map(|path| {
            let page = read_page(dir, path, base);
            progress();
            page
        })
        .collect();
    let mut pages = Vec::new();
    let mut errors = Vec::new();
    let mut redirect_to = HashMap::new();
    for p in parsed {
        match p {
            Ok(Page::Content(doc, links)) => pages.push((*doc, links)),
            Ok(Page::Redirect { from, to }) => {
                redirect_to.insert(from, to);
            }
            Err(e) => errors.push(e),
        }
    }
    let redirects = redirect_to.len();
    let documents = attach_anchors(pages, &redirect_to);
    HtmlCorpus {
        documents,
        errors,
        redirects,
    }
}

fn read_page(dir: &Path, path: &Path, base: &Url) -> Result<Page, RecordError> {
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
    Ok(parse_page(id, url, &text))
}

/// Extracts a page's fields and its out-links `(absolute URL, anchor text)`.
fn parse_page(id: String, url: Url, html: &str) -> Page {
    let doc = Html::parse_document(html);
    if let Some(to) = meta_refresh(&doc, &url) {
        return Page::Redirect {
            from: strip_fragment(url).to_string(),
            to,
        };
    }
    let sel = |s: &str| Selector::parse(s).expect("static selector");
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
    let mut links = Vec::new();
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
    // `links` becomes the document's out-links in the anchor pass, once redirects are known.
    let prose = prose(&doc);
    let (name, kind) = rustdoc_item(&doc).unwrap_or_default();
    let mut extra = serde_json::Map::new();
    if !kind.is_empty() {
        extra.insert("kind".into(), kind.into());
    }
    let doc = Document {
        id,
        url: Some(strip_fragment(url).to_string()),
        title,
        name,
        headings,
        body: collapse(&body),
        prose,
        extra,
        ..Default::default()
    };
    Page::Content(Box::new(doc), links)
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

/// The visible text of `element`, leaving out the elements named in `skip` too.
fn visible_text_without(element: ElementRef, out: &mut String, skip: &[&str]) {
    for child in element.children() {
        match child.value() {
            Node::Text(t) => {
                out.push_str(t);
            }
            Node::Element(e) => {
                if INVISIBLE.contains(&e.name()) || skip.contains(&e.name()) {
                    continue;
                }
                if let Some(child) = ElementRef::wrap(child) {
                    // Prose keeps inline markup inside its words ("a `Vec`." reads "a Vec.");
                    // the body pads every element, as it always has (the index depends on it).
                    let pad = skip.is_empty() || !INLINE.contains(&e.name());
                    if pad {
                        out.push(' ');
                    }
                    visible_text_without(child, out, skip);
                    if pad {
                        out.push(' ');
                    }
                }
            }
            _ => {}
        }
    }
}

/// The second pass: every link's anchor text goes to its target page (following redirects),
/// and each page's out-links are rewritten to the pages they finally reach.
fn attach_anchors(
    pages: Vec<(Document, Vec<(String, String)>)>,
    redirect_to: &HashMap<String, String>,
) -> Vec<Document> {
    let resolve = |u: &str| -> String {
        let mut u = u.to_string();
        // Redirect chains are short; the bound guards against cycles.
        for _ in 0..8 {
            match redirect_to.get(&u) {
                Some(next) => u = next.clone(),
                None => break,
            }
        }
        u
    };
    let by_url: HashMap<String, usize> = pages
        .iter()
        .enumerate()
        .filter_map(|(i, (d, _))| Some((d.url.clone()?, i)))
        .collect();
    let ids: Vec<String> = pages.iter().map(|(d, _)| d.id.clone()).collect();
    // A link to a page of this ingest without a host (a file URL) is stored as the page's id.
    let link_to = |u: &str| -> String {
        let target = resolve(u);
        match by_url.get(&target) {
            Some(&j) if Url::parse(&target).is_ok_and(|t| !t.has_host()) => ids[j].clone(),
            _ => target,
        }
    };
    let mut anchors: Vec<Vec<String>> = vec![Vec::new(); pages.len()];
    let mut docs = Vec::with_capacity(pages.len());
    for (i, (mut doc, links)) in pages.into_iter().enumerate() {
        for (target, text) in &links {
            if text.is_empty() {
                continue;
            }
            if let Some(&j) = by_url.get(&resolve(target)) {
                if j != i && anchors[j].len() < MAX_ANCHORS_PER_PAGE {
                    anchors[j].push(text.clone());
                }
            }
        }
        let mut resolved: Vec<String> = links
            .iter()
            .filter(|(u, _)| by_url.get(&resolve(u)) != Some(&i))
            .map(|(u, _)| link_to(u))
            .collect();
        resolved.sort();
        resolved.dedup();
        doc.links = resolved;
        docs.push(doc);
    }
    for (doc, a) in docs.iter_mut().zip(anchors) {
        doc.anchor = a.join("\n");
    }
    docs
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
        let c = read_pages(dir.path(), &files, &base, &|| {});
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
        let c = read_pages(dir.path(), &files, &base, &|| {});
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
            &|| {},
        );
        assert_eq!(c.documents.len(), 0);
        assert!(
            c.errors[0].to_string().contains("bad.html") && c.errors[0].message.contains("UTF-8")
        );
    }
}
