//! A collection split over shards ranks exactly as the single index (issue 13): the Cranfield
//! collection over three shards (by `cluster::routing::shard_of`), every first-phase model,
//! every query, top 100 ids and score bits equal; a reranker's feature rows equal bit for bit;
//! ties at the cut ordered by id on both sides.

use std::path::Path;

use rankd::cluster::{routing::shard_of, LocalCluster};
use rankd::corpus::Document;
use rankd::features::{Extraction, Prf};
use rankd::search::{Engine, SearchQuery};
use rankd::text::{IndexConfig, ModelKind, TextIndex};

const SHARDS: u32 = 3;

struct Fixture {
    _dirs: Vec<tempfile::TempDir>,
    single: Engine,
    cluster: LocalCluster,
}

fn build(docs: &[Document]) -> Fixture {
    let mut dirs = Vec::new();
    let mut open = |docs: Vec<Document>| {
        let dir = tempfile::tempdir().unwrap();
        let index = TextIndex::open_or_create(dir.path(), Some(IndexConfig::default())).unwrap();
        index.upsert(docs).unwrap();
        dirs.push(dir);
        Engine::new(index)
    };
    let single = open(docs.to_vec());
    let shards = (0..SHARDS)
        .map(|s| {
            open(
                docs.iter()
                    .filter(|d| shard_of(&d.id, SHARDS) == s)
                    .cloned()
                    .collect(),
            )
        })
        .collect();
    Fixture {
        _dirs: dirs,
        single,
        cluster: LocalCluster::new(shards),
    }
}

fn cranfield() -> (Vec<Document>, Vec<String>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/cranfield");
    let docs = rankd::corpus::cranfield::read_documents(&dir.join("cran.all.1400")).unwrap();
    let queries = rankd::corpus::cranfield::read_queries(&dir.join("cran.qry"))
        .unwrap()
        .into_iter()
        .map(|q| q.text)
        .collect();
    (docs, queries)
}

/// Compares the cluster's first phase with the single index's for every model and query;
/// returns how many hits were compared.
fn compare_first_phase(f: &Fixture, queries: &[String], k: usize) -> usize {
    let mut compared = 0;
    for kind in ModelKind::ALL {
        for q in queries {
            let single = f
                .single
                .search(&SearchQuery::new(q, k).model(kind))
                .unwrap();
            let searchers = f.cluster.searchers();
            let stats = f.cluster.gather(&searchers, q).unwrap();
            let query = SearchQuery::new(q, k).model(kind);
            let Some(merged) = f
                .cluster
                .first_phase(&searchers, &stats, &query, kind, k)
                .unwrap()
            else {
                assert!(single.hits.is_empty(), "{kind} {q:?}");
                continue;
            };
            assert_eq!(merged.total_hits, single.total_hits, "{kind} {q:?}");
            let want: Vec<(&str, u32)> = single
                .hits
                .iter()
                .map(|h| (h.id.as_str(), h.score.to_bits()))
                .collect();
            let got: Vec<(&str, u32)> = merged
                .hits
                .iter()
                .map(|h| (h.hit.id.as_str(), h.hit.score.to_bits()))
                .collect();
            assert_eq!(got, want, "{kind} {q:?}");
            compared += got.len();
        }
    }
    compared
}

#[test]
fn cranfield_over_three_shards_ranks_as_the_single_index() {
    let (docs, queries) = cranfield();
    let f = build(&docs);
    let sizes: Vec<usize> = f
        .cluster
        .shards
        .iter()
        .map(|e| e.index.reader.searcher().num_docs() as usize)
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), docs.len());
    assert!(
        sizes.iter().all(|&n| n > 400),
        "unbalanced shards: {sizes:?}"
    );
    let compared = compare_first_phase(&f, &queries, 100);
    // 6 models × 225 queries × 100 hits, less the queries matching fewer documents.
    assert!(compared > 120_000, "only {compared} hits compared");
}

#[test]
fn cranfield_feature_rows_over_three_shards_equal_the_single_index() {
    feature_rows_equal(Prf::Skip, 225, 20_000);
}

/// With RM3: the relevance model estimated once from the merged window's feedback documents
/// (read on their shards) with the collection's statistics, its expansion terms' statistics
/// gathered from every shard.
#[test]
fn cranfield_rm3_feature_rows_over_three_shards_equal_the_single_index() {
    feature_rows_equal(Prf::Compute, 40, 3_000);
}

fn feature_rows_equal(prf: Prf, queries: usize, min_rows: usize) {
    let (docs, queries_all) = cranfield();
    let queries = &queries_all[..queries];
    let f = build(&docs);
    let searcher = f.single.index.reader.searcher();
    let mut rows = 0;
    let mut rm3_rows = 0;
    let rm3_col = rankd::features::FeatureSet::current()
        .names()
        .iter()
        .position(|n| n == "rm3.bm25")
        .unwrap();
    for q in queries {
        let kind = ModelKind::Bm25F;
        let single = f
            .single
            .window(&searcher, q, kind, 100, prf)
            .unwrap()
            .unwrap();
        let searchers = f.cluster.searchers();
        let stats = f.cluster.gather(&searchers, q).unwrap();
        let merged = f
            .cluster
            .first_phase(&searchers, &stats, &SearchQuery::new(q, 100), kind, 100)
            .unwrap()
            .unwrap();
        let how = Extraction {
            scores_are_bm25f: true,
            ..Extraction::full(prf)
        };
        let got = f
            .cluster
            .window_features(&searchers, &stats, q, &merged.hits, how)
            .unwrap();
        assert_eq!(got.rows, single.features.rows, "{q:?}");
        for row in 0..got.rows {
            let names = rankd::features::FeatureSet::current().names();
            for (col, (a, b)) in got
                .row(row)
                .iter()
                .zip(single.features.row(row))
                .enumerate()
            {
                // Freshness is measured from "now", which differs between the two calls; the
                // Cranfield documents carry no dates, so it is the default on both sides.
                assert_eq!(a.to_bits(), b.to_bits(), "{q:?} row {row} {}", names[col]);
            }
            rm3_rows += usize::from(got.row(row)[rm3_col] != 0.0);
        }
        rows += got.rows;
    }
    assert!(rows > min_rows, "only {rows} rows compared");
    if prf == Prf::Compute {
        assert!(
            rm3_rows > min_rows / 2,
            "only {rm3_rows} rows with RM3 scores"
        );
    }
}

/// Identical documents tie; the cut at k falls inside the tie group and the group spans
/// shards: both sides keep the smallest ids, in id order.
#[test]
fn ties_at_the_cut_are_ordered_by_id_on_both_sides() {
    let docs: Vec<Document> = (0..60)
        .rev()
        .map(|i| Document {
            id: format!("twin-{i:02}"),
            title: "shock wave boundary layer".into(),
            body: "the same text in every twin".into(),
            ..Document::default()
        })
        .chain((0..40).map(|i| Document {
            id: format!("other-{i:02}"),
            body: format!("unrelated text number {i}"),
            ..Document::default()
        }))
        .collect();
    let f = build(&docs);
    assert!(compare_first_phase(&f, &["shock wave".to_string()], 25) >= 6 * 25);
    let hits = f
        .single
        .search(&SearchQuery::new("shock wave", 25).model(ModelKind::Bm25))
        .unwrap()
        .hits;
    let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
    let want: Vec<String> = (0..25).map(|i| format!("twin-{i:02}")).collect();
    assert_eq!(ids, want);
    // The same documents committed in three batches (six segments, below the merge policy's
    // eight): the tie group spans segments, and the order by id holds across them.
    let dir = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(dir.path(), Some(IndexConfig::default())).unwrap();
    for batch in docs.chunks(34) {
        index.upsert(batch.to_vec()).unwrap();
    }
    let segments = index.reader.searcher().segment_readers().len();
    assert!(segments > 1, "{segments} segment(s)");
    let engine = Engine::new(index);
    for kind in ModelKind::ALL {
        let hits = engine
            .search(&SearchQuery::new("shock wave", 25).model(kind))
            .unwrap()
            .hits;
        let ids: Vec<&str> = hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, want, "{kind}");
    }
}

/// A shard scoring with statistics the table lacks fails with an internal error naming the
/// term; it never falls back to its own numbers.
#[test]
fn statistics_missing_from_the_shipped_table_are_an_error_not_a_fallback() {
    let (docs, _) = cranfield();
    let f = build(&docs[..60]);
    let searchers = f.cluster.searchers();
    let stats = f.cluster.gather(&searchers, "shock wave").unwrap();
    let q = SearchQuery::new("boundary layer", 10).model(ModelKind::Bm25);
    let err = f
        .cluster
        .first_phase(&searchers, &stats, &q, ModelKind::Bm25, 10)
        .unwrap_err();
    assert!(
        matches!(err, rankd::text::SearchError::Internal(_)),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("lack the statistics of all:"),
        "{err}"
    );
}

/// A linked corpus: 400 pages about a few topics, each linking to 1–8 others (some links
/// leave the collection). Seeded, so every run builds the same graph.
fn linked_corpus() -> Vec<Document> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(13);
    let words = [
        "shock",
        "wave",
        "boundary",
        "layer",
        "flow",
        "heat",
        "transfer",
        "pressure",
        "wing",
        "supersonic",
        "laminar",
        "turbulent",
        "nozzle",
        "jet",
        "mach",
        "drag",
    ];
    let n = 400;
    (0..n)
        .map(|i| {
            let mut text = |len: usize| {
                (0..len)
                    .map(|_| words[rng.random_range(0..words.len())])
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let title = text(3);
            let body = text(20 + i % 37);
            let links = (0..1 + i % 8)
                .map(|k| format!("https://x.org/p{}", (i * 7 + k * 13 + 1) % (n + 20)))
                .collect();
            Document {
                id: format!("p{i}"),
                url: Some(format!("https://x.org/p{i}")),
                title,
                body,
                links,
                ..Document::default()
            }
        })
        .collect()
}

/// The link graph of the whole collection, computed over the shards, gives every document
/// the single index's scores bit for bit (nodes are numbered by id on both sides); each shard
/// stores only its own documents' part, and a sharded window's feature rows, link features
/// and window HITS/SALSA (from the out-links each shard sends) included, equal the single
/// index's.
#[test]
fn link_scores_and_link_features_over_shards_equal_the_single_index() {
    let docs = linked_corpus();
    let f = build(&docs);
    let options = rankd::graph::LinkScoreOptions::default();
    let single_index = &f.single.index;
    rankd::links::compute_and_store(single_index, &options, None, &mut |_| {}).unwrap();
    let shards: Vec<TextIndex> = f
        .cluster
        .shards
        .iter()
        .map(|e| TextIndex::open(&e.index.dir, None).unwrap())
        .collect();
    rankd::links::compute_and_store_sharded(&shards, &options, None, &mut |_| {}).unwrap();
    let single_links = rankd::links::load(single_index).unwrap().unwrap();
    let whole = &single_links.scores;
    let mut held = 0;
    for (engine, shard) in f.cluster.shards.iter().zip(&shards) {
        // Each shard holds its own documents' part of the whole graph's scores.
        let links = rankd::links::load(shard).unwrap().unwrap();
        let part = &links.scores;
        assert!(links.whole().is_none());
        assert_eq!(part.total_nodes(), whole.n());
        assert_eq!(part.n() as u64, shard.num_docs(), "one entry per document");
        for (i, key) in part.keys.iter().enumerate() {
            let u = part.global(i as u32);
            assert_eq!(&whole.keys[u as usize], key);
            assert_eq!(
                part.pagerank[i].to_bits(),
                whole.pagerank[u as usize].to_bits()
            );
            assert_eq!(
                part.hits_hub[i].to_bits(),
                whole.hits_hub[u as usize].to_bits()
            );
            assert_eq!(part.out_links(i as u32), whole.out_links(u));
        }
        held += part.n();
        engine.set_links(Some(std::sync::Arc::new(links)));
    }
    assert_eq!(held, whole.n(), "the parts cover the graph once");
    f.single.set_links(Some(std::sync::Arc::new(single_links)));
    let searcher = f.single.index.reader.searcher();
    let names = rankd::features::FeatureSet::current().names();
    let mut linked_rows = 0;
    for q in [
        "shock wave",
        "boundary layer flow",
        "heat transfer",
        "mach nozzle jet",
    ] {
        let single = f
            .single
            .window(&searcher, q, ModelKind::Bm25F, 60, Prf::Skip)
            .unwrap()
            .unwrap();
        let searchers = f.cluster.searchers();
        let stats = f.cluster.gather(&searchers, q).unwrap();
        let merged = f
            .cluster
            .first_phase(
                &searchers,
                &stats,
                &SearchQuery::new(q, 60),
                ModelKind::Bm25F,
                60,
            )
            .unwrap()
            .unwrap();
        let how = Extraction {
            scores_are_bm25f: true,
            ..Extraction::full(Prf::Skip)
        };
        let got = f
            .cluster
            .window_features(&searchers, &stats, q, &merged.hits, how)
            .unwrap();
        assert_eq!(got.rows, single.features.rows, "{q:?}");
        let in_links = names.iter().position(|n| n == "window.in_links").unwrap();
        for row in 0..got.rows {
            for (col, (a, b)) in got
                .row(row)
                .iter()
                .zip(single.features.row(row))
                .enumerate()
            {
                assert_eq!(a.to_bits(), b.to_bits(), "{q:?} row {row} {}", names[col]);
            }
            linked_rows += usize::from(got.row(row)[in_links] > 0.0);
        }
    }
    assert!(
        linked_rows > 20,
        "only {linked_rows} rows with window in-links"
    );
}

/// A shard's whole statistics table answers every query's statistics exactly as a gather
/// from the shard does (the root's `--stats table` against its default), and the tables
/// summed over the shards equal the single index's own numbers.
#[test]
fn statistics_tables_answer_as_gathering_does() {
    use rankd::text::stats::{GlobalStats, StatsRequest};
    use rankd::text::stats_table::StatsTable;
    use std::collections::BTreeMap;
    let (docs, queries) = cranfield();
    let f = build(&docs);
    let config = IndexConfig::default();
    let schema = f.single.index.index.schema();
    let searchers = f.cluster.searchers();
    // The tables as the root holds them: through their bytes.
    let tables: Vec<StatsTable> = searchers
        .iter()
        .map(|s| StatsTable::from_bytes(&StatsTable::of_searcher(s, &schema).unwrap().to_bytes()))
        .collect::<Result<_, _>>()
        .unwrap();
    let single = StatsTable::of_searcher(&f.single.index.reader.searcher(), &schema).unwrap();
    // Every (field, term)'s df and cf, and every field's token count, summed over the
    // shards, are the single index's.
    type Sums = BTreeMap<(String, String), (u64, u64)>;
    let entries = |t: &StatsTable, sums: &mut Sums, tokens: &mut BTreeMap<String, u64>| {
        for (field, total, terms) in t.fields() {
            *tokens.entry(field.to_string()).or_default() += total;
            for (term, df, cf) in terms {
                let e = sums.entry((field.to_string(), term)).or_default();
                e.0 += df;
                e.1 += cf;
            }
        }
    };
    let (mut summed, mut summed_tokens) = (Sums::new(), BTreeMap::new());
    for t in &tables {
        entries(t, &mut summed, &mut summed_tokens);
    }
    let (mut whole, mut whole_tokens) = (Sums::new(), BTreeMap::new());
    entries(&single, &mut whole, &mut whole_tokens);
    assert_eq!(summed, whole);
    assert_eq!(summed_tokens, whole_tokens);
    assert!(whole.len() > 5_000, "only {} terms", whole.len());
    assert_eq!(
        tables.iter().map(StatsTable::num_docs).sum::<u64>(),
        single.num_docs()
    );
    let mut terms = 0;
    for q in &queries {
        for request in [
            StatsRequest::for_query(&config, q).unwrap(),
            StatsRequest::for_fields(&config, q, &["body"], false).unwrap(),
            StatsRequest::for_terms("all", ["zzznotaterm".to_string(), "flow".into()]),
        ] {
            for (s, t) in searchers.iter().zip(&tables) {
                let gathered = GlobalStats::gather(s, &schema, &request).unwrap();
                assert_eq!(t.lookup(&request), gathered, "{q:?}");
                terms += gathered.terms.values().map(|m| m.len()).sum::<usize>();
            }
        }
    }
    assert!(terms > 10_000, "only {terms} terms compared");
}
