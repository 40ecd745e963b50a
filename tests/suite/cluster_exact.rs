//! A collection split over shards ranks exactly as the single index: the Cranfield
//! collection over three shards (by `cluster::routing::shard_of`), searched through the
//! root's algorithm over in-process shards (`cluster::root::transport::LocalShard`, the
//! leaf's own functions), every first-phase model, every query, top 100 ids and score bits
//! equal; a reranker's feature rows equal bit for bit; ties at the cut ordered by id on both
//! sides.

use std::path::Path;
use std::sync::Arc;

use rankd::cluster::leaf::{self, Pins};
use rankd::cluster::root::transport::{LocalShard, ShardClient};
use rankd::cluster::root::{Root, RootOptions};
use rankd::cluster::routing::shard_of;
use rankd::cluster::wire::{QueryCall, StatsCall, PROTOCOL};
use rankd::corpus::Document;
use rankd::features::Prf;
use rankd::search::{Engine, Returns, SearchQuery, SearchResponse};
use rankd::text::query::AnalyzedQuery;
use rankd::text::stats::StatsRequest;
use rankd::text::{IndexConfig, ModelKind, TextIndex};

const SHARDS: u32 = 3;

struct Fixture {
    _dirs: Vec<tempfile::TempDir>,
    single: Engine,
    shards: Vec<Arc<Engine>>,
    runtime: tokio::runtime::Runtime,
}

impl Fixture {
    /// A root over the shards, each one in-process replica. A new root pins new searchers,
    /// so it sees link scores set on the engines since the last one.
    fn root(&self) -> Root {
        self.root_with(None)
    }

    /// [`Fixture::root`] with an active reranker.
    fn root_with(&self, model: Option<rankd::search::model::ActiveModel>) -> Root {
        let clients = self
            .shards
            .iter()
            .enumerate()
            .map(|(s, e)| {
                let shard: Arc<dyn ShardClient> =
                    Arc::new(LocalShard::new(e.clone(), format!("in-process shard {s}")));
                vec![shard]
            })
            .collect();
        self.runtime
            .block_on(Root::connect(clients, model, RootOptions::default()))
            .unwrap()
    }

    fn search(&self, root: &Root, q: &SearchQuery) -> SearchResponse {
        self.runtime.block_on(root.search(q)).unwrap()
    }

    /// The BM25F top-60 window's feature rows of `q` through `root` equal the single
    /// index's bit for bit, but in the columns named by `skip` (those read from the clock,
    /// which two calls read apart): the single index's rows.
    fn equal_feature_rows(
        &self,
        root: &Root,
        q: &str,
        skip: &[&str],
    ) -> rankd::features::FeatureMatrix {
        let names = rankd::features::FeatureSet::current().names();
        let searcher = self.single.index.reader.searcher();
        let single = self
            .single
            .window(&searcher, q, ModelKind::Bm25F, 60, Prf::Skip)
            .unwrap()
            .unwrap();
        let (_, got) = self
            .runtime
            .block_on(root.feature_window(q, ModelKind::Bm25F, 60, Prf::Skip))
            .unwrap();
        assert_eq!(got.rows, single.features.rows, "{q:?}");
        for row in 0..got.rows {
            for (col, (a, b)) in got
                .row(row)
                .iter()
                .zip(single.features.row(row))
                .enumerate()
            {
                if !skip.contains(&names[col].as_str()) {
                    assert_eq!(a.to_bits(), b.to_bits(), "{q:?} row {row} {}", names[col]);
                }
            }
        }
        single.features
    }
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
            Arc::new(open(
                docs.iter()
                    .filter(|d| shard_of(&d.id, SHARDS) == s)
                    .cloned()
                    .collect(),
            ))
        })
        .collect();
    Fixture {
        _dirs: dirs,
        single,
        shards,
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
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

fn ids_and_bits(r: &SearchResponse) -> Vec<(&str, u32)> {
    r.hits
        .iter()
        .map(|h| (h.id.as_str(), h.score.to_bits()))
        .collect()
}

/// Compares the root's first phase with the single index's for every model and query (ids
/// and score bits); returns how many hits were compared.
fn compare_first_phase(f: &Fixture, queries: &[String], k: usize) -> usize {
    let root = f.root();
    let mut compared = 0;
    for kind in ModelKind::ALL {
        for q in queries {
            let query = SearchQuery::new(q, k).model(kind);
            let single = f.single.search(&query).unwrap();
            let sharded = f.search(&root, &query);
            assert_eq!(sharded.total_hits, single.total_hits, "{kind} {q:?}");
            let got = ids_and_bits(&sharded);
            assert_eq!(got, ids_and_bits(&single), "{kind} {q:?}");
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

/// What the page shows (URL, title, snippet with the collection's statistics) and the page
/// itself (`offset`) are the single index's too.
#[test]
fn cranfield_pages_over_three_shards_show_what_the_single_index_shows() {
    let (docs, queries) = cranfield();
    let f = build(&docs);
    let root = f.root();
    let mut shown = 0;
    for q in &queries[..60] {
        // Short pages come with the first phase; the deeper one takes the hits round.
        for (kind, offset) in [
            (ModelKind::Bm25F, 0),
            (ModelKind::Lm, 7),
            (ModelKind::Bm25, 25),
        ] {
            let mut query = SearchQuery::new(q, 10).model(kind);
            query.offset = offset;
            query.returns = Returns::ALL;
            let single = f.single.search(&query).unwrap();
            let sharded = f.search(&root, &query);
            assert_eq!(sharded.hits.len(), single.hits.len(), "{q:?}");
            for (a, b) in sharded.hits.iter().zip(&single.hits) {
                assert_eq!(
                    (
                        &a.id,
                        a.rank,
                        a.score.to_bits(),
                        &a.url,
                        &a.title,
                        &a.snippet
                    ),
                    (
                        &b.id,
                        b.rank,
                        b.score.to_bits(),
                        &b.url,
                        &b.title,
                        &b.snippet
                    ),
                    "{kind} {q:?}"
                );
                shown += usize::from(a.snippet.as_ref().is_some_and(|s| !s.is_empty()));
            }
        }
    }
    assert!(shown > 1400, "only {shown} snippets compared");
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
    let root = f.root();
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
        let (_, got) = f
            .runtime
            .block_on(root.feature_window(q, kind, 100, prf))
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
    // A shard's statistics of one query, then a first phase of another with them.
    let (engine, pins) = (&f.shards[0], Pins::default());
    let request =
        StatsRequest::for_query(&IndexConfig::default(), &AnalyzedQuery::new("shock wave"))
            .unwrap();
    let stats = leaf::stats(
        engine,
        &pins,
        &StatsCall {
            protocol: PROTOCOL,
            request,
            generation: None,
        },
    )
    .unwrap();
    let call = QueryCall {
        protocol: PROTOCOL,
        generation: stats.generation,
        text: "boundary layer".into(),
        model: ModelKind::Bm25.name().into(),
        field: None,
        limit: 10,
        stats: stats.stats,
        boost: None,
        collapse: Vec::new(),
        fetch: None,
        fetch_first: None,
        sort: None,
        now: None,
        lang: None,
        dense_optional: false,
    };
    // The caller's error (a 400 naming `stats` over HTTP), never a fallback.
    let message = match leaf::query(engine, &pins, &call) {
        Err(leaf::LeafError::Field {
            field: "stats",
            message,
        }) => message,
        other => panic!("{:?}", other.map(|r| r.hits.len())),
    };
    assert!(message.contains("lack the statistics of all:"), "{message}");
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
        .shards
        .iter()
        .map(|e| TextIndex::open(&e.index.dir, None).unwrap())
        .collect();
    rankd::links::compute_and_store_sharded(&shards, &options, None, &mut |_| {}).unwrap();
    let single_links = rankd::links::load(single_index).unwrap().unwrap();
    let whole = &single_links.scores;
    let mut held = 0;
    for (engine, shard) in f.shards.iter().zip(&shards) {
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
    let root = f.root();
    let names = rankd::features::FeatureSet::current().names();
    let mut linked_rows = 0;
    for q in [
        "shock wave",
        "boundary layer flow",
        "heat transfer",
        "mach nozzle jet",
    ] {
        let rows = f.equal_feature_rows(&root, q, &[]);
        let in_links = names.iter().position(|n| n == "window.in_links").unwrap();
        for row in 0..rows.rows {
            linked_rows += usize::from(rows.row(row)[in_links] > 0.0);
        }
        // The PageRank boost with explanations (the boost's part, each hit's link scores).
        let mut query = SearchQuery::new(q, 10).ranking(rankd::search::Ranking::Boost {
            weight: 0.5,
            window: 40,
        });
        query.explain = true;
        let single = f.single.search(&query).unwrap();
        let sharded = f.search(&root, &query);
        assert_eq!(ids_and_bits(&sharded), ids_and_bits(&single), "{q:?}");
        assert_eq!(explanations(&sharded), explanations(&single), "{q:?}");
        assert!(sharded.hits.iter().all(|h| {
            let e = h.explain.as_ref().unwrap();
            e.boost.is_some() && e.links.is_some()
        }));
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
    let searchers: Vec<_> = f.shards.iter().map(|e| e.index.reader.searcher()).collect();
    // The tables as the root holds them: through their bytes.
    let rating = |e: &Engine, s: &tantivy::Searcher| e.index.doc_columns(s).unwrap().rating_sum(s);
    let tables: Vec<StatsTable> = searchers
        .iter()
        .zip(&f.shards)
        .map(|(s, e)| {
            StatsTable::from_bytes(
                &StatsTable::of_searcher(s, &schema, rating(e, s))
                    .unwrap()
                    .to_bytes(),
            )
        })
        .collect::<Result<_, _>>()
        .unwrap();
    let searcher = f.single.index.reader.searcher();
    let single = StatsTable::of_searcher(&searcher, &schema, rating(&f.single, &searcher)).unwrap();
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
        let q = &AnalyzedQuery::new(q.as_str());
        for request in [
            StatsRequest::for_query(&config, q).unwrap(),
            StatsRequest::for_fields(&config, q, &["body"], false).unwrap(),
            StatsRequest::for_terms("all", ["zzznotaterm".to_string(), "flow".into()]),
        ] {
            for ((s, t), e) in searchers.iter().zip(&tables).zip(&f.shards) {
                let mut gathered = GlobalStats::gather(s, &schema, &request).unwrap();
                gathered.rating = request.rating.then(|| rating(e, s));
                assert_eq!(t.lookup(&request), gathered, "{q:?}");
                terms += gathered.terms.values().map(|m| m.len()).sum::<usize>();
            }
        }
    }
    assert!(terms > 10_000, "only {terms} terms compared");
}

/// Collapsing through the root (every key, alone and combined, on a page after an offset)
/// keeps the hits the single index keeps, with the same counts of hidden hits: the shards
/// send each candidate's collapse keys (fixed hashes) and the root collapses the merged
/// window.
#[test]
fn collapsing_over_shards_keeps_what_the_single_index_keeps() {
    use rankd::search::CollapseKey;
    let hosts = ["a.org", "b.org", "c.org", "d.org", "e.org"];
    let words = ["shock", "wave", "boundary", "layer", "flow", "heat"];
    let docs: Vec<Document> = (0..300)
        .map(|i| {
            // Pages repeat under a second URL with a query string (one page key), texts
            // repeat every 7 documents (near-duplicates), groups every 11.
            let page = i % 120;
            let text = (0..12)
                .map(|k| words[(i % 7 + k * (1 + k % 3)) % words.len()])
                .collect::<Vec<_>>()
                .join(" ");
            let mut extra = serde_json::Map::new();
            extra.insert("group".into(), format!("g{}", i % 11).into());
            Document {
                id: format!("p{i:03}"),
                url: Some(format!(
                    "https://{}/page{page}{}",
                    hosts[i % hosts.len()],
                    if i >= 120 { "?copy=1" } else { "" }
                )),
                title: format!("{} {}", words[i % 6], words[(i / 6) % 6]),
                body: text,
                extra,
                ..Document::default()
            }
        })
        .collect();
    let f = build(&docs);
    let root = f.root();
    let mut collapsed = 0;
    let lists = [
        vec![CollapseKey::Page],
        vec![CollapseKey::Site],
        vec![CollapseKey::Group],
        vec![CollapseKey::NearDuplicate],
        vec![CollapseKey::Page, CollapseKey::NearDuplicate],
    ];
    for keys in &lists {
        for (q, kind, offset) in [
            ("shock wave", ModelKind::Bm25, 0),
            ("boundary layer flow", ModelKind::Bm25F, 3),
            ("heat", ModelKind::Lm, 1),
        ] {
            let mut query = SearchQuery::new(q, 8).model(kind);
            query.offset = offset;
            query.collapse = keys.clone();
            let single = f.single.search(&query).unwrap();
            let sharded = f.search(&root, &query);
            let shown = |r: &SearchResponse| -> Vec<(String, u32, Option<usize>)> {
                r.hits
                    .iter()
                    .map(|h| (h.id.clone(), h.score.to_bits(), h.collapsed))
                    .collect()
            };
            assert_eq!(shown(&sharded), shown(&single), "{keys:?} {q:?} {kind}");
            collapsed += single
                .hits
                .iter()
                .filter(|h| h.collapsed.unwrap_or(0) > 0)
                .count();
        }
    }
    assert!(collapsed > 40, "only {collapsed} hits hid others");
}

/// The hits' explanations as JSON (what `/search?explain=true` answers).
fn explanations(r: &SearchResponse) -> Vec<serde_json::Value> {
    r.hits
        .iter()
        .map(|h| serde_json::to_value(h.explain.as_ref().expect("explained")).unwrap())
        .collect()
}

/// `explain=true` through the root: every model's term-by-term breakdown with the
/// collection's statistics, the first-phase rank and score, on a page after an offset and
/// after collapsing, equal the single index's; then a reranker trained on Cranfield's
/// judgments, whose feature contributions the root computes from the rows the shards sent.
#[test]
fn explanations_over_shards_equal_the_single_index() {
    use std::sync::atomic::AtomicBool;
    let (docs, queries) = cranfield();
    let f = build(&docs);
    let root = f.root();
    let mut explained = 0;
    for kind in ModelKind::ALL {
        for (i, q) in queries[..12].iter().enumerate() {
            let mut query = SearchQuery::new(q, 5).model(kind);
            query.offset = i % 3;
            query.explain = true;
            if i % 4 == 0 {
                query.collapse = vec![rankd::search::CollapseKey::NearDuplicate];
            }
            let single = f.single.search(&query).unwrap();
            let sharded = f.search(&root, &query);
            assert_eq!(
                ids_and_bits(&sharded),
                ids_and_bits(&single),
                "{kind} {q:?}"
            );
            assert_eq!(
                explanations(&sharded),
                explanations(&single),
                "{kind} {q:?}"
            );
            explained += sharded.hits.len();
        }
    }
    assert!(explained > 300, "only {explained} explanations compared");

    // A reranker trained on 40 judged queries of the single index.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/cranfield");
    let qrels =
        rankd::corpus::cranfield::read_qrels(&dir.join("cranqrel"), Default::default()).unwrap();
    let judged: Vec<rankd::training::JudgedQuery> =
        rankd::corpus::cranfield::read_queries(&dir.join("cran.qry"))
            .unwrap()
            .into_iter()
            .take(40)
            .map(|q| rankd::training::JudgedQuery {
                grades: qrels
                    .get(&q.id)
                    .map(|g| g.iter().map(|(d, &g)| (d.clone(), g)).collect())
                    .unwrap_or_default(),
                qid: q.id,
                text: q.text,
            })
            .collect();
    let (windows, _) = rankd::training::judged_windows(
        &f.single,
        &judged,
        ModelKind::Bm25F,
        30,
        Prf::Skip,
        &|| {},
    )
    .unwrap();
    let mut settings = rankd::training::TrainSettings::default();
    settings.network.epochs = 3;
    let outcome = rankd::training::train_on_windows(
        &windows,
        &settings.config("test".into(), rankd::rerank::MetricConvention::Trec),
        0.25,
        &mut |_| {},
        &AtomicBool::new(false),
    )
    .unwrap();
    let active = |m: rankd::rerank::Reranker| {
        rankd::search::model::ActiveModel::new(m, "m.json".into()).unwrap()
    };
    let reranking = f.root_with(Some(active(outcome.model.clone())));
    f.single.set_model(Some(Arc::new(active(outcome.model))));
    let mut reranked = 0;
    for (i, q) in queries[40..70].iter().enumerate() {
        let mut query = SearchQuery::new(q, 10)
            .model(ModelKind::Bm25F)
            .ranking(rankd::search::Ranking::Rerank { window: 30 });
        query.offset = i % 2;
        query.explain = i % 3 == 0;
        query.returns = Returns::ALL;
        let single = f.single.search(&query).unwrap();
        let sharded = f.search(&reranking, &query);
        assert_eq!(ids_and_bits(&sharded), ids_and_bits(&single), "{q:?}");
        if query.explain {
            assert_eq!(explanations(&sharded), explanations(&single), "{q:?}");
            reranked += sharded.hits.len();
        }
    }
    assert!(
        reranked > 80,
        "only {reranked} reranked explanations compared"
    );
}

/// Fusions through the root: every method (weighted, normalised, Condorcet), after an offset,
/// explained, and as the window a reranker-free boost or collapsing reorders, give the single
/// index's ids, fused scores, fusion report and explanations.
#[test]
fn fusions_over_shards_equal_the_single_index() {
    use rankd::search::{Fusion, FusionQuery, Retriever};
    let (docs, queries) = cranfield();
    let f = build(&docs);
    let root = f.root();
    let fusions = [
        (
            "rrf",
            vec![ModelKind::Bm25F, ModelKind::Lm, ModelKind::Bm25Prox],
            None,
            None,
        ),
        (
            "combsum",
            vec![ModelKind::Bm25, ModelKind::Lm],
            Some("zscore"),
            None,
        ),
        (
            "combmnz",
            vec![ModelKind::TfIdf, ModelKind::F2Exp],
            None,
            Some(vec![2.0, 0.5]),
        ),
        ("borda", vec![ModelKind::Bm25F, ModelKind::Bm25], None, None),
        (
            "condorcet",
            vec![ModelKind::Lm, ModelKind::Bm25F, ModelKind::F2Exp],
            None,
            None,
        ),
    ];
    let mut compared = 0;
    for (method, inputs, norm, weights) in &fusions {
        let fusion =
            Fusion::from_names(method, inputs.len(), None, *norm, weights.clone()).unwrap();
        for (i, q) in queries[..30].iter().enumerate() {
            let mut query = SearchQuery::new(q, 10);
            query.fusion = Some(FusionQuery {
                inputs: inputs.iter().map(|&k| Retriever::Text(k)).collect(),
                fusion: fusion.clone(),
                depth: 50,
                hybrid: false,
            });
            query.offset = i % 3;
            query.explain = i % 2 == 0;
            if i % 5 == 0 {
                query.collapse = vec![rankd::search::CollapseKey::NearDuplicate];
            }
            let single = f.single.search(&query).unwrap();
            let sharded = f.search(&root, &query);
            let what = format!("{method} {q:?}");
            assert_eq!(sharded.total_hits, single.total_hits, "{what}");
            assert_eq!(sharded.model, "fusion");
            assert_eq!(ids_and_bits(&sharded), ids_and_bits(&single), "{what}");
            assert_eq!(
                serde_json::to_value(&sharded.fusion).unwrap(),
                serde_json::to_value(&single.fusion).unwrap(),
                "{what}"
            );
            if query.explain {
                assert_eq!(explanations(&sharded), explanations(&single), "{what}");
            }
            compared += sharded.hits.len();
        }
    }
    assert!(compared > 1000, "only {compared} fused hits compared");
}

/// A collection with dates, votes and ratings (some documents lacking each), whose keys and
/// texts repeat so that sort keys and scores tie across shards.
fn social_corpus() -> Vec<Document> {
    let words = ["shock", "wave", "boundary", "layer", "flow", "heat"];
    (0..240)
        .map(|i| {
            let text = (0..10)
                .map(|k| words[(i % 5 + k * (1 + k % 2)) % words.len()])
                .collect::<Vec<_>>()
                .join(" ");
            let mut extra = serde_json::Map::new();
            if i % 5 != 0 {
                extra.insert("votes_up".into(), (i % 13).into());
                extra.insert("votes_down".into(), (i % 3).into());
            }
            if i % 3 != 0 {
                extra.insert("rating".into(), (1.0 + (i % 7) as f64 * 0.55).into());
                extra.insert("rating_count".into(), (1 + i % 11).into());
            }
            Document {
                id: format!("s{i:03}"),
                title: format!("{} {}", words[i % 6], words[(i / 4) % 6]),
                body: text,
                published_at: (i % 4 != 0).then_some(1_700_000_000 + (i as i64 % 9) * 86_400),
                extra,
                ..Document::default()
            }
        })
        .collect()
}

/// `sort=` through the root: every mode, after offsets, alone and collapsed, gives the single
/// index's ids, first-phase scores and sort keys. The keys tie (repeated dates, votes and
/// ratings) and so do the scores (repeated texts), across shards: both sides order ties by
/// id. The rating sort's Bayesian average reads the collection's mean rating, which the
/// shards receive summed exactly from all of them.
#[test]
fn sorts_over_shards_equal_the_single_index() {
    use rankd::search::{Ranking, SortMode};
    let f = build(&social_corpus());
    let root = f.root();
    let now = 1_700_000_000 + 12 * 86_400;
    let mut compared = 0;
    let mut tied = 0;
    for mode in SortMode::ALL {
        for (q, kind, offset, k) in [
            ("shock wave", ModelKind::Bm25, 0, 10),
            ("boundary layer flow", ModelKind::Bm25F, 7, 25),
            ("heat", ModelKind::Lm, 3, 40),
        ] {
            for collapse in [false, true] {
                let mut query = SearchQuery::new(q, k)
                    .model(kind)
                    .ranking(Ranking::Sort(mode));
                query.offset = offset;
                query.now = Some(now);
                if collapse {
                    query.collapse = vec![rankd::search::CollapseKey::NearDuplicate];
                }
                let single = f.single.search(&query).unwrap();
                let sharded = f.search(&root, &query);
                let shown = |r: &SearchResponse| -> Vec<(String, u32, Option<Option<u64>>)> {
                    r.hits
                        .iter()
                        .map(|h| {
                            let key = h.sort_key.map(|k| k.map(f64::to_bits));
                            (h.id.clone(), h.score.to_bits(), key)
                        })
                        .collect()
                };
                assert_eq!(shown(&sharded), shown(&single), "{mode} {q:?} {kind}");
                assert_eq!(sharded.total_hits, single.total_hits);
                assert!(!single.hits.is_empty());
                compared += single.hits.len();
                tied += single
                    .hits
                    .windows(2)
                    .filter(|w| w[0].sort_key == w[1].sort_key && w[0].score == w[1].score)
                    .count();
            }
        }
    }
    assert!(compared > 300, "only {compared} hits compared");
    assert!(tied > 20, "only {tied} ties of key and score");

    // A sort no document of any shard can have is refused, as on the single index.
    let plain = build(&cranfield().0[..90]);
    let query = SearchQuery::new("flow", 5).ranking(Ranking::Sort(SortMode::Rating));
    let single = plain.single.search(&query).unwrap_err().to_string();
    let sharded = plain
        .runtime
        .block_on(plain.root().search(&query))
        .unwrap_err()
        .to_string();
    assert_eq!(sharded, single);
}

/// The reranker's social features over shards equal the single index's: the Bayesian
/// average reads the collection's mean rating (summed exactly over the shards, not each
/// shard's own). The columns measured from "now" are skipped: the two calls read the clock
/// apart.
#[test]
fn social_feature_rows_over_shards_equal_the_single_index() {
    let f = build(&social_corpus());
    let root = f.root();
    let bayes = rankd::features::FeatureSet::current()
        .get("social.bayes")
        .unwrap();
    let mut rated = 0;
    for q in ["shock wave", "boundary layer flow", "heat"] {
        let rows = f.equal_feature_rows(
            &root,
            q,
            &["fresh.age_days", "fresh.decay", "social.gravity"],
        );
        for row in 0..rows.rows {
            rated += usize::from(rows.row(row)[bayes] != 0.0);
        }
    }
    assert!(rated > 60, "only {rated} rows with a Bayesian average");
}

/// Documents with item names (paths of identifiers) and without, whose names repeat across
/// shards.
fn named_corpus() -> Vec<Document> {
    let items = [
        "waves::ShockWave",
        "waves::shock_wave_angle",
        "layers::BoundaryLayer",
        "layers::boundary",
        "flow::HeatFlow",
        "flow",
    ];
    let words = ["shock", "wave", "boundary", "layer", "flow", "heat"];
    (0..120)
        .map(|i| Document {
            id: format!("n{i:03}"),
            title: format!("{} {}", words[i % 6], words[(i / 6) % 6]),
            name: if i % 7 == 0 {
                String::new()
            } else {
                items[i % items.len()].to_string()
            },
            body: (0..8)
                .map(|k| words[(i + k * 5) % words.len()])
                .collect::<Vec<_>>()
                .join(" "),
            ..Document::default()
        })
        .collect()
}

/// The name features (and the `name` field's text features) over shards equal the single
/// index's, bit for bit.
#[test]
fn name_feature_rows_over_shards_equal_the_single_index() {
    let f = build(&named_corpus());
    let root = f.root();
    let set = rankd::features::FeatureSet::current();
    let [exact, prefix, name_bm25] =
        ["name.exact", "name.prefix", "name.bm25"].map(|n| set.get(n).unwrap());
    let (mut exacts, mut prefixes, mut scored) = (0, 0, 0);
    for q in [
        "ShockWave",
        "shock wave",
        "boundary_layer",
        "layers::bound",
        "heat flow",
    ] {
        let rows = f.equal_feature_rows(&root, q, &["fresh.age_days", "fresh.decay"]);
        for row in 0..rows.rows {
            let r = rows.row(row);
            exacts += usize::from(r[exact] == 1.0);
            prefixes += usize::from(r[prefix] == 1.0);
            scored += usize::from(r[name_bm25] > 0.0);
        }
    }
    assert!(
        exacts >= 20 && prefixes > exacts && scored > 100,
        "{exacts} {prefixes} {scored}"
    );
}

/// `lang=`, the default collapse by page and the requester's languages, as `GET /search`
/// turns its parameters into a query, through the root: the same hits, scores, hidden counts
/// and totals as the single index. Pages exist in English and up to three translations (URLs
/// differing by a language segment, which the default page rules drop).
#[test]
fn languages_and_the_default_collapse_over_shards_equal_the_single_index() {
    use rankd::search::request::SearchRequest;
    let words = [
        "shock", "wave", "boundary", "layer", "flow", "heat", "plate",
    ];
    let langs = ["en", "ja", "es", "zh"];
    let docs: Vec<Document> = (0..240)
        .map(|i| {
            let (page, lang) = (i / 4, langs[i % 4]);
            let text = (0..10)
                .map(|k| words[(page + i % 4 + k * (1 + k % 3)) % words.len()])
                .collect::<Vec<_>>()
                .join(" ");
            let segment = if lang == "en" {
                String::new()
            } else {
                format!("{lang}/")
            };
            Document {
                id: format!("{lang}-{page:03}"),
                url: Some(format!("https://docs.test/{segment}page{page}.html")),
                title: format!("{} {}", words[page % 7], words[(page / 7) % 7]),
                body: text,
                // Some pages do not say their language.
                lang: (page % 5 != 0).then(|| lang.to_string()),
                ..Document::default()
            }
        })
        .collect();
    let f = build(&docs);
    let root = f.root();
    let mut hidden = 0;
    for q in ["shock wave", "boundary layer flow", "heat plate"] {
        for params in [
            serde_json::json!({}),
            serde_json::json!({"offset": 3, "k": 5}),
            serde_json::json!({"lang": "ja"}),
            serde_json::json!({"lang": "es", "collapse": "none"}),
            serde_json::json!({"collapse": "none"}),
            serde_json::json!({"model": "lm", "offset": 95}),
        ] {
            for requester in [
                vec![],
                vec!["ja".to_string()],
                vec!["fr".into(), "es".into()],
            ] {
                let mut request = params.clone();
                request["q"] = q.into();
                let request: SearchRequest = serde_json::from_value(request).unwrap();
                let mut query = request.into_query(false).unwrap();
                query.requester_langs = requester.clone();
                let single = f.single.search(&query).unwrap();
                let sharded = f.search(&root, &query);
                let shown = |r: &SearchResponse| -> Vec<(String, u32, Option<usize>)> {
                    r.hits
                        .iter()
                        .map(|h| (h.id.clone(), h.score.to_bits(), h.collapsed))
                        .collect()
                };
                assert_eq!(
                    shown(&sharded),
                    shown(&single),
                    "{q:?} {params} {requester:?}"
                );
                assert_eq!(sharded.total_hits, single.total_hits, "{q:?} {params}");
                hidden += single
                    .hits
                    .iter()
                    .filter_map(|h| h.collapsed)
                    .sum::<usize>();
                if let Some(lang) = params["lang"].as_str() {
                    assert!(
                        single.hits.iter().all(|h| h.id.starts_with(lang)),
                        "{params}"
                    );
                }
            }
        }
    }
    assert!(hidden > 100, "only {hidden} versions hidden");
}
