//! Index hygiene end to end (issue 29): an HTML site with mdBook-like `noindex` pages, a
//! canonical duplicate and translations of its pages is ingested by `rankd ingest`; no
//! noindex or folded page is ever a hit, an English query never gets a translation above its
//! English original, `Accept-Language` and `lang=` choose and filter versions, and a root
//! over three leaves answers every one of those searches as the single node does.

use std::path::{Path, PathBuf};

use crate::util::*;
use serde_json::Value;

/// The English pages: file name, title, body.
const PAGES: &[(&str, &str, &str)] = &[
    (
        "fn.html",
        "Functions",
        "Functions are declared with the fn keyword and take arguments.",
    ),
    (
        "closures.html",
        "Closures",
        "Closures capture their environment: an anonymous function that can capture variables.",
    ),
    (
        "hof.html",
        "Higher order functions",
        "Higher order functions take functions or closures as arguments.",
    ),
];

/// The translations: language, and words of that language.
const LANGUAGES: &[(&str, &str)] = &[
    ("ja", "関数 クロージャ 環境"),
    ("es", "funciones clausuras entorno"),
    ("zh", "函数 闭包 环境"),
];

/// Writes the site: the English pages, each translated (the translation repeats the English
/// terms of its code samples, so it often outscores the original, as Rust by Example's do),
/// a page only in Spanish, mdBook's `print.html` and `toc.html` (noindex), and a duplicate
/// whose canonical URL is the closures page.
fn write_site(site: &Path) {
    let write = |rel: &str, html: String| {
        let p = site.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, html).unwrap();
    };
    let mut everything = String::new();
    let mut toc = String::new();
    for (file, title, body) in PAGES {
        write(
            file,
            format!(r#"<html lang="en"><title>{title}</title><body><p>{body}</p></body></html>"#),
        );
        everything.push_str(&format!("<h1>{title}</h1><p>{body} {body}</p>"));
        toc.push_str(&format!(r#"<a href="{file}">{title}</a>"#));
        for (lang, words) in LANGUAGES {
            write(
                &format!("{lang}/{file}"),
                format!(
                    r#"<html lang="{lang}"><title>{words}</title><body><p>{words}</p>
                    <pre>{body} {body}</pre></body></html>"#
                ),
            );
        }
    }
    write(
        "es/only.html",
        r#"<html lang="es"><title>Solo</title><p>clausuras: closures capture variables</p>"#.into(),
    );
    write(
        "print.html",
        format!(
            r#"<html lang="en"><head><meta name="robots" content="noindex"></head>
            <body>{everything}{everything}</body></html>"#
        ),
    );
    write(
        "toc.html",
        format!(
            r#"<html lang="en"><head><meta name="robots" content="noindex"></head>
            <body><p>functions closures capture</p>{toc}</body></html>"#
        ),
    );
    write(
        "copy.html",
        format!(
            r#"<html lang="en"><head><link rel="canonical" href="closures.html"></head>
            <title>Closures</title><p>{}</p></html>"#,
            PAGES[1].2
        ),
    );
}

const QUERIES: &[&str] = &[
    "closures",
    "capture environment",
    "functions",
    "closures capture variables",
    "anonymous function",
    "higher order functions arguments",
    "fn keyword",
];

/// `GET base/search?params&q=q` with an `Accept-Language` header if given: the answer's
/// body.
fn search(base: &str, params: &str, q: &str, accept_language: Option<&str>) -> Value {
    let url = format!(
        "{base}/search?{params}&q={}",
        percent_encoding::utf8_percent_encode(q, percent_encoding::NON_ALPHANUMERIC)
    );
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut req = ureq::http::Request::builder().method("GET").uri(&url);
    if let Some(l) = accept_language {
        req = req.header("Accept-Language", l);
    }
    let mut resp = agent.run(req.body(()).unwrap()).unwrap();
    let status = resp.status().as_u16();
    let text = resp.body_mut().read_to_string().unwrap();
    assert_eq!(status, 200, "{url}: {text}");
    serde_json::from_str(&text).unwrap()
}

fn ids(answer: &Value) -> Vec<String> {
    answer["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

/// The English original of a translation's id (`ja/fn.html` → `fn.html`), if it has one.
fn original(id: &str) -> Option<&'static str> {
    let (lang, file) = id.split_once('/')?;
    LANGUAGES.iter().find(|(l, _)| *l == lang)?;
    PAGES.iter().map(|p| p.0).find(|f| *f == file)
}

/// Ingests the site into `data` (with `--shards` if given) and returns the summary.
fn ingest(site: &Path, data: &Path, shards: Option<&str>) -> Value {
    let mut args = vec![
        "ingest",
        "--format",
        "html",
        "--input",
        site.to_str().unwrap(),
        "--json",
        "--data-dir",
        data.to_str().unwrap(),
    ];
    if let Some(n) = shards {
        args.extend(["--shards", n]);
    }
    serde_json::from_slice(&rankd_ok(args).stdout).unwrap()
}

fn site(dir: &Path) -> PathBuf {
    let site = dir.join("site");
    write_site(&site);
    site
}

#[test]
fn noindex_pages_are_never_hits_and_translations_never_outrank_their_original() {
    let dir = tempfile::tempdir().unwrap();
    let site = site(dir.path());
    let data = dir.path().join("data");
    let summary = ingest(&site, &data, None);
    let documents = PAGES.len() * (1 + LANGUAGES.len()) + 1;
    assert_eq!(summary["documents"], documents, "{summary}");
    assert_eq!(summary["noindex"], 2, "{summary}");
    assert_eq!(summary["canonical"], 1, "{summary}");
    let db = fresh_database(dir.path());
    let server = start(&data, &db, None);
    let base = server.base.as_str();

    let mut outranked = 0;
    for q in QUERIES {
        for params in [
            "k=50",
            "k=50&collapse=none",
            "k=50&collapse=none&model=lm",
            "k=50&collapse=none&model=bm25&field=body",
            "k=20&collapse=page,near_duplicate",
        ] {
            for id in ids(&search(base, params, q, None)) {
                assert!(
                    !["print.html", "toc.html", "copy.html"].contains(&id.as_str()),
                    "{id} is a hit of {q:?} ({params})"
                );
            }
        }
        // Without collapsing, translations do outrank originals (the test has teeth)...
        let all = ids(&search(base, "k=50&collapse=none", q, None));
        let rank = |id: &str, list: &[String]| list.iter().position(|h| h == id);
        for (r, id) in all.iter().enumerate() {
            if let Some(o) = original(id) {
                outranked += usize::from(rank(o, &all).is_some_and(|ro| ro > r));
            }
        }
        // ...but an English query (by default, or said by Accept-Language) never sees a
        // translation of a page whose English original matches it.
        for accept in [None, Some("en-GB,en;q=0.9"), Some("fr, en;q=0.5")] {
            let shown = ids(&search(base, "k=50", q, accept));
            for id in &shown {
                if let Some(o) = original(id) {
                    assert!(
                        rank(o, &all).is_none(),
                        "{q:?} ({accept:?}): the translation {id} is shown for {o}: {shown:?}"
                    );
                }
            }
            // Each page is shown once, the pages in the order of their best versions.
            let group = |id: &str| original(id).unwrap_or(id).to_string();
            let best = |id: &str| all.iter().position(|a| group(a) == group(id));
            for pair in shown.windows(2) {
                assert!(
                    best(&pair[0]) < best(&pair[1]),
                    "{q:?} ({accept:?}): {shown:?} against {all:?}"
                );
            }
        }
        // A Japanese reader gets the Japanese version of each page.
        let ja = ids(&search(base, "k=50", q, Some("ja,en;q=0.8")));
        for id in &ja {
            let o = original(id).or(PAGES.iter().map(|p| p.0).find(|f| f == id));
            if let Some(o) = o {
                assert_eq!(*id, format!("ja/{o}"), "{q:?}: {ja:?}");
            }
        }
        // lang= ranks and counts one language only.
        let es = search(base, "k=50&lang=es", q, Some("ja"));
        let es_all = search(base, "k=50&lang=es&collapse=none", q, None);
        for id in ids(&es).iter().chain(&ids(&es_all)) {
            assert!(id.starts_with("es/"), "{q:?}: {id} for lang=es");
        }
        let matching = all.iter().filter(|id| id.starts_with("es/")).count();
        assert_eq!(es_all["total_hits"], matching, "{q:?}: {es_all}");
    }
    assert!(
        outranked >= 5,
        "translations outranked originals {outranked} times"
    );
    let doc = get(&format!("{base}/doc/zh/fn.html"), None).body;
    assert_eq!(doc["lang"], "zh", "{doc}");
    let bad = get(&format!("{base}/search?q=x&lang=klingon"), None);
    assert_error(&bad, 400, Some("lang"), "not a language tag");
}

/// `lang=`, the default collapse and the requester's language go through a root's request:
/// a root over three leaves answers every such search as the single node does.
#[test]
fn lang_and_the_default_collapse_through_a_root_equal_the_single_node() {
    let dir = tempfile::tempdir().unwrap();
    let site = site(dir.path());
    let (single, sharded) = (dir.path().join("single"), dir.path().join("sharded"));
    ingest(&site, &single, None);
    let summary = ingest(&site, &sharded, Some("3"));
    assert_eq!(summary["noindex"], 2, "{summary}");
    let db = fresh_database(dir.path());
    let one = start(&single, &db, None);
    let leaves = start_leaves(&sharded);
    let mut args = vec!["--role", "root"];
    for leaf in &leaves {
        args.extend(["--shard", leaf.base.as_str()]);
    }
    let root = start_serve(&args, None, &[]);
    let shown = |answer: &Value| -> Vec<Value> {
        answer["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| serde_json::json!([h["id"], h["score"], h["collapsed"], h["title"]]))
            .collect()
    };
    let mut compared = 0;
    for q in QUERIES {
        for params in [
            "k=10",
            "k=5&offset=2",
            "k=10&collapse=none",
            "k=10&lang=ja",
            "k=10&lang=es&collapse=none",
            "k=10&lang=pt-BR",
            "k=8&collapse=page,near_duplicate&model=lm",
        ] {
            for accept in [None, Some("ja"), Some("es-ES,es;q=0.9,en;q=0.5")] {
                let a = search(&one.base, params, q, accept);
                let b = search(&root.base, params, q, accept);
                assert_eq!(shown(&b), shown(&a), "{q:?} {params} {accept:?}");
                assert_eq!(b["total_hits"], a["total_hits"], "{q:?} {params}");
                compared += a["hits"].as_array().unwrap().len();
            }
        }
    }
    assert!(compared > 200, "only {compared} hits compared");
}
