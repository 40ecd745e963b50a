//! The root's algorithm against a fake transport: in-process shards wrapped so that a replica
//! fails, answers slowly, or commits between the rounds of a search. Every answer that
//! succeeds is compared with the single index over the same documents.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::transport::{CallFailure, LocalShard, ShardClient};
use super::{Root, RootOptions};
use crate::cluster::routing::shard_of;
use crate::cluster::wire::*;
use crate::corpus::Document;
use crate::search::SearchError;
use crate::search::{ActiveModel, Engine, SearchQuery};
use crate::text::stats_table::StatsTable;
use crate::text::{IndexConfig, TextIndex};

const SHARDS: u32 = 2;

/// A hook run once on a replica's shard, before it answers its first `query` call.
type Hook = Box<dyn FnOnce(&LocalShard) + Send>;

/// An in-process shard that can be told to fail, to be slow, or to run a hook mid-search.
struct Fake {
    inner: LocalShard,
    failing: AtomicBool,
    delay: Mutex<Duration>,
    before_query: Mutex<Option<Hook>>,
    calls: AtomicUsize,
    /// Its `hits` calls.
    hits_calls: AtomicUsize,
    /// Its first-phase replies lose the page fields of every other candidate that has them.
    drop_fields: AtomicBool,
    /// The `limit` of each of its `query` calls.
    query_limits: Mutex<Vec<usize>>,
}

impl Fake {
    fn new(engine: Arc<Engine>, name: &str) -> Arc<Self> {
        Arc::new(Fake {
            inner: LocalShard::new(engine, name),
            failing: AtomicBool::new(false),
            delay: Mutex::new(Duration::ZERO),
            before_query: Mutex::new(None),
            calls: AtomicUsize::new(0),
            hits_calls: AtomicUsize::new(0),
            drop_fields: AtomicBool::new(false),
            query_limits: Mutex::new(Vec::new()),
        })
    }

    /// Counts the call, waits the delay, and fails if told to.
    async fn enter(&self) -> Result<(), CallFailure> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let delay = *self.delay.lock().unwrap();
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        if self.failing.load(Ordering::SeqCst) {
            return Err(CallFailure::Replica(format!(
                "{}: connection refused",
                self.name()
            )));
        }
        Ok(())
    }
}

#[async_trait]
impl ShardClient for Fake {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn info(&self) -> Result<InfoResponse, CallFailure> {
        self.enter().await?;
        self.inner.info().await
    }
    async fn stats(&self, call: &StatsCall) -> Result<StatsReply, CallFailure> {
        self.enter().await?;
        self.inner.stats(call).await
    }
    async fn table(&self, call: &TableCall) -> Result<(u64, Arc<StatsTable>), CallFailure> {
        self.enter().await?;
        self.inner.table(call).await
    }
    async fn query(&self, call: &QueryCall) -> Result<QueryReply, CallFailure> {
        self.enter().await?;
        self.query_limits.lock().unwrap().push(call.limit);
        let hook = self.before_query.lock().unwrap().take();
        if let Some(hook) = hook {
            hook(&self.inner);
        }
        let mut reply = self.inner.query(call).await?;
        if self.drop_fields.load(Ordering::SeqCst) {
            for c in reply
                .hits
                .iter_mut()
                .filter(|c| c.shown.is_some())
                .step_by(2)
            {
                c.shown = None;
            }
        }
        Ok(reply)
    }
    async fn features(&self, call: &FeaturesCall) -> Result<FeaturesReply, CallFailure> {
        self.enter().await?;
        self.inner.features(call).await
    }
    async fn feedback(&self, call: &FeedbackCall) -> Result<FeedbackReply, CallFailure> {
        self.enter().await?;
        self.inner.feedback(call).await
    }
    async fn hits(&self, call: &HitsCall) -> Result<HitsReply, CallFailure> {
        self.enter().await?;
        self.hits_calls.fetch_add(1, Ordering::SeqCst);
        self.inner.hits(call).await
    }
}

fn docs() -> Vec<Document> {
    let topics = [
        "shock wave",
        "boundary layer",
        "heat transfer",
        "wing flutter",
    ];
    (0..80)
        .map(|i| Document {
            id: format!("d{i:02}"),
            title: format!("{} study {i}", topics[i % 4]),
            body: format!(
                "measurements of {} at mach {} with {} and {}",
                topics[i % 4],
                i % 7,
                topics[(i + 1) % 4],
                topics[(i * 3) % 4]
            ),
            ..Document::default()
        })
        .collect()
}

/// An engine over `docs` in a new directory (kept alive by the returned guard).
fn engine(docs: Vec<Document>) -> (tempfile::TempDir, Arc<Engine>) {
    let dir = tempfile::tempdir().unwrap();
    let index = TextIndex::open_or_create(dir.path(), Some(IndexConfig::default())).unwrap();
    index.upsert(docs).unwrap();
    (dir, Arc::new(Engine::new(index)))
}

fn shard_docs(docs: &[Document], shard: u32) -> Vec<Document> {
    docs.iter()
        .filter(|d| shard_of(&d.id, SHARDS) == shard)
        .cloned()
        .collect()
}

/// The single index, and `replicas` replicas of each of the two shards.
struct Cluster {
    _dirs: Vec<tempfile::TempDir>,
    single: Arc<Engine>,
    /// `replicas[s][r]`: replica `r` of shard `s`, and its engine.
    replicas: Vec<Vec<(Arc<Fake>, Arc<Engine>)>>,
}

fn cluster(replicas: usize) -> Cluster {
    cluster_of(docs(), replicas)
}

fn cluster_of(docs: Vec<Document>, replicas: usize) -> Cluster {
    let mut dirs = Vec::new();
    let (dir, single) = engine(docs.clone());
    dirs.push(dir);
    let replicas = (0..SHARDS)
        .map(|s| {
            (0..replicas)
                .map(|r| {
                    let (dir, e) = engine(shard_docs(&docs, s));
                    dirs.push(dir);
                    (Fake::new(e.clone(), &format!("shard {s} replica {r}")), e)
                })
                .collect()
        })
        .collect();
    Cluster {
        _dirs: dirs,
        single,
        replicas,
    }
}

impl Cluster {
    async fn root(&self, options: RootOptions) -> Root {
        let shards = self
            .replicas
            .iter()
            .map(|r| {
                r.iter()
                    .map(|(f, _)| f.clone() as Arc<dyn ShardClient>)
                    .collect()
            })
            .collect();
        Root::connect(shards, None, options).await.unwrap()
    }
}

fn options() -> RootOptions {
    RootOptions {
        timeout: Duration::from_secs(5),
        leaf_timeout: Duration::from_millis(300),
        allow_partial: false,
        // Health from failed calls only, so the calls a test counts are its searches'
        // (`health_checks_drive_readiness_without_traffic` checks the checks).
        health_interval: None,
        ..RootOptions::default()
    }
}

/// The ids and score bits of `q` on the single index.
fn single(c: &Cluster, q: &SearchQuery) -> Vec<(String, u32)> {
    ids(&c.single.search(q).unwrap())
}

fn ids(r: &crate::search::SearchResponse) -> Vec<(String, u32)> {
    r.hits
        .iter()
        .map(|h| (h.id.clone(), h.score.to_bits()))
        .collect()
}

/// A collapsed first page comes with the first phase: each shard sends the fields of its
/// first hits that its own collapse keeps, so the search needs no hits round. Where a
/// shard's reply lacks a page hit's fields, the root asks for those alone, and the page is
/// the same.
#[tokio::test]
async fn a_collapsed_page_comes_with_the_first_phase_and_missing_fields_are_fetched() {
    let c = cluster(1);
    let root = c.root(options()).await;
    let mut q = SearchQuery::new("boundary layer heat", 10);
    q.collapse = vec![crate::search::collapse::CollapseKey::Page];
    q.returns = crate::search::Returns::ALL;
    let page = |r: &crate::search::SearchResponse| {
        r.hits
            .iter()
            .map(|h| {
                let shown = (h.title.clone(), h.url.clone(), h.snippet.clone());
                (h.id.clone(), h.score.to_bits(), h.collapsed, shown)
            })
            .collect::<Vec<_>>()
    };
    let want = page(&c.single.search(&q).unwrap());
    assert_eq!(want.len(), 10);
    assert!(want
        .iter()
        .all(|h| h.3 .2.as_ref().is_some_and(|s| !s.is_empty())));
    let hits_calls = || {
        c.replicas
            .iter()
            .map(|r| r[0].0.hits_calls.load(Ordering::SeqCst))
            .sum::<usize>()
    };
    assert_eq!(page(&root.search(&q).await.unwrap()), want);
    assert_eq!(hits_calls(), 0, "the page came with the first phase");
    for r in &c.replicas {
        r[0].0.drop_fields.store(true, Ordering::SeqCst);
    }
    assert_eq!(page(&root.search(&q).await.unwrap()), want);
    assert!(hits_calls() > 0, "the missing fields were asked for");
}

#[tokio::test]
async fn a_failing_replica_is_skipped_and_the_answer_is_the_single_index() {
    let c = cluster(2);
    let root = c.root(options()).await;
    let q = SearchQuery::new("shock wave", 10);
    let want = single(&c, &q);
    assert!(want.len() >= 10);
    // Replica 0 of shard 0 fails every call; searches pick shard 0's replicas in an order
    // that varies with the search, so within a few one tries replica 0 first.
    let failing = &c.replicas[0][0].0;
    failing.failing.store(true, Ordering::SeqCst);
    let connected = failing.calls.load(Ordering::SeqCst);
    let mut searches = 0;
    while failing.calls.load(Ordering::SeqCst) == connected || searches < 4 {
        searches += 1;
        assert!(searches <= 32, "replica 0 never tried");
        let r = root.search(&q).await.unwrap();
        assert_eq!(ids(&r), want);
        assert_eq!(r.partial, Some(false));
    }
    assert!(!super::replicas::down(&root.shards.load()).contains(&0));
    let names: Vec<(String, bool)> = root.shards.load()[0]
        .iter()
        .map(|r| (r.name().to_string(), r.up()))
        .collect();
    assert!(
        names.contains(&("shard 0 replica 0".into(), false)),
        "{names:?}"
    );
}

/// The root's health checks (`replicas::Replica::checked`) follow a death, a hang and a
/// return with no search running: a hung replica with a healthy peer costs a search nothing
/// once its check fails (no call waits for its timeout), a shard whose replicas all fail
/// their checks is down for readiness, replicas whose checks failed are still tried when
/// their shard has no other (an answer stays whole), and one that answers again is up after
/// its next check.
#[tokio::test]
async fn health_checks_drive_readiness_without_traffic() {
    let c = cluster(2);
    let root = c
        .root(RootOptions {
            health_interval: Some(Duration::from_millis(50)),
            leaf_timeout: Duration::from_millis(300),
            ..options()
        })
        .await;
    async fn until(what: &str, done: impl Fn() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(10), "never {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let q = SearchQuery::new("boundary layer", 10);
    let want = single(&c, &q);
    // A hung replica: failed by its check, then skipped without waiting.
    *c.replicas[1][0].0.delay.lock().unwrap() = Duration::from_secs(30);
    let hung = || root.shards.load()[1][0].failed_check().is_some();
    until("checked the hung replica", hung).await;
    assert!(root.shards_down().is_empty());
    for _ in 0..4 {
        let t = Instant::now();
        let r = root.search(&q).await.unwrap();
        assert_eq!(ids(&r), want);
        assert!(
            t.elapsed() < Duration::from_millis(250),
            "{:?}",
            t.elapsed()
        );
    }
    // Its peer dies too: the shard is down without a search; a search still tries its
    // replicas (a failed check is no proof the leaf cannot answer) and is refused.
    c.replicas[1][1].0.failing.store(true, Ordering::SeqCst);
    until("saw shard 1 down", || root.shards_down() == [1]).await;
    match root.search(&q).await {
        Err(SearchError::Unavailable(m)) => assert!(m.contains("shard 1"), "{m}"),
        other => panic!("{:?}", other.map(|r| r.hits.len())),
    }
    // Replicas whose checks failed but which answer are still used when their shard has no
    // other: the answer is whole, not partial (once the calls that failed above are
    // RETRY_AFTER old: until then the checks and the calls both say they do not answer, and
    // their circuits are open).
    *c.replicas[1][0].0.delay.lock().unwrap() = Duration::ZERO;
    c.replicas[1][1].0.failing.store(false, Ordering::SeqCst);
    tokio::time::sleep(super::replicas::RETRY_AFTER).await;
    for r in root.shards.load()[1].iter() {
        r.checked(Err("slow under load".into()));
    }
    assert_eq!(ids(&root.search(&q).await.unwrap()), want);
    // (The checks running meanwhile may pass first; `pick` below shows it without them.)
    let shards = root.shards.load_full();
    for r in shards[1].iter() {
        r.checked(Err("slow under load".into()));
    }
    let failover = super::replicas::Failover::new(&shards, 0, true);
    let (targets, failures) = failover.pick(&shards);
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(targets.len(), 2);
    // Up again after a check, with no search in between.
    until("saw shard 1 back", || {
        root.shards.load()[1].iter().all(|r| r.up())
    })
    .await;
    assert_eq!(ids(&root.search(&q).await.unwrap()), want);
}

/// The circuit breaker: a shard whose only replica hangs costs one search the leaf timeout;
/// while the replica fails both its check and that call, the other searches answer without
/// the shard at once, one search per `RETRY_AFTER` probes it, and a probe it answers closes
/// the circuit. Health checks are off: the check's failure is recorded by hand, so only the
/// probe can close the circuit.
#[tokio::test]
async fn a_hung_only_replica_opens_its_circuit_and_one_search_probes_it() {
    let c = cluster(1);
    let leaf_timeout = Duration::from_millis(300);
    let root = c
        .root(RootOptions {
            leaf_timeout,
            allow_partial: true,
            ..options()
        })
        .await;
    let q = SearchQuery::new("boundary layer", 10);
    let want = single(&c, &q);
    *c.replicas[1][0].0.delay.lock().unwrap() = Duration::from_secs(30);
    root.shards.load()[1][0].checked(Err("no answer within 300 ms".into()));
    // The first search waits for the hung replica, then answers without its shard.
    let t = Instant::now();
    let r = root.search(&q).await.unwrap();
    assert!(t.elapsed() >= leaf_timeout, "{:?}", t.elapsed());
    assert_eq!(r.partial, Some(true));
    // The circuit is open: the next searches leave the shard out without waiting (one of
    // them may be a probe if the machine is slow enough for RETRY_AFTER to pass).
    let mut waited = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let r = root.search(&q).await.unwrap();
        assert_eq!(r.partial, Some(true));
        if t.elapsed() >= leaf_timeout {
            waited += 1;
        }
    }
    assert!(
        waited <= 1,
        "{waited} of 5 searches waited for the hung replica"
    );
    // The replica answers again: after RETRY_AFTER one search probes it, and the answers
    // are whole again.
    *c.replicas[1][0].0.delay.lock().unwrap() = Duration::ZERO;
    tokio::time::sleep(super::replicas::RETRY_AFTER).await;
    let r = root.search(&q).await.unwrap();
    assert_eq!(r.partial, Some(false));
    assert_eq!(ids(&r), want);
    assert_eq!(ids(&root.search(&q).await.unwrap()), want);
}

/// Adaptive replica selection: a replica answering 40 ms slower than its peer gets almost no
/// searches once measured (rendezvous order alone gives it about half), and the answers stay
/// the single index's.
#[tokio::test]
async fn searches_steer_away_from_a_slow_replica() {
    let c = cluster(2);
    let q = SearchQuery::new("boundary layer", 10);
    let want = single(&c, &q);
    *c.replicas[1][0].0.delay.lock().unwrap() = Duration::from_millis(40);
    let slow_calls =
        |root_calls: usize| c.replicas[1][0].0.calls.load(Ordering::SeqCst) - root_calls;
    for adaptive in [false, true] {
        let root = c
            .root(RootOptions {
                adaptive_replicas: adaptive,
                ..options()
            })
            .await;
        // Both replicas measured once.
        for _ in 0..6 {
            root.search(&q).await.unwrap();
        }
        let before = c.replicas[1][0].0.calls.load(Ordering::SeqCst);
        for _ in 0..20 {
            assert_eq!(ids(&root.search(&q).await.unwrap()), want);
        }
        let slow = slow_calls(before);
        if adaptive {
            assert!(slow <= 8, "the slow replica took {slow} calls");
        } else {
            assert!(
                slow >= 12,
                "rendezvous order gave the slow replica {slow} calls"
            );
        }
    }
}

#[tokio::test]
async fn a_shard_without_a_replica_fails_the_search_or_is_left_out_when_allowed() {
    let c = cluster(1);
    let strict = c.root(options()).await;
    c.replicas[1][0].0.failing.store(true, Ordering::SeqCst);
    let q = SearchQuery::new("boundary layer", 10);
    match strict.search(&q).await {
        Err(SearchError::Unavailable(m)) => {
            assert!(
                m.contains("shard 1: shard 1 replica 0: connection refused"),
                "{m}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(strict.shards_down(), vec![1]);
    let partial = c
        .root(RootOptions {
            allow_partial: true,
            ..options()
        })
        .await;
    let r = partial.search(&q).await.unwrap();
    assert_eq!(r.partial, Some(true));
    let report = r.shards.unwrap();
    assert_eq!((report.total, report.successful, report.failed), (2, 1, 1));
    // Only shard 0's documents, in the single index's order among them (the statistics are
    // shard 0's alone, so the scores are not the collection's).
    assert!(r.hits.iter().all(|h| shard_of(&h.id, SHARDS) == 0));
}

#[tokio::test]
async fn a_slow_replica_costs_one_call_timeout_then_is_skipped() {
    let c = cluster(2);
    let root = c.root(options()).await;
    let q = SearchQuery::new("heat transfer", 10);
    let want = single(&c, &q);
    for (fake, _) in &c.replicas[1] {
        *fake.delay.lock().unwrap() = Duration::ZERO;
    }
    *c.replicas[1][1].0.delay.lock().unwrap() = Duration::from_secs(3);
    for _ in 0..4 {
        let start = Instant::now();
        let r = root.search(&q).await.unwrap();
        assert_eq!(ids(&r), want);
        // At most one leaf timeout (300 ms) and the retry, never the slow replica's 3 s.
        assert!(
            start.elapsed() < Duration::from_millis(1500),
            "{:?}",
            start.elapsed()
        );
    }
    // Marked down: the next searches do not wait for it.
    let start = Instant::now();
    for _ in 0..4 {
        assert_eq!(ids(&root.search(&q).await.unwrap()), want);
    }
    assert!(
        start.elapsed() < Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
}

#[tokio::test]
async fn the_whole_search_has_one_deadline() {
    let c = cluster(1);
    let root = c
        .root(RootOptions {
            timeout: Duration::from_millis(200),
            leaf_timeout: Duration::from_secs(10),
            ..options()
        })
        .await;
    *c.replicas[0][0].0.delay.lock().unwrap() = Duration::from_secs(5);
    let start = Instant::now();
    match root.search(&SearchQuery::new("wing", 5)).await {
        Err(SearchError::Unavailable(m)) => assert!(m.contains("within 200 ms"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(start.elapsed() < Duration::from_millis(1000));
}

/// A commit between the statistics and the first phase: the search stays on the searcher it
/// pinned (the new document is not in its answer, which equals the single index before the
/// commit), and the next search sees the commit.
#[tokio::test]
async fn a_commit_mid_search_keeps_the_pinned_generation() {
    let c = cluster(1);
    let root = c.root(options()).await;
    let q = SearchQuery::new("flutter", 50);
    let want = single(&c, &q);
    let new_doc = Document {
        id: "z-new".into(),
        title: "flutter flutter flutter".into(),
        body: "wing flutter".into(),
        ..Document::default()
    };
    let s = shard_of(&new_doc.id, SHARDS) as usize;
    let engine = c.replicas[s][0].1.clone();
    let doc = new_doc.clone();
    *c.replicas[s][0].0.before_query.lock().unwrap() = Some(Box::new(move |_| {
        engine.index.upsert(vec![doc]).unwrap();
    }));
    let during = root.search(&q).await.unwrap();
    assert_eq!(ids(&during), want);
    let after = root.search(&q).await.unwrap();
    assert_eq!(after.hits[0].id, "z-new");
}

/// More commits between two rounds than a shard keeps searchers for: its pinned generation
/// is gone, the replica is failed for this search, and the search starts again on the
/// shard's other replica, whose answer is exact.
#[tokio::test]
async fn a_generation_gone_mid_search_moves_the_search_to_another_replica() {
    let c = cluster(2);
    let root = c.root(options()).await;
    let q = SearchQuery::new("mach", 20);
    let want = single(&c, &q);
    let (fake, engine) = c.replicas[0][0].clone();
    *fake.before_query.lock().unwrap() = Some(Box::new(move |shard| {
        // Documents that do not match the query (the answer stays the single index's), each
        // commit's searcher pinned as other searches would pin it.
        for i in 0..6 {
            let d = Document {
                id: format!("filler-{i}"),
                body: "unrelated".into(),
                ..Document::default()
            };
            engine.index.upsert(vec![d]).unwrap();
            shard.pins().current(shard.engine());
        }
    }));
    // Searches pick shard 0's replicas in an order that varies with the search: within a few,
    // replica 0 is tried first and its hook runs.
    let mut searches = 0;
    while fake.before_query.lock().unwrap().is_some() {
        searches += 1;
        assert!(searches <= 32, "replica 0 never tried first");
        assert_eq!(ids(&root.search(&q).await.unwrap()), want);
    }
    assert!(!root.shards.load()[0][0].up(), "replica 0 not marked down");
    assert_eq!(ids(&root.search(&q).await.unwrap()), want);
}

/// A statistics call naming a pinned generation reads that searcher, not the current one: a
/// search's later statistics round (RM3's expansion terms) stays on the state its first phase
/// saw, whatever was committed or merged since.
#[tokio::test]
async fn statistics_of_a_pinned_generation_ignore_later_commits() {
    let (_dir, engine) = engine(shard_docs(&docs(), 0));
    let shard = LocalShard::new(engine.clone(), "shard 0");
    let request = crate::text::stats::StatsRequest::for_fields(
        &IndexConfig::default(),
        &crate::text::query::AnalyzedQuery::new("flutter"),
        &["body"],
        false,
    )
    .unwrap();
    let call = |generation| StatsCall {
        protocol: PROTOCOL,
        request: request.clone(),
        generation,
    };
    let before = shard.stats(&call(None)).await.unwrap();
    engine
        .index
        .upsert(vec![Document {
            id: "late".into(),
            body: "flutter flutter".into(),
            ..Document::default()
        }])
        .unwrap();
    let now = shard.stats(&call(None)).await.unwrap();
    assert_ne!(now.generation, before.generation);
    assert_ne!(now.stats, before.stats);
    let pinned = shard.stats(&call(Some(before.generation))).await.unwrap();
    assert_eq!(pinned.generation, before.generation);
    assert_eq!(pinned.stats, before.stats);
}

/// Dense and hybrid search through the root: each shard's nearest documents by its own
/// vectors (the same tiny model's), merged, equal the single index's.
#[tokio::test]
async fn dense_and_hybrid_through_the_root_equal_the_single_index() {
    let c = cluster(1);
    let model = crate::embed::tests::tiny_model();
    let embedder = crate::embed::AnyEmbedder::load(model.path()).unwrap();
    let engines = std::iter::once(&c.single).chain(c.replicas.iter().map(|r| &r[0].1));
    for e in engines {
        crate::dense::build::update(
            &e.index.dir,
            &e.index,
            &embedder,
            crate::dense::DocText::DEFAULT,
            &mut |w| panic!("{w}"),
            &mut |_, _| {},
        )
        .unwrap();
        let dense = crate::dense::load(&e.index, None).unwrap().unwrap();
        e.set_dense(Some(Arc::new(dense)));
    }
    let root = c.root(options()).await;
    for (text, model) in [
        ("shock wave", "dense"),
        ("how do i sort the string", "dense"),
        ("heat transfer", "hybrid"),
        ("boundary layer in order", "hybrid"),
    ] {
        let request: crate::search::request::SearchRequest = serde_json::from_value(
            serde_json::json!({"q": text, "model": model, "k": 20, "collapse": "none"}),
        )
        .unwrap();
        let q = request.into_query(false).unwrap();
        let single = c.single.search(&q).unwrap();
        let sharded = root.search(&q).await.unwrap();
        assert_eq!(sharded.model, model);
        assert_eq!(ids(&sharded), ids(&single), "{model} {text}");
        assert_eq!(sharded.total_hits, single.total_hits, "{model} {text}");
        assert_eq!(single.hits.len(), 20);
    }

    // A reranker reading the dense similarity: a search naming no model is hybrid on the
    // root as on the single index when it was trained on these vectors' embedder, BM25F
    // with the feature at 0 when on another's, and BM25F when a shard has no vectors.
    let here = crate::dense::fingerprint(model.path()).unwrap();
    let reranker = crate::rerank::testutil::linear_model(
        &[crate::features::DENSE_SIMILARITY, "bm25f"],
        &[1.0, 0.2],
        &[0.1, 1.0, 0.0, 10.0],
    );
    let reranked = |text: &str| {
        let request: crate::search::request::SearchRequest =
            serde_json::from_value(serde_json::json!({"q": text, "k": 10, "collapse": "none"}))
                .unwrap();
        request.into_query(true).unwrap()
    };
    let cases = [
        (reranker.clone().with_embedder(here.clone()), "hybrid"),
        (reranker.clone().with_embedder("0".repeat(64)), "bm25f"),
        (reranker, "hybrid"),
    ];
    for (trained, first_phase) in cases {
        let active = || ActiveModel::new(trained.clone(), Default::default()).unwrap();
        c.single.set_model(Some(Arc::new(active())));
        let shards = c
            .replicas
            .iter()
            .map(|r| vec![r[0].0.clone() as Arc<dyn ShardClient>])
            .collect();
        let root = Root::connect(shards, Some(active()), options())
            .await
            .unwrap();
        for text in ["heat transfer", "how do i sort the string", "shock wave"] {
            let q = reranked(text);
            let single = c.single.search(&q).unwrap();
            let sharded = root.search(&q).await.unwrap();
            assert_eq!(single.model, first_phase, "{text}");
            assert_eq!(sharded.model, first_phase, "{text}");
            assert_eq!(ids(&sharded), ids(&single), "{first_phase} {text}");
        }
    }
    // One shard without vectors (its documents' similarity 0, as no single index can
    // be): BM25F; none with vectors: BM25F, equal to the single index without them.
    let q = reranked("heat transfer");
    let trained = c.single.model().unwrap();
    let root = Root::connect(
        c.replicas
            .iter()
            .map(|r| vec![r[0].0.clone() as Arc<dyn ShardClient>])
            .collect(),
        Some(ActiveModel::new(trained.reranker.clone(), Default::default()).unwrap()),
        options(),
    )
    .await
    .unwrap();
    c.replicas[0][0].1.set_dense(None);
    let sharded = root.search(&q).await.unwrap();
    assert_eq!(sharded.model, "bm25f");
    for r in &c.replicas {
        r[0].1.set_dense(None);
    }
    c.single.set_dense(None);
    let sharded = root.search(&q).await.unwrap();
    assert_eq!(sharded.model, "bm25f");
    assert_eq!(ids(&sharded), ids(&c.single.search(&q).unwrap()));
}

/// Each shard's share of a collapsed page's fields (`fetch_first`): the whole page on one
/// shard; on several, enough that a page's hits, spread over hash partitions, exceed it on
/// a shard in few searches (the binomial tail, exact).
#[test]
fn each_shard_sends_the_fields_of_a_little_over_its_share_of_the_page() {
    assert_eq!(super::fetch_first(10, 1), 10);
    assert_eq!(super::fetch_first(10, 2), 9);
    assert_eq!(super::fetch_first(10, 3), 6);
    assert_eq!(super::fetch_first(1, 3), 1);
    assert_eq!(super::fetch_first(20, 0), 20);
    for (page, shards) in [(10usize, 2usize), (10, 3), (20, 3), (10, 5)] {
        let m = super::fetch_first(page, shards);
        let p = 1.0 / shards as f64;
        let choose =
            |n: usize, k: usize| (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64);
        let beyond: f64 = (m + 1..=page)
            .map(|k| choose(page, k) * p.powi(k as i32) * (1.0 - p).powi((page - k) as i32))
            .sum();
        assert!(beyond < 0.035, "page {page}, {shards} shards: {beyond}");
    }
}

/// How deep each shard's lexical list goes (`shard_depth`): the smallest depth that one
/// shard's share of a merged top exceeds with a chance of at most `REFILL_RISK`, by the
/// binomial law summed term by term here; the whole top on one shard.
#[test]
fn each_shard_lists_a_little_over_its_share_of_the_merged_top() {
    use super::{shard_depth, REFILL_RISK};
    let choose = |n: usize, k: usize| (0..k).fold(1.0, |c, i| c * (n - i) as f64 / (i + 1) as f64);
    let beyond = |depth: usize, shards: usize, k: usize| -> f64 {
        let p = 1.0 / shards as f64;
        (k + 1..=depth)
            .map(|j| choose(depth, j) * p.powi(j as i32) * (1.0 - p).powi((depth - j) as i32))
            .sum()
    };
    for depth in [1usize, 2, 5, 10, 20, 50, 100, 200, 500] {
        assert_eq!(shard_depth(depth, 1), depth);
        for shards in [2usize, 3, 5, 8] {
            let k = shard_depth(depth, shards);
            assert!(k <= depth, "{depth} over {shards}: {k}");
            assert!(
                beyond(depth, shards, k) <= REFILL_RISK,
                "{depth} over {shards}: {k}"
            );
            if k > 0 {
                assert!(
                    beyond(depth, shards, k - 1) > REFILL_RISK,
                    "{depth} over {shards}: {k} is not the least"
                );
            }
        }
    }
    // The default collapse window over three shards, and a page of ten.
    assert_eq!(shard_depth(100, 3), 48);
    assert_eq!(shard_depth(10, 3), 8);
    assert_eq!(shard_depth(0, 3), 0);
}

/// The refill: a shard whose whole short list lands in the merged top is asked again for all
/// of it, and only that shard; the page is the single index's, collapsed or not.
#[tokio::test]
async fn a_shard_holding_most_of_the_top_is_asked_again_for_all_of_it() {
    // Only shard 0's documents have the query's rarest term: they fill the top.
    let docs: Vec<Document> = docs()
        .into_iter()
        .map(|mut d| {
            if shard_of(&d.id, SHARDS) == 0 {
                d.body.push_str(" zeta");
            }
            d
        })
        .collect();
    let on_0 = shard_docs(&docs, 0).len();
    assert!(on_0 >= 30, "{on_0} documents on shard 0");
    let c = cluster_of(docs, 1);
    let root = c.root(options()).await;
    let limits = |s: usize| std::mem::take(&mut *c.replicas[s][0].0.query_limits.lock().unwrap());
    let mut q = SearchQuery::new("zeta measurements", 20);
    let want = single(&c, &q);
    assert_eq!(want.len(), 20);
    assert_eq!(ids(&root.search(&q).await.unwrap()), want);
    let short = super::shard_depth(20, 2);
    assert!(short < 20);
    assert_eq!(limits(0), [short, 20], "shard 0 asked again");
    assert_eq!(limits(1), [short], "shard 1 not");
    // Spread evenly (the documents without the extra term), nobody is asked twice.
    let even = cluster(1);
    let even_root = even.root(options()).await;
    let q_even = SearchQuery::new("measurements", 20);
    assert_eq!(
        ids(&even_root.search(&q_even).await.unwrap()),
        single(&even, &q_even)
    );
    let asked = |s: usize| even.replicas[s][0].0.query_limits.lock().unwrap().clone();
    assert_eq!((asked(0), asked(1)), (vec![short], vec![short]));
    // Collapsed: the window is what is listed short, and the page is still the single index's.
    q.collapse = vec![crate::search::collapse::CollapseKey::Page];
    q.k = 10;
    q.collapse_window = 20;
    let window = q.collapse_window;
    assert_eq!(ids(&root.search(&q).await.unwrap()), single(&c, &q));
    let short = super::shard_depth(window, 2);
    assert_eq!(limits(0), [short, window]);
    assert_eq!(limits(1), [short]);
}

/// Which shards `to_refill` asks again, by hand: those whose whole list (as long as was
/// asked) is within the merged top; none when the lists were asked as deep as the top.
#[test]
fn only_a_short_list_wholly_within_the_merged_top_is_refilled() {
    let reply = |hits: &[(&str, f32)]| QueryReply {
        protocol: PROTOCOL,
        current: 0,
        total_hits: hits.len(),
        no_terms: false,
        hits: hits
            .iter()
            .map(|&(id, score)| WireCandidate {
                doc: DocRef { segment: 0, doc: 0 },
                id: id.into(),
                score: score.to_bits(),
                sort_key: None,
                boost: None,
                node: None,
                keys: None,
                shown: None,
            })
            .collect(),
        sortable: false,
        vectors: None,
    };
    let a = reply(&[("a1", 9.0), ("a2", 8.0)]);
    let b = reply(&[("b1", 7.0), ("b2", 1.0)]);
    let c = reply(&[("c1", 2.0)]);
    let replies = [a, b, c];
    // Top 3: a1 a2 b1: a's whole list is in it.
    assert_eq!(super::to_refill(&replies, 2, 3), [0]);
    // Top 4 adds c1: c's list is whole but shorter than asked, so c has no more.
    assert_eq!(super::to_refill(&replies, 2, 4), [0]);
    // Top 5: b's too.
    assert_eq!(super::to_refill(&replies, 2, 5), [0, 1]);
    // Lists as deep as the top are never refilled.
    assert!(super::to_refill(&replies, 3, 3).is_empty());
    // A tie on score is broken by id, as the merge breaks it.
    let tied = [
        reply(&[("x", 5.0), ("z", 4.0)]),
        reply(&[("y", 5.0), ("w", 3.0)]),
    ];
    assert_eq!(super::to_refill(&tied, 2, 3), [0]);
}
