//! Every text model against a brute-force oracle that recomputes tf, df, cf, field lengths
//! and averages from raw token lists (SPEC §1). Lengths are quantised exactly as tantivy's
//! fieldnorms are (`fieldnorm_to_id` then `id_to_fieldnorm`); averages are exact.

use std::collections::HashMap;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rankd::corpus::Document;
use rankd::search::{Engine, SearchQuery};
use rankd::text::config::TEXT_FIELDS;
use rankd::text::schema::{analyzer, tokens};
use rankd::text::{IndexConfig, ModelKind, TextIndex};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::tokenizer::TokenStream;

use crate::util::{cranfield_dir, first_phase};

const WORDS: &[&str] = &[
    "rust", "vector", "iterator", "borrow", "lifetime", "trait", "closure", "thread", "channel",
    "mutex", "socket", "parser", "token", "graph", "rank", "score", "index", "query", "field",
    "stream", "buffer", "memory", "cache", "future", "async", "macro", "module", "crate",
];

fn text(rng: &mut ChaCha8Rng, max: usize) -> String {
    let n = rng.random_range(0..=max);
    // Zipf-ish: low word indices are common.
    (0..n)
        .map(|_| {
            let r: f64 = rng.random();
            WORDS[((r * r) * WORDS.len() as f64) as usize]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn item_name(i: usize) -> String {
    let word = |k: usize| WORDS[k % WORDS.len()];
    let camel = |w: &str| format!("{}{}", w[..1].to_uppercase(), &w[1..]);
    match i % 3 {
        0 => String::new(),
        1 => format!("{}::{}{}", word(i), camel(word(i * 7)), camel(word(i * 13))),
        _ => format!("{}::{}_{}", word(i), word(i * 7), word(i * 13)),
    }
}

fn corpus(seed: u64, n: usize) -> Vec<Document> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|i| Document {
            id: format!("d{i}"),
            url: Some(format!(
                "https://example.org/{}/{}",
                WORDS[i % WORDS.len()],
                i
            )),
            title: text(&mut rng, 6),
            // An item name in a third of the documents, none in another third: a path whose
            // last segment is CamelCase or snake_case, split and joined by the `code` analyzer.
            name: item_name(i),
            headings: text(&mut rng, 10),
            // Up to 300 tokens: well past 40, where fieldnorms start to round.
            body: text(&mut rng, 300),
            anchor: text(&mut rng, 8),
            ..Default::default()
        })
        .collect()
}

/// Raw token lists of one document, per field name, and the position of every token.
struct RawDoc {
    id: String,
    fields: HashMap<&'static str, Vec<String>>,
    positions: HashMap<&'static str, Vec<usize>>,
}

fn raw(config: &IndexConfig, doc: &Document) -> RawDoc {
    let url = doc.url.clone().unwrap_or_default();
    let mut fields = HashMap::new();
    let mut positions = HashMap::new();
    let (mut all, mut all_pos) = (Vec::new(), Vec::new());
    // tantivy numbers the values of a multi-valued field (our `all`) one after the other,
    // leaving a gap of one position after each value, empty values included.
    let mut offset = 0;
    for (name, value) in [
        ("title", &doc.title),
        ("name", &doc.name),
        ("headings", &doc.headings),
        ("body", &doc.body),
        ("anchor", &doc.anchor),
        ("url", &url),
    ] {
        // Positions count the words the stop-word filter removed (the tokenizer numbers
        // words before filters run).
        let mut analyzer = analyzer(config.field(name).analyzer);
        let mut stream = analyzer.token_stream(value);
        let (mut toks, mut pos) = (Vec::new(), Vec::new());
        while let Some(t) = stream.next() {
            toks.push(t.text.clone());
            pos.push(t.position);
        }
        all_pos.extend(pos.iter().map(|p| offset + p));
        offset += pos.last().map_or(0, |p| p + 1) + 1;
        positions.insert(name, pos);
        all.extend(toks.clone());
        fields.insert(name, toks);
    }
    fields.insert("all", all);
    positions.insert("all", all_pos);
    RawDoc {
        id: doc.id.clone(),
        fields,
        positions,
    }
}

fn quantised(len: usize) -> f64 {
    FieldNormReader::id_to_fieldnorm(FieldNormReader::fieldnorm_to_id(len as u32)) as f64
}

struct Oracle<'a> {
    docs: &'a [RawDoc],
    config: &'a IndexConfig,
    /// (field, term) → (df, cf), counted once from the raw tokens.
    counts: HashMap<(&'static str, String), (f64, f64)>,
}

fn oracle<'a>(docs: &'a [RawDoc], config: &'a IndexConfig) -> Oracle<'a> {
    let mut counts: HashMap<(&'static str, String), (f64, f64)> = HashMap::new();
    for d in docs {
        for (field, toks) in &d.fields {
            let mut seen = std::collections::HashSet::new();
            for t in toks {
                let e = counts.entry((*field, t.clone())).or_default();
                e.1 += 1.0;
                if seen.insert(t) {
                    e.0 += 1.0;
                }
            }
        }
    }
    Oracle {
        docs,
        config,
        counts,
    }
}

impl Oracle<'_> {
    fn n(&self) -> f64 {
        self.docs.len() as f64
    }
    fn tf(d: &RawDoc, field: &str, t: &str) -> f64 {
        d.fields[field].iter().filter(|x| *x == t).count() as f64
    }
    fn df(&self, field: &str, t: &str) -> f64 {
        let field = TEXT_FIELDS.into_iter().find(|f| *f == field).unwrap();
        self.counts
            .get(&(field, t.to_string()))
            .map_or(0.0, |c| c.0)
    }
    fn cf(&self, field: &str, t: &str) -> f64 {
        let field = TEXT_FIELDS.into_iter().find(|f| *f == field).unwrap();
        self.counts
            .get(&(field, t.to_string()))
            .map_or(0.0, |c| c.1)
    }
    fn total(&self, field: &str) -> f64 {
        self.docs.iter().map(|d| d.fields[field].len() as f64).sum()
    }
    fn avgdl(&self, field: &str) -> f64 {
        self.total(field) / self.n()
    }
    fn bm25_idf(&self, df: f64) -> f64 {
        (1.0 + (self.n() - df + 0.5) / (df + 0.5)).ln()
    }

    /// Query terms with multiplicity, analysed like the field.
    fn query(&self, field: &str, q: &str) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for t in tokens(self.config.field(field).analyzer, q) {
            match out.iter_mut().find(|(x, _)| *x == t) {
                Some((_, c)) => *c += 1.0,
                None => out.push((t, 1.0)),
            }
        }
        out
    }

    /// The model's score of `d`, or None when `d` contains no query term (not retrieved).
    fn score(&self, kind: ModelKind, field: &str, q: &str, d: &RawDoc) -> Option<f64> {
        let field = if kind == ModelKind::Bm25F {
            "all"
        } else {
            field
        };
        let terms = self.query(field, q);
        let matched = terms
            .iter()
            .filter(|(t, _)| Self::tf(d, field, t) > 0.0)
            .count();
        if matched == 0 {
            return None;
        }
        let len = quantised(d.fields[field].len());
        let avgdl = self.avgdl(field);
        Some(match kind {
            ModelKind::Bm25 | ModelKind::Bm25Prox => {
                let p = self.config.field(field).bm25;
                let (k1, b) = (p.k1 as f64, p.b as f64);
                let bm25: f64 = terms
                    .iter()
                    .map(|(t, qtf)| {
                        let tf = Self::tf(d, field, t);
                        qtf * self.bm25_idf(self.df(field, t)) * tf * (k1 + 1.0)
                            / (tf + k1 * (1.0 - b + b * len / avgdl))
                    })
                    .sum();
                if kind == ModelKind::Bm25 {
                    bm25
                } else {
                    let alpha = self.config.models.proximity.alpha as f64;
                    bm25 + (alpha + (-min_dist(d, field, &terms, len)).exp()).ln()
                }
            }
            ModelKind::Bm25F => {
                let k1 = self.config.models.bm25f.k1 as f64;
                terms
                    .iter()
                    .map(|(t, qtf)| {
                        let tf_tilde: f64 = TEXT_FIELDS
                            .iter()
                            .filter_map(|u| Some((u, self.config.field(u).bm25f?)))
                            .map(|(u, p)| {
                                let (w, b) = (p.weight as f64, p.b as f64);
                                let lu = quantised(d.fields[u].len());
                                let avg = self.avgdl(u);
                                // A field empty in every document contributes nothing.
                                if avg == 0.0 {
                                    return 0.0;
                                }
                                w * Self::tf(d, u, t) / (1.0 - b + b * lu / avg)
                            })
                            .sum();
                        qtf * self.bm25_idf(self.df("all", t)) * tf_tilde * (k1 + 1.0)
                            / (tf_tilde + k1)
                    })
                    .sum()
            }
            ModelKind::TfIdf => {
                let idf = |t: &str| 1.0 + (self.n() / (self.df(field, t) + 1.0)).ln();
                let query_norm = 1.0
                    / terms
                        .iter()
                        .map(|(t, b)| (idf(t) * b).powi(2))
                        .sum::<f64>()
                        .sqrt();
                let coord = matched as f64 / terms.len() as f64;
                let sum: f64 = terms
                    .iter()
                    .map(|(t, boost)| {
                        Self::tf(d, field, t).sqrt() * idf(t).powi(2) * boost / len.sqrt()
                    })
                    .sum();
                coord * query_norm * sum
            }
            ModelKind::F2Exp => {
                let p = self.config.models.f2exp;
                let (k, s) = (p.k as f64, p.s as f64);
                terms
                    .iter()
                    .filter(|(t, _)| Self::tf(d, field, t) > 0.0)
                    .map(|(t, qtf)| {
                        let tf = Self::tf(d, field, t);
                        qtf * (self.n() / self.df(field, t)).powf(k) * tf
                            / (tf + s + s * len / avgdl)
                    })
                    .sum()
            }
            ModelKind::Lm => {
                let mu = self.config.models.lm.mu as f64;
                let c = self.total(field);
                terms
                    .iter()
                    .filter(|(t, _)| self.cf(field, t) > 0.0)
                    .map(|(t, qtf)| {
                        let p = self.cf(field, t) / c;
                        qtf * ((Self::tf(d, field, t) + mu * p) / (len + mu)).ln()
                    })
                    .sum()
            }
        })
    }
}

/// Brute-force MinDist over every pair of occurrences of two different query terms.
fn min_dist(d: &RawDoc, field: &str, terms: &[(String, f64)], len: f64) -> f64 {
    let toks = &d.fields[field];
    let pos = |t: &str| -> Vec<usize> {
        toks.iter()
            .zip(&d.positions[field])
            .filter(|(x, _)| *x == t)
            .map(|(_, p)| *p)
            .collect()
    };
    let mut best = f64::INFINITY;
    for (a, _) in terms {
        for (b, _) in terms {
            if a == b {
                continue;
            }
            for pa in pos(a) {
                for pb in pos(b) {
                    best = best.min(pa.abs_diff(pb) as f64);
                }
            }
        }
    }
    if best.is_finite() {
        best
    } else {
        len
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-4 * a.abs().max(b.abs()).max(1e-2)
}

fn check_models(docs: &[Document], queries: &[String], fields: &[&str], label: &str) {
    let dir = tempfile::tempdir().unwrap();
    let config = IndexConfig::default();
    let index = TextIndex::open_or_create(dir.path(), Some(config.clone())).unwrap();
    index.upsert(docs.iter().cloned()).unwrap();
    let engine = Engine::new(index);
    let raws: Vec<RawDoc> = docs.iter().map(|d| raw(&config, d)).collect();
    let oracle = oracle(&raws, &config);
    let mut compared = 0;
    for kind in ModelKind::ALL {
        for &field in fields {
            for q in queries {
                let mut req = SearchQuery::new(q.clone(), docs.len().min(1000)).model(kind);
                req.field = Some(field.to_string());
                let got = engine.search(&req).unwrap();
                let mut expected: Vec<(f64, &str)> = raws
                    .iter()
                    .filter_map(|d| Some((oracle.score(kind, field, q, d)?, d.id.as_str())))
                    .collect();
                expected.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
                assert_eq!(
                    got.total_hits,
                    expected.len(),
                    "{label} {kind} field={field} q={q:?}: match counts differ"
                );
                let by_id: HashMap<&str, f64> = expected.iter().map(|(s, id)| (*id, *s)).collect();
                for hit in &got.hits {
                    let want = by_id[hit.id.as_str()];
                    assert!(
                        close(hit.score as f64, want),
                        "{label} {kind} field={field} q={q:?} doc={}: rankd {} oracle {want}",
                        hit.id,
                        hit.score
                    );
                    compared += 1;
                }
                // Same ranking: the i-th returned score equals the oracle's i-th best score.
                for (hit, (want, _)) in got.hits.iter().zip(&expected) {
                    assert!(
                        close(hit.score as f64, *want),
                        "{label} {kind} field={field} q={q:?}: rank {} has {} but oracle's is {want}",
                        hit.rank,
                        hit.score
                    );
                }
            }
        }
    }
    assert!(compared > 100, "{label}: only {compared} scores compared");
}

/// Every document of the searcher as a candidate (first-phase score = doc id), in a scrambled
/// order: reversed, then rotated left by `rotate`.
fn scrambled_candidates(
    searcher: &tantivy::Searcher,
    rotate: usize,
) -> Vec<rankd::features::Candidate> {
    let mut candidates: Vec<rankd::features::Candidate> = searcher
        .segment_readers()
        .iter()
        .enumerate()
        .flat_map(|(s, r)| {
            (0..r.max_doc()).map(move |d| {
                rankd::features::Candidate::new(tantivy::DocAddress::new(s as u32, d), d as f32)
            })
        })
        .collect();
    candidates.reverse();
    candidates.rotate_left(rotate);
    candidates
}

#[test]
fn random_corpora_match_the_oracle() {
    for seed in 0..3 {
        let docs = corpus(seed, 120);
        let mut rng = ChaCha8Rng::seed_from_u64(100 + seed);
        let queries: Vec<String> = (0..12)
            .map(|_| {
                let n = rng.random_range(1..=4);
                (0..n)
                    .map(|_| WORDS[rng.random_range(0..WORDS.len())])
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .chain([
                "rust rust vector".to_string(),
                "rank nosuchword".to_string(),
            ])
            .collect();
        check_models(
            &docs,
            &queries,
            &["all", "body", "title"],
            &format!("seed {seed}"),
        );
    }
}

#[test]
fn feature_scores_match_search_scores_and_cover_unmatched_docs() {
    let docs = corpus(9, 80);
    let dir = tempfile::tempdir().unwrap();
    let config = IndexConfig::default();
    let index = TextIndex::open_or_create(dir.path(), Some(config.clone())).unwrap();
    index.upsert(docs.iter().cloned()).unwrap();
    let searcher = index.reader.searcher();
    let raws: Vec<RawDoc> = docs.iter().map(|d| raw(&config, d)).collect();
    let oracle = oracle(&raws, &config);
    for kind in ModelKind::ALL {
        let top = first_phase(&index, &searcher, kind, "vector borrow", 30);
        let bound = index
            .bind(
                &rankd::text::stats::Stats::new(&searcher),
                kind,
                None,
                &rankd::text::query::AnalyzedQuery::new("vector borrow"),
            )
            .unwrap()
            .unwrap();
        // Reversed order on purpose: score_docs must sort internally.
        let addrs: Vec<_> = top.iter().rev().map(|c| c.address).collect();
        let scores = bound.score_docs(&searcher, &addrs).unwrap();
        for (c, got) in top.iter().rev().zip(&scores) {
            let s = c.score;
            assert!(close(s as f64, *got as f64), "{kind}: {s} vs {got}");
        }
    }
    // LM scores a document without any query term too (the smoothed probability).
    let bound = index
        .bind(
            &rankd::text::stats::Stats::new(&searcher),
            ModelKind::Lm,
            Some("title"),
            &rankd::text::query::AnalyzedQuery::new("vector"),
        )
        .unwrap()
        .unwrap();
    let all: Vec<_> = searcher
        .segment_readers()
        .iter()
        .enumerate()
        .flat_map(|(s, r)| (0..r.max_doc()).map(move |d| tantivy::DocAddress::new(s as u32, d)))
        .collect();
    let scores = bound.score_docs(&searcher, &all).unwrap();
    let mu = config.models.lm.mu as f64;
    let p = oracle.cf("title", "vector") / oracle.total("title");
    for (addr, got) in all.iter().zip(scores) {
        let doc: tantivy::TantivyDocument = searcher.doc(*addr).unwrap();
        let id = index.stored(&doc).id;
        let d = raws.iter().find(|r| r.id == id).unwrap();
        let len = quantised(d.fields["title"].len());
        let want = ((Oracle::tf(d, "title", "vector") + mu * p) / (len + mu)).ln();
        assert!(close(got as f64, want), "{id}: {got} vs {want}");
    }
}

#[test]
fn a_cranfield_subset_matches_the_oracle() {
    let docs: Vec<Document> =
        rankd::corpus::cranfield::read_documents(&cranfield_dir().join("cran.all.1400"))
            .unwrap()
            .into_iter()
            .take(200)
            .collect();
    let queries: Vec<String> =
        rankd::corpus::cranfield::read_queries(&cranfield_dir().join("cran.qry"))
            .unwrap()
            .into_iter()
            .take(8)
            .map(|q| q.text)
            .collect();
    check_models(&docs, &queries, &["all", "body"], "cranfield");
}

/// The reranker's text features (SPEC §3.1) against the oracle: every model per field for
/// matching and non-matching candidates, BM25F, MinDist, match counts and lengths.
#[test]
fn reranker_text_features_match_the_oracle() {
    use rankd::features::{extract, FeatureSet};
    let docs = corpus(21, 90);
    let dir = tempfile::tempdir().unwrap();
    let config = IndexConfig::default();
    let index = TextIndex::open_or_create(dir.path(), Some(config.clone())).unwrap();
    index.upsert(docs.iter().cloned()).unwrap();
    let searcher = index.reader.searcher();
    let raws: Vec<RawDoc> = docs.iter().map(|d| raw(&config, d)).collect();
    let oracle = oracle(&raws, &config);
    let set = FeatureSet::current();
    // Every document is a candidate, in a scrambled order, matching or not.
    let candidates = scrambled_candidates(&searcher, 17);
    let mut compared = 0;
    for q in [
        "vector borrow",
        "rust rust trait",
        "graph",
        "nosuchword",
        "rank score index",
    ] {
        let m = extract(
            rankd::features::View {
                query: &rankd::text::query::AnalyzedQuery::new(q),
                index: &index,
                searcher: &searcher,
                stats: &rankd::text::stats::Stats::new(&searcher),
                links: None,
                dense: None,
            },
            set,
            &candidates,
            rankd::features::Extraction::full(rankd::features::Prf::Compute),
        )
        .unwrap();
        let ids = rankd::features::candidate_ids(&searcher, &candidates).unwrap();
        for (row, c) in candidates.iter().enumerate() {
            let id = &ids[row];
            let d = raws.iter().find(|r| &r.id == id).unwrap();
            let got = |name: &str| m.row(row)[set.get(name).unwrap()] as f64;
            assert_eq!(got("first_phase.score"), c.score as f64);
            assert_eq!(got("first_phase.rank"), (row + 1) as f64);
            let url = docs
                .iter()
                .find(|x| &x.id == id)
                .unwrap()
                .url
                .clone()
                .unwrap();
            let path = url.strip_prefix("https://example.org/").unwrap();
            assert_eq!(got("url.depth"), path.split('/').count() as f64, "{url}");
            assert_eq!(got("url.length"), url.len() as f64);
            for field in TEXT_FIELDS {
                let terms = oracle.query(field, q);
                let len = quantised(d.fields[field].len());
                let matched = terms
                    .iter()
                    .filter(|(t, _)| Oracle::tf(d, field, t) > 0.0)
                    .count();
                for (kind, name) in [
                    (ModelKind::TfIdf, "tfidf"),
                    (ModelKind::Bm25, "bm25"),
                    (ModelKind::F2Exp, "f2exp"),
                    (ModelKind::Lm, "lm"),
                ] {
                    let want = match oracle.score(kind, field, q, d) {
                        Some(s) => s,
                        // A document without any query term: the language model still
                        // scores it (smoothed probabilities); the others give 0.
                        None if kind == ModelKind::Lm => {
                            let mu = config.models.lm.mu as f64;
                            terms
                                .iter()
                                .filter(|(t, _)| oracle.cf(field, t) > 0.0)
                                .map(|(t, qtf)| {
                                    let p = oracle.cf(field, t) / oracle.total(field);
                                    qtf * (mu * p / (len + mu)).ln()
                                })
                                .sum()
                        }
                        None => 0.0,
                    };
                    let have = got(&format!("{field}.{name}"));
                    assert!(
                        close(have, want),
                        "{q:?} {id} {field}.{name}: {have} vs {want}"
                    );
                    compared += 1;
                }
                if !terms.is_empty() {
                    assert_eq!(got(&format!("{field}.matched")), matched as f64);
                    assert_eq!(got(&format!("{field}.len")), len, "{field}.len of {id}");
                }
                if field == "all" && !terms.is_empty() {
                    let want = if matched >= 2 {
                        min_dist(d, field, &terms, len)
                    } else {
                        len
                    };
                    assert_eq!(got("all.min_dist"), want, "{q:?} {id} min_dist");
                }
            }
            let bm25f = oracle.score(ModelKind::Bm25F, "all", q, d).unwrap_or(0.0);
            assert!(close(got("bm25f"), bm25f), "{q:?} {id} bm25f");
        }
    }
    assert!(compared > 5000, "only {compared} features compared");
}

/// RM3 of `src/features/prf.rs`, recomputed from raw tokens: the expanded query P3 over q ∪ E
/// and the normalised relevance model P̂ over E; None when the query has no term in `all` or
/// no feedback document has a token.
type Rm3 = (Vec<(String, f64)>, Vec<(String, f64)>);

fn rm3_oracle(oracle: &Oracle, q: &str, feedback: &[&RawDoc]) -> Option<Rm3> {
    let params = oracle.config.models.rm3;
    let terms = oracle.query("all", q);
    let docs: Vec<&&RawDoc> = feedback
        .iter()
        .filter(|d| !d.fields["all"].is_empty())
        .collect();
    if terms.is_empty() || docs.is_empty() {
        return None;
    }
    let mu = oracle.config.models.lm.mu as f64;
    let c = oracle.total("all");
    // P(q|D) with the exact length of D, then normalised over the feedback documents.
    let likelihood: Vec<f64> = docs
        .iter()
        .map(|d| {
            let len = d.fields["all"].len() as f64;
            terms
                .iter()
                .filter(|(t, _)| oracle.cf("all", t) > 0.0)
                .map(|(t, qtf)| {
                    let p = oracle.cf("all", t) / c;
                    ((Oracle::tf(d, "all", t) + mu * p) / (len + mu)).powf(*qtf)
                })
                .product::<f64>()
        })
        .collect();
    let z: f64 = likelihood.iter().sum();
    let mut p1: std::collections::BTreeMap<String, f64> = Default::default();
    for (d, l) in docs.iter().zip(&likelihood) {
        let len = d.fields["all"].len() as f64;
        let vocabulary: std::collections::BTreeSet<&String> = d.fields["all"].iter().collect();
        for t in vocabulary {
            *p1.entry(t.clone()).or_default() += l / z * Oracle::tf(d, "all", t) / len;
        }
    }
    let mut ranked: Vec<(String, f64)> = p1.into_iter().collect();
    ranked.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
    if ranked.len() > params.fb_terms {
        let (kept, cut) = (ranked[params.fb_terms - 1].1, ranked[params.fb_terms].1);
        assert!(
            kept == cut || (kept - cut) > 1e-12 * kept,
            "{q:?}: a near-tie at the expansion cut makes the oracle ambiguous"
        );
        ranked.truncate(params.fb_terms);
    }
    let mass: f64 = ranked.iter().map(|(_, p)| p).sum();
    let p_hat: Vec<(String, f64)> = ranked.into_iter().map(|(t, p)| (t, p / mass)).collect();
    let lambda = params.lambda as f64;
    let q_len: f64 = terms.iter().map(|(_, n)| n).sum();
    let mut p3: HashMap<String, f64> = HashMap::new();
    for (t, n) in &terms {
        *p3.entry(t.clone()).or_default() += lambda * n / q_len;
    }
    for (t, p) in &p_hat {
        *p3.entry(t.clone()).or_default() += (1.0 - lambda) * p;
    }
    Some((p3.into_iter().collect(), p_hat))
}

/// Weighted BM25 of `all` (SPEC §1.3 with real-valued query weights).
fn weighted_bm25(oracle: &Oracle, weights: &[(String, f64)], d: &RawDoc) -> f64 {
    let p = oracle.config.field("all").bm25;
    let (k1, b) = (p.k1 as f64, p.b as f64);
    let len = quantised(d.fields["all"].len());
    weights
        .iter()
        .map(|(t, w)| {
            let tf = Oracle::tf(d, "all", t);
            w * oracle.bm25_idf(oracle.df("all", t)) * tf * (k1 + 1.0)
                / (tf + k1 * (1.0 - b + b * len / oracle.avgdl("all")))
        })
        .sum()
}

/// Weighted BM25F (SPEC §1.4 with real-valued query weights), df over `all`.
fn weighted_bm25f(oracle: &Oracle, weights: &[(String, f64)], d: &RawDoc) -> f64 {
    let k1 = oracle.config.models.bm25f.k1 as f64;
    weights
        .iter()
        .map(|(t, w)| {
            let tf_tilde: f64 = TEXT_FIELDS
                .iter()
                .filter_map(|u| Some((u, oracle.config.field(u).bm25f?)))
                .filter(|(u, _)| oracle.avgdl(u) > 0.0)
                .map(|(u, p)| {
                    let (wu, b) = (p.weight as f64, p.b as f64);
                    let norm = 1.0 - b + b * quantised(d.fields[u].len()) / oracle.avgdl(u);
                    wu * Oracle::tf(d, u, t) / norm
                })
                .sum();
            w * oracle.bm25_idf(oracle.df("all", t)) * tf_tilde * (k1 + 1.0) / (tf_tilde + k1)
        })
        .sum()
}

/// Checks the `rm3.*` features of `candidates` (feedback: the first `fb_docs` of them).
fn check_rm3(
    index: &TextIndex,
    docs: &[Document],
    candidates: &[rankd::features::Candidate],
    queries: &[String],
    label: &str,
) -> usize {
    use rankd::features::{candidate_ids, extract, FeatureSet};
    let config = &index.config;
    let searcher = index.reader.searcher();
    let raws: Vec<RawDoc> = docs.iter().map(|d| raw(config, d)).collect();
    let oracle = oracle(&raws, config);
    let set = FeatureSet::current();
    let ids = candidate_ids(&searcher, candidates).unwrap();
    let raw_of = |id: &str| raws.iter().find(|r| r.id == id).unwrap();
    let feedback: Vec<&RawDoc> = ids
        .iter()
        .take(config.models.rm3.fb_docs)
        .map(|id| raw_of(id.as_str()))
        .collect();
    let mut compared = 0;
    for q in queries {
        let m = extract(
            rankd::features::View {
                query: &rankd::text::query::AnalyzedQuery::new(q),
                index,
                searcher: &searcher,
                stats: &rankd::text::stats::Stats::new(&searcher),
                links: None,
                dense: None,
            },
            set,
            candidates,
            rankd::features::Extraction::full(rankd::features::Prf::Compute),
        )
        .unwrap();
        let rm = rm3_oracle(&oracle, q, &feedback);
        for (row, id) in ids.iter().enumerate() {
            let d = raw_of(id.as_str());
            let got = |name: &str| m.row(row)[set.get(name).unwrap()] as f64;
            let (rm3, rm3f, expansion, cosine) = match &rm {
                None => (0.0, 0.0, 0.0, 0.0),
                Some((p3, p_hat)) => {
                    let idf = |t: &str| oracle.bm25_idf(oracle.df("all", t));
                    let dot: f64 = p_hat
                        .iter()
                        .map(|(t, p)| {
                            p * idf(t.as_str()) * Oracle::tf(d, "all", t) * idf(t.as_str())
                        })
                        .sum();
                    let norm_a = p_hat
                        .iter()
                        .map(|(t, p)| (p * idf(t.as_str())).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    let norm_x = p_hat
                        .iter()
                        .map(|(t, _)| (Oracle::tf(d, "all", t) * idf(t.as_str())).powi(2))
                        .sum::<f64>()
                        .sqrt();
                    let cosine = if norm_x > 0.0 {
                        dot / (norm_a * norm_x)
                    } else {
                        0.0
                    };
                    (
                        weighted_bm25(&oracle, p3, d),
                        weighted_bm25f(&oracle, p3, d),
                        weighted_bm25(&oracle, p_hat, d),
                        cosine,
                    )
                }
            };
            for (name, want) in [
                ("rm3.bm25", rm3),
                ("rm3.bm25f", rm3f),
                ("rm3.expansion_bm25", expansion),
                ("rm3.centroid_cosine", cosine),
            ] {
                let have = got(name);
                assert!(
                    close(have, want),
                    "{label} {q:?} {id} {name}: {have} vs {want}"
                );
                compared += 1;
            }
        }
    }
    compared
}

/// The RM3 pseudo-relevance-feedback features against the oracle, on random corpora under the
/// shipped parameters and under others (few feedback documents, a short expansion, λ = 0.7).
#[test]
fn rm3_features_match_the_oracle() {
    use rankd::text::config::Rm3Params;
    let mut compared = 0;
    for (seed, rm3) in [
        (31, Rm3Params::default()),
        (
            32,
            Rm3Params {
                fb_docs: 3,
                fb_terms: 5,
                lambda: 0.7,
            },
        ),
    ] {
        let docs = corpus(seed, 90);
        let dir = tempfile::tempdir().unwrap();
        let mut config = IndexConfig::default();
        config.models.rm3 = rm3;
        let index = TextIndex::open_or_create(dir.path(), Some(config)).unwrap();
        index.upsert(docs.iter().cloned()).unwrap();
        let searcher = index.reader.searcher();
        // Every document a candidate, scrambled (the feedback documents are the first ones).
        let candidates = scrambled_candidates(&searcher, 11);
        let queries: Vec<String> = [
            "vector borrow",
            "rust rust trait",
            "graph",
            "nosuchword",
            "rank score index nosuchword",
        ]
        .map(str::to_string)
        .to_vec();
        compared += check_rm3(
            &index,
            &docs,
            &candidates,
            &queries,
            &format!("seed {seed}"),
        );
    }
    assert!(compared > 2000, "only {compared} features compared");
}

/// The same on real text: 300 Cranfield abstracts, their BM25F top 50 as the window.
#[test]
fn rm3_features_match_the_oracle_on_cranfield() {
    let path = cranfield_dir();
    let docs: Vec<Document> = rankd::corpus::cranfield::read_documents(&path.join("cran.all.1400"))
        .unwrap()
        .into_iter()
        .take(300)
        .collect();
    let queries: Vec<String> = rankd::corpus::cranfield::read_queries(&path.join("cran.qry"))
        .unwrap()
        .into_iter()
        .take(10)
        .map(|q| q.text)
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(tmp.path(), Some(IndexConfig::default())).unwrap();
    index.upsert(docs.iter().cloned()).unwrap();
    let searcher = index.reader.searcher();
    let mut compared = 0;
    for q in &queries {
        let candidates = first_phase(&index, &searcher, ModelKind::Bm25F, q, 50);
        compared += check_rm3(
            &index,
            &docs,
            &candidates,
            std::slice::from_ref(q),
            "cranfield",
        );
    }
    assert!(compared > 1000, "only {compared} features compared");
}

/// The first phase's top k with MaxScore pruning (BM25F, and BM25 off tantivy's own path)
/// equals the first k of the exhaustive ranking, scores and ties included, over several
/// segments with deleted documents, each segment longer than the scorer's windows of
/// documents for queries of two terms or more (`text::scorer`, 64–819 documents under BM25F).
#[test]
fn pruned_top_k_equals_the_exhaustive_ranking() {
    let docs = corpus(21, 900);
    let dir = tempfile::tempdir().unwrap();
    let mut config = IndexConfig::default();
    // BM25 with other parameters than tantivy's: ranked by rankd's own scorer.
    for field in config.fields.values_mut() {
        field.bm25.k1 = 1.5;
        field.bm25.b = 0.6;
    }
    let index = TextIndex::open_or_create(dir.path(), Some(config)).unwrap();
    for chunk in docs.chunks(300) {
        index.upsert(chunk.iter().cloned()).unwrap();
    }
    let deleted: Vec<String> = docs.iter().step_by(7).map(|d| d.id.clone()).collect();
    index.delete(&deleted).unwrap();
    assert!(index.reader.searcher().segment_readers().len() > 1);
    let engine = Engine::new(index);
    let searcher = engine.index.reader.searcher();
    let columns = engine.index.doc_columns(&searcher).unwrap();
    let stats = rankd::text::stats::Stats::new(&searcher);
    let live: Vec<tantivy::DocAddress> = searcher
        .segment_readers()
        .iter()
        .enumerate()
        .flat_map(|(s, r)| {
            (0..r.max_doc())
                .filter(|&d| r.alive_bitset().is_none_or(|a| a.is_alive(d)))
                .map(move |d| tantivy::DocAddress::new(s as u32, d))
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let mut pruned_pages = 0;
    for _ in 0..60 {
        let n = rng.random_range(1..=5);
        let q = (0..n)
            .map(|_| WORDS[rng.random_range(0..WORDS.len())])
            .collect::<Vec<_>>()
            .join(" ");
        for kind in [ModelKind::Bm25F, ModelKind::Bm25] {
            let all = engine
                .search(&SearchQuery::new(q.clone(), 1000).model(kind))
                .unwrap();
            // The exhaustive ranking, independently: every live document scored a document at
            // a time (the feature path), matching ones ordered by score, then id.
            let query = rankd::text::query::AnalyzedQuery::new(q.as_str());
            let bound = engine
                .index
                .bind(&stats, kind, None, &query)
                .unwrap()
                .unwrap();
            let mut exhaustive: Vec<(f32, String)> = bound
                .score_docs(&searcher, &live)
                .unwrap()
                .into_iter()
                .zip(&live)
                .filter(|(score, _)| *score > 0.0)
                .map(|(score, &a)| (score, columns.head(a).unwrap().id))
                .collect();
            exhaustive.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
            let ranked: Vec<(f32, String)> =
                all.hits.iter().map(|h| (h.score, h.id.clone())).collect();
            assert_eq!(ranked, exhaustive, "{kind} q={q:?}: the unpruned ranking");
            for k in [1, 2, 5, 10, 30] {
                let top = engine
                    .search(&SearchQuery::new(q.clone(), k).model(kind))
                    .unwrap();
                let got: Vec<(&str, f32)> =
                    top.hits.iter().map(|h| (h.id.as_str(), h.score)).collect();
                let want: Vec<(&str, f32)> = all
                    .hits
                    .iter()
                    .take(k)
                    .map(|h| (h.id.as_str(), h.score))
                    .collect();
                assert_eq!(got, want, "{kind} k={k} q={q:?}");
                assert_eq!(top.total_hits, all.total_hits);
                pruned_pages += usize::from(all.hits.len() > k);
            }
        }
    }
    assert!(pruned_pages > 200, "only {pruned_pages} pages could prune");
}

/// A BM25F first phase hands its scores to feature extraction as the `bm25f` feature
/// (`Extraction::scores_are_bm25f`): the copied matrix equals the one that walks the postings
/// again, bit for bit, over segments with deletions.
#[test]
fn bm25f_first_phase_scores_are_the_bm25f_feature() {
    use rankd::features::{extract, FeatureSet};
    let docs = corpus(23, 120);
    let dir = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(dir.path(), Some(IndexConfig::default())).unwrap();
    index.upsert(docs[..60].iter().cloned()).unwrap();
    index.upsert(docs[60..].iter().cloned()).unwrap();
    index
        .delete(&[docs[3].id.clone(), docs[70].id.clone()])
        .unwrap();
    index.reader.reload().unwrap();
    let searcher = index.reader.searcher();
    let set = FeatureSet::current();
    let col = set.get("bm25f").unwrap();
    let mut nonzero = 0;
    for q in [
        "vector borrow",
        "rust rust trait",
        "graph",
        "rank score index",
    ] {
        let candidates = first_phase(&index, &searcher, ModelKind::Bm25F, q, 40);
        let prf = rankd::features::Prf::Skip;
        let walked = extract(
            rankd::features::View {
                query: &rankd::text::query::AnalyzedQuery::new(q),
                index: &index,
                searcher: &searcher,
                stats: &rankd::text::stats::Stats::new(&searcher),
                links: None,
                dense: None,
            },
            set,
            &candidates,
            rankd::features::Extraction::full(prf),
        )
        .unwrap();
        let copied = extract(
            rankd::features::View {
                query: &rankd::text::query::AnalyzedQuery::new(q),
                index: &index,
                searcher: &searcher,
                stats: &rankd::text::stats::Stats::new(&searcher),
                links: None,
                dense: None,
            },
            set,
            &candidates,
            rankd::features::Extraction {
                scores_are_bm25f: true,
                ..rankd::features::Extraction::full(prf)
            },
        )
        .unwrap();
        for row in 0..walked.rows {
            assert_eq!(
                walked.row(row)[col].to_bits(),
                copied.row(row)[col].to_bits(),
                "{q}: row {row}"
            );
            nonzero += usize::from(walked.row(row)[col] > 0.0);
        }
        assert_eq!(walked, copied, "{q}");
    }
    assert!(nonzero > 20);
}
