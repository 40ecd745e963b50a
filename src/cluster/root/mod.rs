//! A root: searches a collection whose shards are served by replicas, and answers as the
//! single index would (`docs/design/scale-out.md` §5). The algorithm is written once, here,
//! over a shard transport ([`transport::ShardClient`]): shards open in this process
//! ([`transport::LocalShard`], the leaf's functions called directly), leaves over HTTP
//! ([`http::HttpShard`]), or a test's fake.
//!
//! One search is four rounds, each sent to every shard concerned at once (futures joined on
//! the caller's task; a call to a leaf over HTTP waits on the network, not on a thread):
//!
//! 1. **statistics**: each shard's part of what the query's models and features read; the
//!    root sums them (`crate::text::stats`), and each shard names the searcher it pinned
//!    (or, with [`StatsMode::Table`], the sum of the shards' tables, [`tables`]);
//! 2. **query**: each shard's top with the summed statistics, merged by score and id
//!    (`merge`; with `sort=`, by the sort's key first, computed at the search's clock with the
//!    collection's mean rating) into the top `window`. A lexical list is asked a little over
//!    the shard's share of the window deep (`shard_depth`), and a shard whose whole list lands
//!    in the merged window is asked again for all of it (`to_refill`), so the window is the
//!    single index's;
//! 3. **features** (reranking only): each shard's rows of its documents of the merged
//!    window, with their ranks in it; the root assembles the matrix, scores it with the
//!    active model once and re-sorts as the single index does (score, then first-phase rank);
//! 4. **hits**: what the page shows, from the shards holding its documents. A short
//!    first-phase page (`FETCH_WITH_QUERY`), collapsed or not, comes with the query round
//!    instead: each shard sends the fields of its first page-end candidates (those its own
//!    collapse keeps, when the search collapses), and this round asks only for page hits a
//!    shard did not send.
//!
//! Link scores are those of the whole collection's graph (each shard holds its documents'
//! part); the window features are computed here on the whole window's subgraph, from the
//! out-links each shard sends. A reranker reading RM3 features adds a round before the
//! features: the window's top `fb_docs` documents' term counts come from their shards, the
//! root estimates the relevance model once and gathers its expansion terms' statistics, and
//! the leaves score it.
//!
//! A replica that fails a call is marked down and the search starts again on the shard's
//! next replica ([`replicas`]); the whole search has one deadline.
//!
//! A fusion (`model=fusion`) merges each input model's top `fusion_depth` over the shards
//! (the canonical order, as the single index lists it) and fuses those lists here by id: a
//! fused list's ties keep the order of first appearance in the input lists, so it is the
//! single index's.
//!
//! The single node does not run this algorithm over one in-process shard: that would read
//! every candidate's id and copy its statistics into a table to merge one list, costs its
//! own pipeline (`crate::search::Engine::search`, synchronous, on document addresses) does
//! not have. The two share every step instead: the first phase
//! (`Engine::shard_top`), fusion (`crate::search::fusion`), the feature rows
//! (`Engine::shard_features`), the window's link columns (`crate::features::link`),
//! collapsing (`crate::search::collapse`), explanations (`crate::search::explain_first_phase`,
//! `ActiveModel::explain`) and the page's fields (`Engine::hit_fields`).
//!
//! Files: [`transport`] (the trait, the in-process shard), [`http`] (the HTTP client and
//! transport), [`replicas`] (health and failover), [`tables`] (the statistics-table cache),
//! [`admin`] (documents and writes fanned out to replicas).

pub mod admin;
pub mod graph;
pub mod http;
pub mod replicas;
pub mod tables;
#[cfg(test)]
mod tests;
pub mod transport;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use tantivy::DocAddress;

pub use admin::BatchReport;
use replicas::{Failover, Shards, Target};
use tables::Tables;
use transport::{CallFailure, ShardClient};

use super::wire::*;
use crate::features::prf::{FeedbackDoc, Rm3Query};
use crate::features::{FeatureMatrix, Prf, FEATURE_SET_VERSION};
use crate::search::collapse::CollapseKey;
use crate::search::SearchError;
use crate::search::{
    ActiveModel, BoostExplanation, Explanation, FusionInputRank, FusionReport, Hit, PhaseTimes,
    Ranking, Retriever, Returns, SearchQuery, SearchResponse, ShardHit, ShardsReport, SortMode,
};
use crate::text::columns::CollapseKeys;
use crate::text::config::TEXT_FIELDS;
use crate::text::query::AnalyzedQuery;
use crate::text::search::Candidate;
use crate::text::stats::{GlobalStats, StatsRequest};
use crate::text::stats_table::StatsTable;
use crate::text::{IndexConfig, ModelKind};

/// Where a search's collection statistics come from (`rankd serve --stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatsMode {
    /// A statistics call to every shard per search (Elasticsearch's `dfs_query_then_fetch`).
    Gather,
    /// The shards' whole tables, fetched once per index generation and summed at the root.
    Table,
}

/// How a root behaves.
#[derive(Debug, Clone)]
pub struct RootOptions {
    /// The whole search's deadline.
    pub timeout: Duration,
    /// How long one call to a leaf over HTTP may take.
    pub leaf_timeout: Duration,
    /// Answer without the shards that have no live replica (flagged `partial`), or 503.
    pub allow_partial: bool,
    pub stats_mode: StatsMode,
    /// The cluster key every call to a leaf carries (`None`: `--insecure-cluster`, or shards
    /// in this process).
    pub key: Option<crate::secret::ClusterKey>,
    /// The TLS roots trusted for leaves reached at `https://` URLs (`crate::tls::client_config`;
    /// `None`: the system's).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// How often every replica's health is checked (`replicas::HEALTH_INTERVAL`; each check
    /// waits `leaf_timeout` at most); `None`: no checks, health comes from failed calls only.
    pub health_interval: Option<Duration>,
    /// Adaptive replica selection (`replicas::Failover::new`): searches call a replica
    /// clearly slower than its shard's fastest after the others. Off: rendezvous order only.
    pub adaptive_replicas: bool,
}

impl Default for RootOptions {
    /// What `rankd serve --role root` runs with when no flag says otherwise (the search's
    /// deadline is the configuration's `limits.request_timeout_secs`, 30 s by default).
    fn default() -> Self {
        RootOptions {
            timeout: Duration::from_secs(30),
            leaf_timeout: Duration::from_millis(1000),
            allow_partial: true,
            stats_mode: StatsMode::Gather,
            key: None,
            tls: None,
            health_interval: Some(replicas::HEALTH_INTERVAL),
            adaptive_replicas: true,
        }
    }
}

/// A collection served by shards, each by one or more replicas.
pub struct Root {
    options: RootOptions,
    tables: Tables,
    /// Each shard's replicas: fixed or replaced as the membership changes
    /// ([`Root::set_replicas`]); a search works on the map it loaded at its start. Shared
    /// with the health checks' task, which ends with the root.
    shards: Arc<ArcSwap<Shards>>,
    num_shards: usize,
    config: IndexConfig,
    model: ArcSwapOption<ActiveModel>,
    /// The connections to leaves reached over HTTP (admin writes, `/doc`, new replicas).
    http: http::Http,
    /// Numbers searches, for the replicas' rendezvous order ([`replicas::Failover`]).
    next: AtomicUsize,
    /// The collection's schema (from its configuration) and its `all` field, to read the
    /// shipped statistics by field as the leaves do.
    schema: tantivy::schema::Schema,
    all: tantivy::schema::Field,
}

/// What every try of one search does.
struct Plan {
    kind: ModelKind,
    model: Option<Arc<ActiveModel>>,
    /// The first phase's depth: the rerank window, or the page's end.
    limit: usize,
    /// First-phase hits before the page (without reranking).
    skip: usize,
    /// The statistics the search reads: the first-phase model's field (collection
    /// frequencies for the language model), the body's for snippets, everything for the
    /// reranker's features.
    stats: StatsRequest,
    /// The keys the window is collapsed by: the first phase then asks for them.
    collapse: Vec<CollapseKey>,
    /// A short first-phase page fetched with the first phase (no hits round).
    fetch: Option<Returns>,
    /// With `fetch`: how many of each shard's (kept) candidates carry the fields.
    fetch_first: Option<usize>,
    /// `sort=`: the order of the first phase.
    sort: Option<SortMode>,
    /// The search's clock (Unix seconds), the same for every try and every shard.
    now: i64,
    /// The query, analysed once for every try.
    query: AnalyzedQuery,
    /// The search names no first phase and its reranker reads the dense similarity: hybrid
    /// (`request::default_hybrid`) when every shard has vectors the reranker can read, else
    /// the index's default model, as `Engine::default_first_phase` decides on one index.
    default_hybrid: bool,
}

/// The longest first-phase page (offset + k) whose hits the shards send with their
/// candidates, saving the hits round: each shard then reads the fields of up to this many
/// documents, of which the page keeps k in all.
const FETCH_WITH_QUERY: usize = 20;

/// How many of its first kept candidates each of `shards` shards sends the fields of, for a
/// collapsed page ending at `page_end`: the shards are hash partitions, so a page's hits
/// spread over them about evenly, and one shard holds more than half again its share
/// (`1.5 · page_end / shards`, plus one) in few searches (2 % per shard for a page of 10 on
/// 3 shards, 3 % on 5, by the binomial law); those ask for the rest in a hits round. Every
/// shard sending all `page_end` would cost each of them the fields of hits the page never
/// shows.
fn fetch_first(page_end: usize, shards: usize) -> usize {
    page_end.min((3 * page_end).div_ceil(2 * shards.max(1)) + 1)
}

/// The chance, per shard and search, that a shard's short list ([`shard_depth`]) may miss a
/// document of the merged top and the shard is asked again for its whole top.
const REFILL_RISK: f64 = 1e-3;

/// How deep each of `shards` shards lists a lexical first phase whose merged top is `depth`
/// deep: the smallest `k` with `P(X > k) ≤ REFILL_RISK` for `X ~ Binomial(depth, 1/shards)`,
/// the number of the merged top's documents on one shard when documents are hashed to shards
/// independently of the query. A shard whose whole short list lands in the merged top may hold
/// more of it, and is asked again for all `depth` (the refill, [`Root::first_phase`]), so the
/// top stays exactly the single index's whatever the law says; it only sets how rare the
/// second call is. Short lists save each shard the ids, keys and encoding of candidates the
/// merge drops, and let its top-k pruning start from a higher threshold: for the default
/// collapse window of 100 over 3 shards, 48 per shard instead of 100.
fn shard_depth(depth: usize, shards: usize) -> usize {
    if shards <= 1 || depth == 0 {
        return depth;
    }
    let p = 1.0 / shards as f64;
    let n = depth as f64;
    // P(X = i) for i = 0, 1, ..., accumulated until the upper tail is within the risk.
    let mut pmf = (1.0 - p).powf(n);
    let mut below = pmf;
    for k in 0..depth {
        if 1.0 - below <= REFILL_RISK {
            return k;
        }
        let i = k as f64;
        pmf *= (n - i) / (i + 1.0) * p / (1.0 - p);
        below += pmf;
    }
    depth
}

/// The merged first phase of one try, with what the later rounds need.
struct FirstPhase {
    kind: ModelKind,
    stats: GlobalStats,
    /// The searcher generation each target pinned.
    generations: Vec<u64>,
    /// The targets' statistics tables, when the statistics came from them.
    tables: Option<Vec<Arc<StatsTable>>>,
    total_hits: usize,
    window: Vec<MergedHit>,
    /// A fusion's report, and each input's list (rank and score by id) for the explanations.
    fusion: Option<(FusionReport, FusionInputs)>,
    /// The shards sent the page's fields with their candidates ([`Plan::fetch`]).
    fetched: bool,
    /// [`Plan::default_hybrid`] and every shard had vectors the reranker reads: the first
    /// phase is `model=hybrid`'s.
    hybrid: bool,
}

/// Each input of a fusion and, by id, the rank and score of its listed documents.
type FusionInputs = Vec<(crate::search::Retriever, HashMap<String, (usize, f32)>)>;

/// A document of a merged first phase: the target that holds it, its first-phase hit, and
/// what its shard sent with it for the later rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedHit {
    /// The index, in the search's targets, of the replica that sent it (its shard's number
    /// when every shard answers).
    pub target: usize,
    pub hit: ShardHit,
    /// What the PageRank boost adds to it (with `Ranking::Boost`).
    boost: Option<f32>,
    /// Its node in the collection's link graph, when it is in the graph.
    node: Option<u32>,
    /// Its collapse keys (when the search collapses).
    keys: Option<CollapseKeys>,
    /// What the page shows of it (when the first phase fetched the page).
    shown: Option<WireHit>,
}

impl MergedHit {
    /// Target `target`'s candidate `c`.
    fn of(target: usize, c: WireCandidate) -> Self {
        MergedHit {
            target,
            hit: ShardHit {
                id: c.id,
                candidate: Candidate {
                    address: DocAddress::new(c.doc.segment, c.doc.doc),
                    score: f32::from_bits(c.score),
                    sort_key: c
                        .sort_key
                        .map(|bits| Some(f64::from_bits(bits)).filter(|k| k.is_finite())),
                },
            },
            boost: c.boost.map(f32::from_bits),
            node: c.node,
            keys: c.keys,
            shown: c.shown,
        }
    }
}

/// Merges the shards' lists (each in the canonical order: score descending, then id
/// ascending, `crate::text::search::BoundModel::top`; with a sort, its key first, missing
/// keys last, `crate::search::sort::top_sorted`) into the collection's top `limit`, which is
/// always within the union of the shards' top `limit`.
fn merge(lists: Vec<Vec<MergedHit>>, limit: usize) -> Vec<MergedHit> {
    let mut all: Vec<MergedHit> = lists.into_iter().flatten().collect();
    let key = |h: &MergedHit| {
        let c = &h.hit.candidate;
        (c.sort_key.flatten(), c.score)
    };
    all.sort_by(|a, b| canonical(key(a), &a.hit.id, key(b), &b.hit.id));
    all.truncate(limit);
    all
}

/// The canonical order of two candidates (their sort key, if any, and first-phase score, then
/// their ids): the order `merge` sorts by.
fn canonical(
    (a_key, a_score): (Option<f64>, f32),
    a_id: &str,
    (b_key, b_score): (Option<f64>, f32),
    b_id: &str,
) -> std::cmp::Ordering {
    let key = |k: Option<f64>| k.unwrap_or(f64::NEG_INFINITY);
    key(b_key)
        .total_cmp(&key(a_key))
        .then_with(|| b_score.total_cmp(&a_score))
        .then_with(|| a_id.cmp(b_id))
}

/// The shards of `replies` (one input's, `sent` deep each) to ask again for their top `depth`:
/// those whose whole list is within the merged top `depth`, and which may have more of it.
fn to_refill(replies: &[QueryReply], sent: usize, depth: usize) -> Vec<usize> {
    if sent >= depth {
        return Vec::new();
    }
    let key = |c: &WireCandidate| {
        let sort_key = c.sort_key.map(f64::from_bits).filter(|k| k.is_finite());
        (sort_key, f32::from_bits(c.score))
    };
    let mut all: Vec<(usize, &WireCandidate)> = replies
        .iter()
        .enumerate()
        .flat_map(|(t, r)| r.hits.iter().map(move |c| (t, c)))
        .collect();
    // Which candidates are in the top `depth`, not their order (the merge sorts them later):
    // a selection, linear in the candidates.
    if all.len() > depth {
        all.select_nth_unstable_by(depth - 1, |(_, a), (_, b)| {
            canonical(key(a), &a.id, key(b), &b.id)
        });
        all.truncate(depth);
    }
    let mut in_top = vec![0; replies.len()];
    for &(t, _) in &all {
        in_top[t] += 1;
    }
    (0..replies.len())
        .filter(|&t| replies[t].hits.len() >= sent && in_top[t] == replies[t].hits.len())
        .collect()
}

/// A window row as the second phase orders it.
struct Ranked {
    row: usize,
    score: f32,
    /// With collapsing: how many hits this one hides.
    collapsed: Option<usize>,
    /// With the PageRank boost: what it added.
    boost: Option<BoostExplanation>,
}

/// The reranker's inputs and scores of a window, kept for the explanations.
type Reranked = (Arc<ActiveModel>, FeatureMatrix, Vec<f32>);

/// A failed call: a shard's replica that did not answer properly (the search moves to
/// another replica), or an error of the search itself.
enum CallError {
    Replica { target: usize, reason: String },
    Search(SearchError),
}

impl From<SearchError> for CallError {
    fn from(e: SearchError) -> Self {
        CallError::Search(e)
    }
}

impl From<crate::text::query::QueryError> for CallError {
    fn from(e: crate::text::query::QueryError) -> Self {
        CallError::Search(e.into())
    }
}

/// Target `t`'s `reply`, within `timeout`: a replica that does not answer in time has failed
/// (the search moves on to another replica, whatever the transport).
async fn within<R>(
    t: usize,
    timeout: Duration,
    reply: impl Future<Output = Result<R, CallFailure>>,
) -> Result<R, CallError> {
    match tokio::time::timeout(timeout, reply).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(CallFailure::Replica(reason))) => Err(CallError::Replica { target: t, reason }),
        Ok(Err(CallFailure::Search(e))) => Err(CallError::Search(e)),
        Err(_) => Err(CallError::Replica {
            target: t,
            reason: format!("no answer within {} ms", timeout.as_millis()),
        }),
    }
}

fn internal(message: String) -> SearchError {
    SearchError::Internal(anyhow::anyhow!(message))
}

/// Runs `call(t)` for each of `targets` at once; the replies in `targets` order, or the
/// first failure.
async fn fan_out<R, F: Future<Output = Result<R, CallError>>>(
    targets: &[usize],
    call: impl Fn(usize) -> F,
) -> Result<Vec<R>, CallError> {
    futures_util::future::try_join_all(targets.iter().map(|&t| call(t))).await
}

/// One call to each target owning some of a list of documents: `owner[i]` is the target
/// holding document `i`; `call(t, rows)` makes target `t`'s call for its rows (in list
/// order) and `items` splits a reply into one item per row. The items come back in list
/// order; a reply with another number of items fails its replica.
async fn scatter<R, T: Clone, F: Future<Output = Result<R, CallError>>>(
    owner: &[usize],
    call: impl Fn(usize, &[usize]) -> F,
    items: impl Fn(R) -> Result<Vec<T>, String>,
) -> Result<Vec<T>, CallError> {
    let mut targets: Vec<usize> = owner.to_vec();
    targets.sort_unstable();
    targets.dedup();
    let rows_of =
        |t: usize| -> Vec<usize> { (0..owner.len()).filter(|&i| owner[i] == t).collect() };
    let replies = fan_out(&targets, |t| call(t, &rows_of(t))).await?;
    let mut out: Vec<Option<T>> = vec![None; owner.len()];
    for (&t, reply) in targets.iter().zip(replies) {
        let rows = rows_of(t);
        let got = items(reply).map_err(|reason| CallError::Replica { target: t, reason })?;
        if got.len() != rows.len() {
            return Err(CallError::Replica {
                target: t,
                reason: format!("sent {} items for {} documents", got.len(), rows.len()),
            });
        }
        for (i, item) in rows.into_iter().zip(got) {
            out[i] = Some(item);
        }
    }
    Ok(out
        .into_iter()
        .map(|x| x.expect("every row has an owner"))
        .collect())
}

impl Root {
    /// A root over `shards` (`shards[s]`: shard `s`'s replicas). Asks every replica for its
    /// configuration and checks that they agree with each other and with this binary
    /// (protocol, feature set); a replica that does not answer is taken, and skipped by the
    /// failover while it does not.
    pub async fn connect(
        shards: Vec<Vec<Arc<dyn ShardClient>>>,
        model: Option<ActiveModel>,
        options: RootOptions,
    ) -> anyhow::Result<Self> {
        let http = http::Http::new(
            options.leaf_timeout,
            options.key.clone(),
            options.tls.clone(),
        );
        Self::connect_with(shards, model, options, http).await
    }

    /// [`Root::connect`], with `http` the connections the root's HTTP replicas already use
    /// (one pool for searches, writes and replicas joining later).
    async fn connect_with(
        shards: Vec<Vec<Arc<dyn ShardClient>>>,
        model: Option<ActiveModel>,
        options: RootOptions,
        http: http::Http,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(!shards.is_empty(), "a root needs at least one shard");
        let num_shards = shards.len();
        let replicas: Shards = shards
            .into_iter()
            .map(|clients| replicas::replicas_of(clients, &[]))
            .collect();
        let mut config: Option<IndexConfig> = None;
        for (shard, replicas) in replicas.iter().enumerate() {
            let mut reachable = 0;
            for replica in replicas {
                let name = replica.name();
                // A replica that does not answer may be down for now: it is probed again
                // later. One that answers must belong to this collection.
                let info = match replica.client.info().await {
                    Ok(info) => info,
                    Err(e) => {
                        eprintln!("warning: shard {shard} replica {name} does not answer: {e}");
                        // Its first health check: failed, until one passes (without checks,
                        // skipped for a while and tried again).
                        match options.health_interval {
                            Some(_) => replica.checked(Err(e.to_string())),
                            None => replica.mark_down(),
                        }
                        continue;
                    }
                };
                reachable += 1;
                if let Some(why) = foreign(&info, config.as_ref()) {
                    anyhow::bail!("shard {shard} ({name}) {why}");
                }
                config.get_or_insert(info.config);
            }
            if reachable == 0 {
                eprintln!(
                    "warning: no replica of shard {shard} answers; searches leave it out \
                     (or answer 503 without partial results) until one does"
                );
            }
        }
        let Some(config) = config else {
            anyhow::bail!("no leaf of any shard answers; cannot learn the index configuration");
        };
        let (schema, fields) = crate::text::schema::build_schema(&config);
        let shards = Arc::new(ArcSwap::from_pointee(replicas));
        if let Some(interval) = options.health_interval {
            tokio::spawn(check_health(
                Arc::downgrade(&shards),
                interval,
                options.leaf_timeout,
            ));
        }
        Ok(Root {
            tables: Tables::default(),
            shards,
            num_shards,
            config,
            model: ArcSwapOption::from_pointee(model),
            http,
            next: AtomicUsize::new(0),
            schema,
            all: fields.all,
            options,
        })
    }

    /// A root over leaves reached over HTTP (`shards[s]`: the base URLs of shard `s`'s
    /// replicas).
    pub async fn connect_http(
        shards: Vec<Vec<String>>,
        model: Option<ActiveModel>,
        options: RootOptions,
    ) -> anyhow::Result<Self> {
        let http = http::Http::new(
            options.leaf_timeout,
            options.key.clone(),
            options.tls.clone(),
        );
        let clients = shards
            .into_iter()
            .enumerate()
            .map(|(shard, urls)| http_clients(&http, shard, urls))
            .collect();
        Self::connect_with(clients, model, options, http).await
    }

    /// The active reranker.
    pub fn model(&self) -> Option<Arc<ActiveModel>> {
        self.model.load_full()
    }

    /// Swaps the reranker: searches in flight finish with the one they started with.
    pub fn set_model(&self, model: Option<Arc<ActiveModel>>) {
        self.model.store(model);
    }

    pub fn num_shards(&self) -> usize {
        self.num_shards
    }

    /// The collection's index configuration, as its shards reported it.
    pub fn config(&self) -> &IndexConfig {
        &self.config
    }

    /// Replaces the shards' replicas by the leaves at `shards` (`shards[s]`: shard `s`'s base
    /// URLs), as a membership view changes; a replica kept keeps its health. Searches under
    /// way finish on the map they started with. A map with another number of shards is
    /// refused, and so is a new replica that answers as another collection's leaf.
    pub async fn set_replicas(&self, shards: Vec<Vec<String>>) -> anyhow::Result<()> {
        anyhow::ensure!(
            shards.len() == self.num_shards,
            "a replica map of {} shards for a collection of {}",
            shards.len(),
            self.num_shards
        );
        let old = self.shards.load_full();
        let mut new: Shards = Vec::with_capacity(shards.len());
        for (shard, (urls, before)) in shards.into_iter().zip(old.iter()).enumerate() {
            let mut clients = Vec::new();
            for client in http_clients(&self.http, shard, urls) {
                if !before.iter().any(|r| r.name() == client.name()) {
                    if let Some(why) = self.foreign(client.as_ref()).await {
                        tracing::error!("not using {} for shard {shard}: it {why}", client.name());
                        continue;
                    }
                }
                clients.push(client);
            }
            new.push(replicas::replicas_of(clients, before));
        }
        self.shards.store(Arc::new(new));
        Ok(())
    }

    /// Why a new replica cannot serve this collection, if it answers and cannot; one that
    /// does not answer (yet) is taken, and skipped by the failover while it does not.
    async fn foreign(&self, client: &dyn ShardClient) -> Option<String> {
        match client.info().await {
            Ok(info) => foreign(&info, Some(&self.config)),
            Err(e) => {
                tracing::warn!("new replica {} does not answer yet: {e}", client.name());
                None
            }
        }
    }

    /// Each shard's replicas' names (base URLs over HTTP), as searches see them now.
    pub fn replica_urls(&self) -> Vec<Vec<String>> {
        self.shards
            .load()
            .iter()
            .map(|r| r.iter().map(|x| x.name().to_string()).collect())
            .collect()
    }

    /// The shards none of whose replicas the root believes up (a failed replica counts as
    /// down for [`replicas::RETRY_AFTER`] after its failure).
    pub fn shards_down(&self) -> Vec<usize> {
        replicas::down(&self.shards.load())
    }

    /// Whether answers may leave out shards without a live replica.
    pub fn allows_partial(&self) -> bool {
        self.options.allow_partial
    }

    /// Runs one search over every shard, within the root's deadline. A replica that fails a
    /// call is skipped and the search starts again on the shard's next replica (reads are
    /// idempotent); a shard left without a replica is dropped from the answer, flagged
    /// `partial`, or the search fails with 503 when partial answers are not allowed.
    pub async fn search(&self, q: &SearchQuery) -> Result<SearchResponse, SearchError> {
        let plan = self.plan(q)?;
        let timeout = self.options.timeout;
        match tokio::time::timeout(timeout, self.search_planned(q, &plan)).await {
            Ok(answer) => answer,
            Err(_) => Err(SearchError::Unavailable(format!(
                "the shards did not answer within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    async fn search_planned(
        &self,
        q: &SearchQuery,
        plan: &Plan,
    ) -> Result<SearchResponse, SearchError> {
        let turn = self.next.fetch_add(1, Ordering::Relaxed) as u64;
        let shards = self.shards.load_full();
        let mut failover = Failover::new(&shards, turn, self.options.adaptive_replicas);
        loop {
            let (targets, failures) = failover.pick(&shards);
            if !failures.is_empty() && (!self.options.allow_partial || targets.is_empty()) {
                let list: Vec<String> = failures
                    .iter()
                    .map(|f| format!("shard {}: {}", f.shard, f.reason))
                    .collect();
                return Err(SearchError::Unavailable(format!(
                    "no replica of {} answered ({})",
                    if failures.len() == 1 {
                        "a shard"
                    } else {
                        "several shards"
                    },
                    list.join("; ")
                )));
            }
            match self.attempt(q, plan, &targets).await {
                Ok(mut response) => {
                    for (_, replica) in &targets {
                        replica.mark_up();
                    }
                    if !failures.is_empty() {
                        crate::metrics::count_partial_response();
                    }
                    response.partial = Some(!failures.is_empty());
                    response.shards = Some(ShardsReport {
                        total: shards.len(),
                        successful: targets.len(),
                        failed: failures.len(),
                        failures,
                    });
                    return Ok(response);
                }
                Err(CallError::Search(e)) => return Err(e),
                Err(CallError::Replica { target, reason }) => {
                    // A refused generation included: the table goes with it.
                    self.tables.forget(targets[target].1.name());
                    failover.failed(&shards, &targets[target], reason);
                }
            }
        }
    }

    /// The merged top `window` of `text` by `kind` and its feature rows, in window order, as
    /// a reranker reads them (`crate::search::Engine::window` on one index): for feature
    /// logging and for checking the sharded rows against the single index's. One try, on
    /// each shard's first replica believed up.
    pub async fn feature_window(
        &self,
        text: &str,
        kind: ModelKind,
        window: usize,
        prf: Prf,
    ) -> Result<(Vec<MergedHit>, FeatureMatrix), SearchError> {
        let q = SearchQuery::new(text, window).model(kind);
        let query = AnalyzedQuery::new(text);
        let plan = Plan {
            kind,
            model: None,
            limit: window,
            skip: 0,
            stats: StatsRequest::for_query(&self.config, &query)?,
            collapse: Vec::new(),
            fetch: None,
            fetch_first: None,
            sort: None,
            now: crate::features::social::unix_now(),
            query,
            default_hybrid: false,
        };
        let shards = self.shards.load_full();
        let (targets, failures) = Failover::new(&shards, 0, false).pick(&shards);
        if let Some(f) = failures.first() {
            return Err(SearchError::Unavailable(format!(
                "shard {}: {}",
                f.shard, f.reason
            )));
        }
        let answer = async {
            let first = self.first_phase(&q, &plan, &targets).await?;
            let features = self
                .window_features(&q, &plan, (prf, true, None), &first, &targets)
                .await?;
            Ok((first.window, features))
        };
        answer.await.map_err(|e| match e {
            CallError::Search(e) => e,
            CallError::Replica { target, reason } => {
                SearchError::Unavailable(format!("shard {}: {reason}", targets[target].0))
            }
        })
    }

    /// Checks `q` and decides what every try of it does.
    fn plan(&self, q: &SearchQuery) -> Result<Plan, SearchError> {
        q.validate()?;
        let kind = match q.model {
            Some(m) => m,
            None => self.config.default_model,
        };
        if let Some(f) = &q.field {
            if !TEXT_FIELDS.contains(&f.as_str()) {
                return Err(SearchError::Param {
                    field: "field",
                    message: format!("unknown field `{f}` (known: {})", TEXT_FIELDS.join(", ")),
                });
            }
        }
        let model = match q.ranking {
            Ranking::Rerank { .. } => {
                let m = self.model.load_full().ok_or(SearchError::Param {
                    field: "rerank",
                    message: "no reranker is active; pass rerank=false or activate a model".into(),
                })?;
                Some(m)
            }
            _ => None,
        };
        let (limit, skip) = match q.ranking {
            Ranking::Rerank { window } | Ranking::Boost { window, .. } => (window, 0),
            _ if !q.collapse.is_empty() => (q.collapse_window, 0),
            _ => (q.offset + q.k, q.offset),
        };
        let query = AnalyzedQuery::new(q.text.as_str());
        let stats = if model.is_some() {
            StatsRequest::for_query(&self.config, &query)?
        } else {
            // The fields the first phase's models read (a fusion's inputs, or the one model).
            let kinds = match &q.fusion {
                Some(f) => f.inputs.iter().filter_map(|r| r.text()).collect(),
                None => vec![kind],
            };
            let mut fields: Vec<&str> = Vec::new();
            for k in &kinds {
                let field = match k {
                    ModelKind::Bm25F => "all",
                    _ => q
                        .field
                        .as_deref()
                        .unwrap_or(self.config.default_field.name()),
                };
                if !fields.contains(&field) {
                    fields.push(field);
                }
            }
            if q.returns.snippet && !fields.contains(&"body") {
                fields.push("body");
            }
            let lm = kinds.contains(&ModelKind::Lm);
            let mut request = StatsRequest::for_fields(&self.config, &query, &fields, lm)?;
            request.rating = matches!(q.ranking, Ranking::Sort(_));
            request
        };
        let sort = match q.ranking {
            Ranking::Sort(mode) => Some(mode),
            _ => None,
        };
        let r = q.returns;
        // A collapsed page is fetched with the first phase too: each shard sends the fields of
        // its first page-end hits that its own collapse keeps ([`QueryCall::fetch_first`]).
        let page_end = match q.collapse.is_empty() {
            true => limit,
            false => q.offset + q.k,
        };
        let fetch = (q.ranking == Ranking::FirstPhase
            && q.fusion.is_none()
            && !q.explain
            && page_end <= FETCH_WITH_QUERY
            && (r.url || r.title || r.snippet))
            .then_some(r);
        let fetch_first = (!q.collapse.is_empty()).then(|| fetch_first(page_end, self.num_shards));
        let default_hybrid = q.model.is_none()
            && q.fusion.is_none()
            && !q.dense
            && model.as_deref().is_some_and(ActiveModel::reads_dense);
        Ok(Plan {
            kind,
            default_hybrid,
            collapse: q.collapse.clone(),
            fetch,
            fetch_first,
            sort,
            now: q.now.unwrap_or_else(crate::features::social::unix_now),
            query,
            model,
            limit,
            skip,
            stats,
        })
    }

    /// One statistics call to every target: from the searchers `pinned` names (a search's
    /// later round), or from the current ones, which the targets pin.
    async fn stats_round(
        &self,
        targets: &[Target],
        request: &StatsRequest,
        pinned: Option<&[u64]>,
    ) -> Result<Vec<StatsReply>, CallError> {
        let all: Vec<usize> = (0..targets.len()).collect();
        let timeout = self.options.leaf_timeout;
        fan_out(&all, |t| {
            let call = StatsCall {
                protocol: PROTOCOL,
                request: request.clone(),
                generation: pinned.map(|g| g[t]),
            };
            async move { within(t, timeout, targets[t].1.client.stats(&call)).await }
        })
        .await
    }

    /// The collection statistics `request` asks for, the generation each target pinned, and
    /// the targets' tables when they answered it: summed from the tables when the root has
    /// them all ([`StatsMode::Table`]), else from a statistics round.
    #[allow(clippy::type_complexity)]
    async fn statistics(
        &self,
        targets: &[Target],
        request: &StatsRequest,
    ) -> Result<(GlobalStats, Vec<u64>, Option<Vec<Arc<StatsTable>>>), CallError> {
        let mut stats = GlobalStats::default();
        if self.options.stats_mode == StatsMode::Table {
            if let Some(tables) = self.tables.all(targets) {
                for (_, t) in &tables {
                    stats.add(&t.lookup(request));
                }
                let generations = tables.iter().map(|(g, _)| *g).collect();
                let tables = tables.into_iter().map(|(_, t)| t).collect();
                return Ok((stats, generations, Some(tables)));
            }
        }
        let replies = self.stats_round(targets, request, None).await?;
        for r in &replies {
            stats.add(&r.stats);
        }
        Ok((stats, replies.iter().map(|r| r.generation).collect(), None))
    }

    /// Rounds 1 and 2: the statistics, summed, and the merged first phase: one model's, or a
    /// fusion's (each input's lists merged over the shards, then fused here).
    async fn first_phase(
        &self,
        q: &SearchQuery,
        plan: &Plan,
        targets: &[Target],
    ) -> Result<FirstPhase, CallError> {
        let (stats, generations, tables) = self.statistics(targets, &plan.stats).await?;
        let default_hybrid = plan
            .default_hybrid
            .then(crate::search::request::default_hybrid);
        let mut fusion = q.fusion.as_ref().or(default_hybrid.as_ref());
        let (kinds, mut depth) = match fusion {
            Some(f) => (f.inputs.clone(), f.depth),
            // Each shard's nearest documents by the same embedder's vectors: their dot
            // products compare across shards, so the merge is the single index's scan.
            None if q.dense => (vec![Retriever::Dense], plan.limit),
            None => (vec![Retriever::Text(plan.kind)], plan.limit),
        };
        let boost = match q.ranking {
            Ranking::Boost { weight, .. } => Some(weight),
            _ => None,
        };
        let all: Vec<usize> = (0..targets.len()).collect();
        let (stats_ref, generations_ref, all_ref) = (&stats, &generations, &all);
        let optional = default_hybrid.is_some();
        let timeout = self.options.leaf_timeout;
        // How deep each input's merged list goes, and each shard's list of it: a lexical
        // list is short ([`shard_depth`]); the dense one is a nearest-neighbour search,
        // whose top-k is not a prefix of a deeper one's, so it goes the whole depth.
        let wanted: Vec<(usize, usize)> = kinds
            .iter()
            .map(|&kind| {
                // The lexical list is the first phase itself if the default hybrid falls back
                // to it: as deep as the window.
                let want = match (optional, kind) {
                    (true, Retriever::Text(_)) => depth.max(plan.limit),
                    _ => depth,
                };
                match kind {
                    Retriever::Text(_) => (want, shard_depth(want, targets.len())),
                    Retriever::Dense => (want, want),
                }
            })
            .collect();
        let call = |t: usize, kind: Retriever, limit: usize| {
            let call = QueryCall {
                protocol: PROTOCOL,
                generation: generations_ref[t],
                text: q.text.clone(),
                model: kind.to_string(),
                field: q.field.clone(),
                limit,
                stats: stats_ref.clone(),
                boost,
                collapse: plan.collapse.clone(),
                fetch: plan.fetch,
                fetch_first: plan.fetch_first,
                sort: plan.sort.map(|m| m.name().to_string()),
                now: Some(plan.now),
                lang: q.lang.clone(),
                dense_optional: optional,
            };
            async move {
                let started = std::time::Instant::now();
                let reply = within(t, timeout, targets[t].1.client.query(&call)).await;
                if reply.is_ok() {
                    targets[t].1.observe_latency(started.elapsed());
                }
                reply
            }
        };
        // Every input's call to every shard at once.
        let mut per_input: Vec<Vec<QueryReply>> = futures_util::future::try_join_all(
            kinds
                .iter()
                .zip(&wanted)
                .map(|(&kind, &(_, sent))| fan_out(all_ref, move |t| call(t, kind, sent))),
        )
        .await?;
        // The shards whose short list may miss some of the merged top, asked for all of it.
        let refills: Vec<(usize, usize)> = per_input
            .iter()
            .zip(&wanted)
            .enumerate()
            .flat_map(|(i, (replies, &(want, sent)))| {
                to_refill(replies, sent, want)
                    .into_iter()
                    .map(move |t| (i, t))
            })
            .collect();
        let refilled = futures_util::future::try_join_all(
            refills.iter().map(|&(i, t)| call(t, kinds[i], wanted[i].0)),
        )
        .await?;
        for (&(i, t), reply) in refills.iter().zip(refilled) {
            per_input[i][t] = reply;
        }
        if default_hybrid.is_some() {
            // Hybrid only when every shard's vectors can give the reranker its similarity
            // (`Engine::dense_serves` on one index); else the lexical list alone.
            let model = plan.model.as_deref().expect("the default hybrid reranks");
            let dense = kinds.iter().position(|&k| k == Retriever::Dense);
            let serves = dense.is_some_and(|d| {
                per_input[d].iter().all(|r| {
                    r.vectors
                        .as_deref()
                        .is_some_and(|v| model.reads_dense_of(v))
                })
            });
            if let (Some(d), false) = (dense, serves) {
                per_input.remove(d);
                (fusion, depth) = (None, plan.limit);
            }
        }
        if tables.is_some() {
            // A shard whose searcher moved on: its table is fetched again next time (this
            // search goes on with the generation it pinned).
            for (t, r) in per_input[0].iter().enumerate() {
                if r.current != generations[t] {
                    self.tables.forget(targets[t].1.name());
                }
            }
        }
        let mut first = FirstPhase {
            kind: plan.kind,
            stats,
            generations,
            tables,
            total_hits: 0,
            window: Vec::new(),
            fusion: None,
            fetched: plan.fetch.is_some(),
            hybrid: default_hybrid.is_some() && fusion.is_some(),
        };
        // Each input's merged list, and the hits' shards and addresses by id.
        if let Some(mode) = plan.sort {
            // As the single index: a sort no document can have is refused.
            if !per_input.iter().flatten().any(|r| r.sortable || r.no_terms) {
                return Err(CallError::Search(SearchError::Param {
                    field: "sort",
                    message: format!(
                        "sort={mode} orders by {}, which no document of this index has",
                        mode.needs()
                    ),
                }));
            }
        }
        let mut merged: Vec<Vec<MergedHit>> = Vec::with_capacity(kinds.len());
        let mut total_hits = None;
        for replies in per_input {
            if total_hits.is_none() && replies.iter().any(|r| !r.no_terms) {
                // As the single index: a fusion counts its first input with searchable terms.
                total_hits = Some(replies.iter().map(|r| r.total_hits).sum());
            }
            let lists = replies
                .into_iter()
                .enumerate()
                .map(|(t, r)| r.hits.into_iter().map(|c| MergedHit::of(t, c)).collect())
                .collect();
            merged.push(merge(lists, depth));
        }
        first.total_hits = total_hits.unwrap_or(0);
        let Some(f) = fusion else {
            first.window = merged.pop().expect("one input");
            return Ok(first);
        };
        if total_hits.is_none() {
            return Ok(first);
        }
        let lists: Vec<Vec<(String, f64)>> = merged
            .iter()
            .map(|m| {
                m.iter()
                    .map(|h| (h.hit.id.clone(), f64::from(h.hit.candidate.score)))
                    .collect()
            })
            .collect();
        let (fused, report) = f.fuse(&lists)?;
        let mut located: HashMap<&str, &MergedHit> = HashMap::new();
        for h in merged.iter().flatten() {
            located.entry(h.hit.id.as_str()).or_insert(h);
        }
        let window = fused
            .iter()
            .take(plan.limit)
            .map(|(id, score)| {
                let mut h = located[id.as_str()].clone();
                h.hit.candidate.score = *score as f32;
                h
            })
            .collect();
        let inputs = f
            .inputs
            .iter()
            .zip(&merged)
            .map(|(&kind, list)| {
                let listed = list
                    .iter()
                    .enumerate()
                    .map(|(r, h)| (h.hit.id.clone(), (r + 1, h.hit.candidate.score)))
                    .collect();
                (kind, listed)
            })
            .collect();
        first.window = window;
        first.fusion = Some((report, inputs));
        Ok(first)
    }

    /// One try of a search on one replica of each shard in `targets`.
    async fn attempt(
        &self,
        q: &SearchQuery,
        plan: &Plan,
        targets: &[Target],
    ) -> Result<SearchResponse, CallError> {
        let (kind, model, skip) = (plan.kind, &plan.model, plan.skip);
        let start = Instant::now();
        let mut times = PhaseTimes::default();

        let first = self.first_phase(q, plan, targets).await?;
        // The default first phase became hybrid: the rest of the search is `model=hybrid`'s.
        let hybrid;
        let q = match first.hybrid {
            true => {
                hybrid = SearchQuery {
                    fusion: Some(crate::search::request::default_hybrid()),
                    ..q.clone()
                };
                &hybrid
            }
            false => q,
        };
        times.retrieve = start.elapsed().as_secs_f64();
        let window = &first.window;

        // 3. Second phase: the window's rows, rescored (reranker or boost) and re-sorted with
        // ties in first-phase order, then collapsed, then cut to the page, as the single
        // index does.
        let mut ranked: Vec<Ranked> = window
            .iter()
            .enumerate()
            .map(|(row, h)| Ranked {
                row,
                score: h.hit.candidate.score,
                collapsed: None,
                boost: None,
            })
            .collect();
        let windowed = matches!(q.ranking, Ranking::Rerank { .. } | Ranking::Boost { .. });
        let mut reranked: Option<Reranked> = None;
        if let Some(active) = model {
            let t = Instant::now();
            let features = self
                .window_features(
                    q,
                    plan,
                    (active.prf(), active.reads_dense(), active.embedder()),
                    &first,
                    targets,
                )
                .await?;
            times.features = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let scores = active
                .score(&features)
                .map_err(|e| internal(format!("reranker {}: {e}", active.id())))?;
            for (r, &s) in ranked.iter_mut().zip(&scores) {
                r.score = s;
            }
            times.rerank = t.elapsed().as_secs_f64();
            if q.explain {
                reranked = Some((active.clone(), features, scores));
            }
        } else if let Ranking::Boost { weight, .. } = q.ranking {
            // SPEC §1.8: the boost added to the window's first-phase scores.
            for r in ranked.iter_mut() {
                let h = &window[r.row];
                let added = h
                    .boost
                    .ok_or_else(|| internal(format!("no boost for {}", h.hit.id)))?;
                r.score += added;
                r.boost = Some(BoostExplanation { weight, added });
            }
        }
        if windowed {
            let t = Instant::now();
            ranked.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.row.cmp(&b.row)));
            times.rerank += t.elapsed().as_secs_f64();
        }
        if !q.collapse.is_empty() {
            let t = Instant::now();
            let keys = ranked
                .iter()
                .map(|r| {
                    let h = &window[r.row];
                    h.keys.ok_or_else(|| CallError::Replica {
                        target: h.target,
                        reason: format!("sent no collapse keys for {}", h.hit.id),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let mut slots: Vec<Option<Ranked>> = ranked.into_iter().map(Some).collect();
            let prefer = q.preferred_langs(&self.config);
            ranked = crate::search::collapse::collapse(&keys, &q.collapse, &prefer)
                .into_iter()
                .map(|(i, hidden)| {
                    let mut r = slots[i].take().expect("each hit is kept at most once");
                    r.collapsed = Some(hidden);
                    r
                })
                .collect();
            times.collapse = t.elapsed().as_secs_f64();
        }
        if windowed || !q.collapse.is_empty() {
            ranked.truncate(q.offset + q.k);
            ranked.drain(..q.offset.min(ranked.len()));
        } else {
            ranked.drain(..skip.min(ranked.len()));
        }

        // 4. What the page shows.
        let t = Instant::now();
        let hits = self
            .page(q, &first, targets, &ranked, reranked.as_ref())
            .await?;
        times.hits = t.elapsed().as_secs_f64();
        Ok(SearchResponse {
            query_id: None,
            query: q.text.clone(),
            model: q.first_phase_name(kind),
            reranker: model.as_ref().map(|m| m.id().to_string()),
            total_hits: first.total_hits,
            took_ms: start.elapsed().as_secs_f64() * 1e3,
            hits,
            fusion: first.fusion.map(|(report, _)| report),
            partial: None,
            shards: None,
            times,
            teams: None,
            swapped: None,
        })
    }

    /// RM3's relevance model of the merged window: the feedback documents' term counts from
    /// their shards, the model estimated here once, its expansion terms' statistics gathered
    /// from every shard (or the tables) and added to the first phase's statistics.
    async fn relevance_model(
        &self,
        query: &AnalyzedQuery,
        first: &FirstPhase,
        targets: &[Target],
    ) -> Result<(Option<Rm3Query>, GlobalStats), CallError> {
        let window = &first.window;
        let fb = self.config.models.rm3.fb_docs.min(window.len());
        let owner: Vec<usize> = window[..fb].iter().map(|h| h.target).collect();
        let generations = &first.generations;
        let timeout = self.options.leaf_timeout;
        let feedback: Vec<FeedbackDoc> = scatter(
            &owner,
            |t, rows| {
                let call = FeedbackCall {
                    protocol: PROTOCOL,
                    generation: generations[t],
                    docs: rows.iter().map(|&i| doc_ref(&window[i])).collect(),
                };
                async move { within(t, timeout, targets[t].1.client.feedback(&call)).await }
            },
            |reply: FeedbackReply| Ok(reply.docs),
        )
        .await?;
        let source = first.stats.source(&self.schema);
        let rm = crate::features::prf::estimate(
            &self.config,
            self.all,
            &crate::text::stats::Stats::new(&source),
            query,
            &feedback,
        )
        .map_err(SearchError::from)?;
        let Some(rm) = rm else {
            return Ok((None, first.stats.clone()));
        };
        let mut stats = first.stats.clone();
        let mut extra = GlobalStats::default();
        if let Some(tables) = &first.tables {
            for t in tables {
                extra.add(&t.lookup(&rm.stats_request()));
            }
        } else {
            // From the searchers the search pinned: a commit or a merge since would
            // otherwise mix two states of a shard.
            let request = rm.stats_request();
            let replies = self
                .stats_round(targets, &request, Some(generations))
                .await?;
            for (s, r) in replies.iter().enumerate() {
                if r.generation != generations[s] {
                    return Err(CallError::Replica {
                        target: s,
                        reason: format!(
                            "answered from generation {} for pinned generation {}",
                            r.generation, generations[s]
                        ),
                    });
                }
                extra.add(&r.stats);
            }
        }
        stats.extend(extra);
        Ok((Some(rm), stats))
    }

    /// The merged window's feature rows, in window order: each shard sends its documents'
    /// rows and their out-links within the window, and the window features are computed
    /// here, where the window is whole. `(prf, dense, embedder)`: whether the leaves compute
    /// the RM3 features and the dense similarity (each embedding the query), the latter only
    /// from vectors of `embedder` when it names one (the reranker's, `ActiveModel::embedder`).
    async fn window_features(
        &self,
        q: &SearchQuery,
        plan: &Plan,
        (prf, dense, embedder): (Prf, bool, Option<&str>),
        first: &FirstPhase,
        targets: &[Target],
    ) -> Result<FeatureMatrix, CallError> {
        let (kind, now) = (plan.kind, plan.now);
        let window = &first.window;
        let rows_nodes: Vec<(usize, u32)> = window
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.node.map(|u| (i, u)))
            .collect();
        let window_nodes = crate::features::link::window_nodes(rows_nodes.iter().map(|&(_, u)| u));
        let prf = prf == Prf::Compute;
        let (rm3, stats) = match prf {
            true => self.relevance_model(&plan.query, first, targets).await?,
            false => (None, first.stats.clone()),
        };
        let set = crate::features::FeatureSet::current();
        let cols = set.len();
        let owner: Vec<usize> = window.iter().map(|h| h.target).collect();
        let (stats, rm3, window_nodes) = (&stats, &rm3, &window_nodes);
        let timeout = self.options.leaf_timeout;
        let parts: Vec<(Vec<u32>, Vec<u32>)> = scatter(
            &owner,
            |t, rows| {
                let call = FeaturesCall {
                    protocol: PROTOCOL,
                    generation: first.generations[t],
                    text: q.text.clone(),
                    stats: stats.clone(),
                    now,
                    scores_are_bm25f: q.scores_are_bm25f(kind),
                    docs: rows
                        .iter()
                        .map(|&i| {
                            (
                                doc_ref(&window[i]),
                                window[i].hit.candidate.score.to_bits(),
                                i + 1,
                            )
                        })
                        .collect(),
                    window_nodes: window_nodes.clone(),
                    prf,
                    rm3: rm3.clone(),
                    dense,
                    embedder: embedder.map(str::to_string),
                };
                async move { within(t, timeout, targets[t].1.client.features(&call)).await }
            },
            |reply: FeaturesReply| {
                if reply.feature_set != FEATURE_SET_VERSION
                    || reply.cols != cols
                    || !reply.values.len().is_multiple_of(cols)
                {
                    return Err(format!(
                        "sent {} values of {} columns of feature set {}",
                        reply.values.len(),
                        reply.cols,
                        reply.feature_set
                    ));
                }
                if reply.out_links.len() * cols != reply.values.len() {
                    return Err(format!(
                        "sent out-links of {} documents for {} rows",
                        reply.out_links.len(),
                        reply.values.len() / cols
                    ));
                }
                Ok(reply
                    .values
                    .chunks(cols)
                    .map(<[u32]>::to_vec)
                    .zip(reply.out_links)
                    .collect())
            },
        )
        .await?;
        let mut values = Vec::with_capacity(window.len() * cols);
        let mut out_of = Vec::with_capacity(window.len());
        for (row, out) in parts {
            values.extend(row.into_iter().map(f32::from_bits));
            out_of.push(out);
        }
        let linked: Vec<(usize, u32, &[u32])> = rows_nodes
            .iter()
            .map(|&(i, u)| (i, u, out_of[i].as_slice()))
            .collect();
        let mut m = FeatureMatrix {
            rows: window.len(),
            cols,
            values,
        };
        crate::features::link::window_columns(set, &linked, &mut m);
        Ok(m)
    }

    /// The page's hits: `ranked` holds (window row, score), best first.
    async fn page(
        &self,
        q: &SearchQuery,
        first: &FirstPhase,
        targets: &[Target],
        ranked: &[Ranked],
        reranked: Option<&Reranked>,
    ) -> Result<Vec<Hit>, CallError> {
        let window = &first.window;
        let returns = q.returns;
        let hit = |i: usize, ranked: &Ranked, shown: Option<WireHit>| {
            let h = &window[ranked.row];
            let a = h.hit.candidate.address;
            let mut shown = shown.unwrap_or(WireHit {
                id: h.hit.id.clone(),
                url: None,
                title: None,
                snippet: None,
                explain: None,
            });
            let explain = q.explain.then(|| {
                let part = shown.explain.take();
                Explanation {
                    first_phase: part
                        .as_ref()
                        .and_then(|p| p.first_phase.clone())
                        .map(ExplanationTree::into_tantivy),
                    fusion_inputs: first.fusion.as_ref().map(|(_, inputs)| {
                        inputs
                            .iter()
                            .map(|(model, listed)| {
                                let found = listed.get(&h.hit.id);
                                FusionInputRank {
                                    model: model.to_string(),
                                    rank: found.map(|&(rank, _)| rank),
                                    score: found.map(|&(_, score)| score),
                                }
                            })
                            .collect()
                    }),
                    first_phase_rank: ranked.row + 1,
                    first_phase_score: h.hit.candidate.score,
                    rerank: reranked.map(|(active, features, scores)| {
                        active.explain(features, ranked.row, scores[ranked.row])
                    }),
                    boost: ranked.boost,
                    links: part.and_then(|p| p.links),
                }
            });
            Hit {
                rank: q.offset + i + 1,
                id: h.hit.id.clone(),
                url: returns.url.then_some(shown.url),
                title: returns.title.then_some(shown.title.unwrap_or_default()),
                snippet: returns.snippet.then_some(shown.snippet.unwrap_or_default()),
                score: ranked.score,
                sort_key: h.hit.candidate.sort_key,
                collapsed: ranked.collapsed,
                explain,
                address: DocAddress::new(h.target as u32, a.doc_id),
            }
        };
        if !(returns.url || returns.title || returns.snippet || q.explain) {
            return Ok(ranked
                .iter()
                .enumerate()
                .map(|(i, x)| hit(i, x, None))
                .collect());
        }
        // The fields the first phase brought; the rest from the shards that hold them (all of
        // them when the first phase brought none).
        let mut shown: Vec<Option<WireHit>> = ranked
            .iter()
            .map(|x| match first.fetched {
                true => window[x.row].shown.clone(),
                false => None,
            })
            .collect();
        let missing: Vec<usize> = (0..ranked.len()).filter(|&i| shown[i].is_none()).collect();
        if !missing.is_empty() {
            let fetched = self
                .hits_round(
                    q,
                    first,
                    targets,
                    &missing.iter().map(|&i| &ranked[i]).collect::<Vec<_>>(),
                )
                .await?;
            for (i, s) in missing.into_iter().zip(fetched) {
                shown[i] = Some(s);
            }
        }
        Ok(ranked
            .iter()
            .zip(shown)
            .enumerate()
            .map(|(i, (x, s))| hit(i, x, s))
            .collect())
    }

    /// The hits round: what the page shows of the `rows` of the merged window, from the
    /// shards that hold them, in the order of `rows`.
    async fn hits_round(
        &self,
        q: &SearchQuery,
        first: &FirstPhase,
        targets: &[Target],
        ranked: &[&Ranked],
    ) -> Result<Vec<WireHit>, CallError> {
        let window = &first.window;
        let returns = q.returns;
        let owner: Vec<usize> = ranked.iter().map(|r| window[r.row].target).collect();
        let timeout = self.options.leaf_timeout;
        scatter(
            &owner,
            |t, rows| {
                let call = HitsCall {
                    protocol: PROTOCOL,
                    generation: first.generations[t],
                    text: q.text.clone(),
                    stats: first.stats.clone(),
                    url: returns.url,
                    title: returns.title,
                    snippet: returns.snippet,
                    docs: rows
                        .iter()
                        .map(|&i| doc_ref(&window[ranked[i].row]))
                        .collect(),
                    explain: q.explain.then(|| ExplainCall {
                        model: match q.fusion {
                            Some(_) => None,
                            None if q.dense => None,
                            None => Some(first.kind.name().to_string()),
                        },
                        field: q.field.clone(),
                    }),
                };
                async move { within(t, timeout, targets[t].1.client.hits(&call)).await }
            },
            |reply: HitsReply| Ok(reply.hits),
        )
        .await
    }
}

/// Why a leaf that answered `info` cannot serve the collection whose configuration is
/// `config` (or, without one yet, any collection of this binary's): it must speak this
/// root's protocol and feature set and hold the collection's index configuration.
/// Checks every replica of `shards` every `interval` (`replicas::Replica::checked`): its
/// `info` call within `timeout`, all at once. Ends when the root is gone.
async fn check_health(
    shards: std::sync::Weak<ArcSwap<Shards>>,
    interval: Duration,
    timeout: Duration,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(current) = shards.upgrade().map(|s| s.load_full()) else {
            return;
        };
        let checks = current.iter().flatten().map(|replica| async move {
            let outcome = match tokio::time::timeout(timeout, replica.client.info()).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
            };
            replica.checked(outcome);
        });
        futures_util::future::join_all(checks).await;
    }
}

fn foreign(info: &InfoResponse, config: Option<&IndexConfig>) -> Option<String> {
    if info.protocol != PROTOCOL {
        Some(format!(
            "speaks cluster protocol {}, this root {PROTOCOL}",
            info.protocol
        ))
    } else if info.feature_set != FEATURE_SET_VERSION {
        Some(format!(
            "computes features {}, this root {FEATURE_SET_VERSION}",
            info.feature_set
        ))
    } else if config.is_some_and(|c| *c != info.config) {
        Some("has another index configuration than the collection's".into())
    } else {
        None
    }
}

/// HTTP clients for shard `shard`'s replicas at `urls`.
fn http_clients(http: &http::Http, shard: usize, urls: Vec<String>) -> Vec<Arc<dyn ShardClient>> {
    urls.into_iter()
        .map(|u| Arc::new(http::HttpShard::new(http, shard, &u)) as Arc<dyn ShardClient>)
        .collect()
}

/// The address of a merged hit as its shard knows it.
fn doc_ref(h: &MergedHit) -> DocRef {
    DocRef {
        segment: h.hit.candidate.address.segment_ord,
        doc: h.hit.candidate.address.doc_id,
    }
}
