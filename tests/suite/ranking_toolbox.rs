//! The book's ranking toolbox through the search engine (issue 17): sort modes on a forum-like
//! corpus against orders and values worked out by hand from SPEC §1.8's formulas, collapsing
//! by page, site, group and near-duplicate text, and a fused first phase against RRF computed
//! here from the inputs' own rankings.

use std::collections::HashMap;

use rankd::corpus::jsonl;
use rankd::search::{
    CollapseKey, Engine, Fusion, FusionQuery, Ranking, Retriever, Returns, SearchQuery, SortMode,
};
use rankd::text::{IndexConfig, ModelKind, TextIndex};

use crate::util::rankd;

fn engine(dir: &std::path::Path, lines: &[String]) -> Engine {
    let index = TextIndex::open_or_create(dir, Some(IndexConfig::default())).unwrap();
    let docs: Vec<_> = jsonl::parse(
        std::path::Path::new("test.jsonl"),
        lines.join("\n").as_bytes(),
    )
    .into_iter()
    .map(|d| d.unwrap())
    .collect();
    index.upsert(docs).unwrap();
    index.reader.reload().unwrap();
    Engine::new(index)
}

fn ids(engine: &Engine, q: &SearchQuery) -> Vec<String> {
    engine
        .search(q)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.id)
        .collect()
}

/// 2023-11-14T22:13:20Z.
const T0: i64 = 1_700_000_000;

fn forum() -> Vec<String> {
    let post = |id: &str, fields: &str| {
        format!(r#"{{"id":"{id}","title":"post {id}","body":"rust forum post"{fields}}}"#)
    };
    vec![
        post(
            "p1",
            &format!(r#","published_at":{T0},"votes_up":100,"votes_down":0"#),
        ),
        post(
            "p2",
            &format!(
                r#","published_at":{},"votes_up":1,"votes_down":0"#,
                T0 + 135_000
            ),
        ),
        post(
            "p3",
            &format!(
                r#","published_at":{},"votes_up":10,"votes_down":30"#,
                T0 - 100
            ),
        ),
        post(
            "p4",
            &format!(
                r#","published_at":{},"votes_up":0,"votes_down":0"#,
                T0 + 45_000
            ),
        ),
        post(
            "p5",
            r#","votes_up":50,"votes_down":5,"rating":4.5,"rating_count":2"#,
        ),
        post(
            "p6",
            &format!(
                r#","published_at":{},"votes_up":1000,"votes_down":10,"rating":3.0,"rating_count":100"#,
                T0 - 864_000
            ),
        ),
        post("p7", r#","rating":5.0,"rating_count":1"#),
        post(
            "p8",
            &format!(
                r#","published_at":{},"rating":4.0,"rating_count":50"#,
                T0 + 10
            ),
        ),
    ]
}

fn sorted(engine: &Engine, mode: SortMode) -> Vec<(String, Option<f64>)> {
    let q = SearchQuery::new("rust forum", 10).ranking(Ranking::Sort(mode));
    engine
        .search(&q)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.id, h.sort_key.expect("sorted hits carry their key")))
        .collect()
}

/// The ids in order, documents without a key (at the end) as a sorted set.
fn order(hits: &[(String, Option<f64>)]) -> (Vec<&str>, Vec<&str>) {
    let keyed = hits
        .iter()
        .filter(|h| h.1.is_some())
        .map(|h| h.0.as_str())
        .collect();
    let mut missing: Vec<&str> = hits
        .iter()
        .filter(|h| h.1.is_none())
        .map(|h| h.0.as_str())
        .collect();
    let first_missing = hits
        .iter()
        .position(|h| h.1.is_none())
        .unwrap_or(hits.len());
    assert!(
        hits[first_missing..].iter().all(|h| h.1.is_none()),
        "documents without the fields come last: {hits:?}"
    );
    missing.sort_unstable();
    (keyed, missing)
}

#[test]
fn sort_modes_follow_hand_worked_scores() {
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path(), &forum());
    let key = |hits: &[(String, Option<f64>)], id: &str| {
        hits.iter().find(|h| h.0 == id).unwrap().1.unwrap()
    };

    // Reddit hot, T = (T0 − 1134028003)/45000 = 12577.1555: p2 T+3 (x=1), p1 T+2 (x=100),
    // p4 T+1 (x=0), p8 T+0.0002, p3 T−1.301−0.0022 (x=−20: the sign is on the log term),
    // p6 T−19.2+2.9956. p5 and p7 have no date.
    let hot = sorted(&e, SortMode::Hot);
    assert_eq!(
        order(&hot),
        (vec!["p2", "p1", "p4", "p8", "p3", "p6"], vec!["p5", "p7"])
    );
    let t = (T0 - 1_134_028_003) as f64 / 45_000.0;
    assert!((key(&hot, "p1") - (t + 2.0)).abs() < 1e-9);
    assert!((key(&hot, "p3") - (t - 20f64.log10() - 100.0 / 45_000.0)).abs() < 1e-9);

    // Wilson lower bound, z = 1.96: p6 1000/1010 → 0.98187, p1 100/100 → 0.96300, p5 50/55 →
    // 0.80422, p2 1/1 → 0.20654, p3 10/40 → 0.14187; p4 has 0 votes, p7 and p8 none.
    let best = sorted(&e, SortMode::Best);
    assert_eq!(
        order(&best),
        (vec!["p6", "p1", "p5", "p2", "p3"], vec!["p4", "p7", "p8"])
    );
    for (id, value) in [
        ("p6", 0.98187),
        ("p1", 0.96300),
        ("p5", 0.80422),
        ("p2", 0.20654),
    ] {
        assert!(
            (key(&best, id) - value).abs() < 5e-5,
            "{id}: {}",
            key(&best, id)
        );
    }

    // Newest first.
    let fresh = sorted(&e, SortMode::Fresh);
    assert_eq!(
        order(&fresh),
        (vec!["p2", "p4", "p8", "p1", "p3", "p6"], vec!["p5", "p7"])
    );

    // Bayesian average, m = 10, C = (9 + 300 + 5 + 200) / 153 = 3.359477: p8 3.89325,
    // p5 3.54956, p7 3.50862, p6 3.03268.
    let rating = sorted(&e, SortMode::Rating);
    assert_eq!(
        order(&rating),
        (vec!["p8", "p5", "p7", "p6"], vec!["p1", "p2", "p3", "p4"])
    );
    for (id, value) in [
        ("p8", 3.89325),
        ("p5", 3.54956),
        ("p7", 3.50862),
        ("p6", 3.03268),
    ] {
        assert!(
            (key(&rating, id) - value).abs() < 5e-5,
            "{id}: {}",
            key(&rating, id)
        );
    }

    // Hacker News gravity (P − 1)/(age_h + 2)^1.8 with P = up − down: today every post is
    // about 26,000 hours old (p6 240 more), so the order is that of P − 1: p6 989, p1 99,
    // p2 0, p4 −1, p3 −21; p5, p7, p8 lack a date or votes.
    let gravity = sorted(&e, SortMode::Gravity);
    assert_eq!(
        order(&gravity),
        (vec!["p6", "p1", "p2", "p4", "p3"], vec!["p5", "p7", "p8"])
    );
}

#[test]
fn a_sort_by_fields_no_document_has_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // Dates and votes, but no ratings.
    let e = engine(dir.path(), &forum()[..4]);
    let q = SearchQuery::new("rust forum", 10).ranking(Ranking::Sort(SortMode::Rating));
    match e.search(&q) {
        Err(rankd::search::SearchError::Param { field, message }) => {
            assert_eq!(field, "sort");
            assert!(message.contains("rating and rating_count"), "{message}");
        }
        other => panic!("expected a bad sort parameter, got {other:?}"),
    }
    let q = SearchQuery::new("rust forum", 10).ranking(Ranking::Sort(SortMode::Best));
    assert_eq!(e.search(&q).unwrap().hits.len(), 4);
}

#[test]
fn bad_social_fields_are_refused_naming_them() {
    for (record, field) in [
        (r#"{"id":"a","votes_up":-1}"#, "votes_up"),
        (r#"{"id":"a","votes_down":1.5}"#, "votes_down"),
        (r#"{"id":"a","rating":"good"}"#, "rating"),
        (r#"{"id":"a","rating_count":-3}"#, "rating_count"),
        (r#"{"id":"a","group":""}"#, "group"),
    ] {
        let parsed = jsonl::parse(std::path::Path::new("in.jsonl"), record.as_bytes());
        let e = parsed[0].as_ref().unwrap_err();
        assert!(e.to_string().contains(&format!("`{field}`")), "{e}");
        assert!(e.to_string().contains("in.jsonl:1"), "{e}");
    }
}

fn page(id: &str, url: &str, body: &str, extra: &str) -> String {
    format!(r#"{{"id":"{id}","url":"{url}","title":"{id}","body":"{body}"{extra}}}"#)
}

#[test]
fn collapsing_keeps_the_best_of_each_group_and_counts_the_rest() {
    let long: String = (0..300).map(|i| format!("lexicon{} ", i % 61)).collect();
    let edited = long.replacen("lexicon7 ", "lexicon7b ", 1);
    let docs = vec![
        // Translations of one page (the built-in page rule drops a language segment).
        page(
            "en",
            "https://d.org/rbe/file/read_lines.html",
            "read lines of a file read read",
            "",
        ),
        page(
            "ja",
            "https://d.org/rbe/ja/file/read_lines.html",
            "read lines of a file read",
            "",
        ),
        page(
            "zh",
            "https://d.org/rbe/zh/file/read_lines.html?x=1#top",
            "read lines file",
            "",
        ),
        // Near-duplicate text on other pages.
        page("dup1", "https://e.org/a.html", &format!("read {long}"), ""),
        page(
            "dup2",
            "https://e.org/b.html",
            &format!("read {edited}"),
            "",
        ),
        // A group.
        page("g1", "https://f.org/1", "read notes", r#","group":"notes""#),
        page("g2", "https://f.org/2", "read notes", r#","group":"notes""#),
    ];
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path(), &docs);
    let run = |keys: &[CollapseKey]| {
        let q = SearchQuery {
            collapse: keys.to_vec(),
            ..SearchQuery::new("read", 10)
        };
        let r = e.search(&q).unwrap();
        let hits: HashMap<String, Option<usize>> =
            r.hits.into_iter().map(|h| (h.id, h.collapsed)).collect();
        hits
    };
    let all = run(&[]);
    assert_eq!(all.len(), 7);
    assert!(
        all.values().all(Option::is_none),
        "no counts without collapsing"
    );

    let by_page = run(&[CollapseKey::Page]);
    assert_eq!(by_page.len(), 5, "{by_page:?}");
    let kept: Vec<&str> = ["en", "ja", "zh"]
        .into_iter()
        .filter(|s| by_page.contains_key(*s))
        .collect();
    assert_eq!(kept.len(), 1, "one translation kept: {by_page:?}");
    assert_eq!(by_page[kept[0]], Some(2));

    let near = run(&[CollapseKey::NearDuplicate]);
    assert_eq!(
        usize::from(near.contains_key("dup1")) + usize::from(near.contains_key("dup2")),
        1,
        "{near:?}"
    );
    let group = run(&[CollapseKey::Group]);
    assert_eq!(
        usize::from(group.contains_key("g1")) + usize::from(group.contains_key("g2")),
        1
    );
    let site = run(&[CollapseKey::Site]);
    assert_eq!(site.len(), 3, "one hit per host: {site:?}");
    let hidden: usize = site.values().map(|c| c.unwrap()).sum();
    assert_eq!(hidden, 4);

    // Keys combine; the page cut comes after collapsing (k = 2 of the 3 kept).
    let q = SearchQuery {
        collapse: vec![
            CollapseKey::Page,
            CollapseKey::NearDuplicate,
            CollapseKey::Group,
        ],
        ..SearchQuery::new("read", 2)
    };
    let r = e.search(&q).unwrap();
    assert_eq!(r.hits.len(), 2);
    let q = SearchQuery { offset: 2, ..q };
    assert_eq!(e.search(&q).unwrap().hits.len(), 1);
}

#[test]
fn a_fused_first_phase_is_rrf_of_the_inputs_rankings() {
    let docs: Vec<String> = (0..40)
        .map(|i| {
            let body = format!(
                "{} {} {}",
                "alpha ".repeat(1 + i % 5),
                "beta ".repeat(1 + (i * 7) % 4),
                "filler ".repeat(i % 13)
            );
            format!(r#"{{"id":"d{i}","title":"t{i}","body":"{body}"}}"#)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let e = engine(dir.path(), &docs);
    let inputs = [ModelKind::Bm25, ModelKind::Lm, ModelKind::TfIdf];
    let depth = 25;
    // Each input's own ranking, then RRF by its definition.
    let mut expected: HashMap<String, f64> = HashMap::new();
    for m in inputs {
        let q = SearchQuery::new("alpha beta", depth).model(m);
        for (r, hit) in e.search(&q).unwrap().hits.into_iter().enumerate() {
            *expected.entry(hit.id).or_default() += 1.0 / (60.0 + (r + 1) as f64);
        }
    }
    let q = SearchQuery {
        fusion: Some(FusionQuery {
            inputs: inputs.iter().map(|&k| Retriever::Text(k)).collect(),
            fusion: Fusion::new(rankd::search::fusion::Method::Rrf, 3, None, None, None).unwrap(),
            depth,
            hybrid: false,
        }),
        returns: Returns::IDS,
        ..SearchQuery::new("alpha beta", 40)
    };
    let r = e.search(&q).unwrap();
    assert_eq!(r.model, "fusion");
    assert_eq!(r.hits.len(), expected.len());
    let mut last = f32::INFINITY;
    for h in &r.hits {
        assert!(
            (f64::from(h.score) - expected[&h.id]).abs() < 1e-6,
            "{}",
            h.id
        );
        assert!(h.score <= last);
        last = h.score;
    }
    let report = r.fusion.unwrap();
    assert_eq!(report.inputs.len(), 3);
    for input in report.inputs {
        let tau = input.kendall_tau_b.unwrap();
        assert!((-1.0..=1.0).contains(&tau) && tau > 0.0, "{tau}");
    }
    // Ids of the page equal the fused list's head.
    let q2 = SearchQuery { k: 5, ..q.clone() };
    assert_eq!(ids(&e, &q2), ids(&e, &q)[..5]);
}

#[test]
fn rankd_fuse_writes_the_fused_run_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.trec");
    let b = dir.path().join("b.trec");
    // Ties are ranked by trec_eval's rule: d2 (id "d2" > "d1") comes before d1 in run a.
    std::fs::write(&a, "1 Q0 d1 1 5.0 a\n1 Q0 d2 2 5.0 a\n1 Q0 d3 3 1.0 a\n").unwrap();
    std::fs::write(&b, "1 Q0 d3 1 9 b\n1 Q0 d4 2 8 b\n2 Q0 d9 1 1 b\n").unwrap();
    let (pa, pb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let out = rankd(&["fuse", "--method", "rrf", "--k", "0", pa, pb]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // k = 0. q1: d3 1/3 + 1/1, d2 1/1, d1 1/2 and d4 1/2 tied (d1 first: rank 2 of the first
    // list is scanned before rank 2 of the second); q2: d9 1.
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    let got: Vec<(&str, &str, f64)> = lines
        .iter()
        .map(|f| (f[0], f[2], f[4].parse().unwrap()))
        .collect();
    let want = [
        ("1", "d3", 1.0 + 1.0 / 3.0),
        ("1", "d2", 1.0),
        ("1", "d1", 0.5),
        ("1", "d4", 0.5),
        ("2", "d9", 1.0),
    ];
    assert_eq!(got.len(), want.len(), "{text}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!((g.0, g.1), (w.0, w.1), "{text}");
        assert!((g.2 - w.2).abs() < 1e-12, "{text}");
    }
    assert!(lines.iter().all(|f| f[5] == "rankd-fuse-rrf"));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("Kendall τ_b"), "{stderr}");

    let bad_line = dir.path().join("bad.trec");
    std::fs::write(&bad_line, "1 Q0 d1 1 5.0 a\n1 Q0 d2 x\n").unwrap();
    let pbad = bad_line.to_str().unwrap();
    for (args, message) in [
        (
            vec!["fuse", "--method", "rfr", pa, pb],
            "unknown fusion method `rfr`",
        ),
        (vec!["fuse", "--method", "rrf", pa, pa], "given twice"),
        (
            vec!["fuse", "--method", "combsum", "--weights", "1,0", pa, pb],
            "weight 2 is 0",
        ),
        (
            vec!["fuse", "--method", "combsum", "--weights", "1", pa, pb],
            "1 weights for 2 inputs",
        ),
        (
            vec!["fuse", "--method", "rrf", "--norm", "zscore", pa, pb],
            "normalisation applies",
        ),
        (
            vec!["fuse", "--method", "rrf", pa, "/no/such.trec"],
            "/no/such.trec",
        ),
        (vec!["fuse", "--method", "rrf", pa, pbad], "bad.trec:2"),
    ] {
        let out = rankd(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
