//! A root: searches a collection whose shards are served by leaves ([`super::leaf`]), and
//! answers as the single index would (`docs/design/scale-out.md` §5).
//!
//! One search is four rounds, each sent to every shard concerned at once (one thread per
//! shard; the calls block on the network, not the CPU):
//!
//! 1. **statistics**: each shard's part of what the query's models and features read; the
//!    root sums them (`crate::text::stats`), and each shard names the searcher it pinned;
//! 2. **query**: each shard's top `window` with the summed statistics, merged by score and
//!    id ([`super::merge`]);
//! 3. **features** (reranking only): each shard's rows of its documents of the merged
//!    window, with their ranks in it; the root assembles the matrix, scores it with the
//!    active model once and re-sorts as the single index does (score, then first-phase rank);
//! 4. **hits**: what the page shows, from the shards holding its documents.
//!
//! Link scores are those of the whole collection's graph (`rankd graph` on a sharded data
//! directory stores them beside every shard); the window features are computed on the whole
//! window's subgraph, whose ids go with the feature call.
//!
//! A reranker reading RM3 features adds a round before the features: the window's top
//! `fb_docs` documents' term counts come from their shards, the root estimates the relevance
//! model once and gathers its expansion terms' statistics, and the leaves score it.
//!
//! The statistics round has a second form ([`StatsMode::Table`]): the root keeps every
//! shard's whole statistics table per index generation (fetched once, `/cluster/v1/table`,
//! in the compact form of `crate::text::stats_table`), and answers each query's statistics
//! from the sum of those tables' lookups without a round trip.
//! The leaf's query reply names its current generation, and a table of an older one is
//! fetched again by the next search; until then searches run on the pinned generation the
//! table describes, so they stay exact.
//!
//! Not yet sharded, and refused with a clear error: fusions, sorts, collapsing and
//! explanations.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tantivy::DocAddress;

use super::wire::*;
use super::MergedHit;
use crate::features::prf::{FeedbackDoc, Rm3Query};
use crate::features::{FeatureMatrix, Prf, FEATURE_SET_VERSION};
use crate::search::{
    ActiveModel, Hit, PhaseTimes, Ranking, SearchQuery, SearchResponse, ShardFailure, ShardHit,
    ShardsReport,
};
use crate::text::config::TEXT_FIELDS;
use crate::text::search::SearchError;
use crate::text::stats::{GlobalStats, StatsRequest};
use crate::text::stats_table::StatsTable;
use crate::text::{IndexConfig, ModelKind};

/// Where a search's collection statistics come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatsMode {
    /// A statistics call to every shard per search (Elasticsearch's `dfs_query_then_fetch`).
    Gather,
    /// The shards' whole tables, fetched once per index generation and summed at the root.
    Table,
}

/// A shard's whole statistics table and the generation it describes.
type Table = (u64, std::sync::Arc<StatsTable>);

/// Where the root is with a replica's table.
#[derive(Clone)]
enum TableState {
    Fetching,
    Ready(Table),
    /// The fetch failed then (an older leaf without tables, say): not tried again before
    /// [`TABLE_RETRY`].
    Failed(Instant),
}

/// How long after a failed table fetch the root gathers before fetching again.
const TABLE_RETRY: Duration = Duration::from_secs(10);

/// How long fetching one shard's statistics table may take (it runs beside the searches,
/// which gather their statistics meanwhile).
const TABLE_TIMEOUT: Duration = Duration::from_secs(300);

/// A collection served by leaves: each shard by one or more replicas.
pub struct Root {
    stats_mode: StatsMode,
    /// With [`StatsMode::Table`]: each replica's table (by base URL).
    tables: Arc<dashmap::DashMap<String, TableState>>,
    /// Each shard's replicas: fixed (`--shard`) or replaced as the membership changes
    /// ([`Root::set_replicas`]); a search works on the map it loaded at its start.
    shards: ArcSwap<Vec<Vec<Arc<Replica>>>>,
    num_shards: usize,
    config: IndexConfig,
    model: ArcSwapOption<ActiveModel>,
    agent: ureq::Agent,
    /// Answer without the shards that have no live replica (flagged `partial`), or 503.
    allow_partial: bool,
    /// The whole search's deadline.
    timeout: Duration,
    /// Numbers searches: a search tries a shard's replicas in rendezvous order for its number
    /// (`super::placement::request_key`), which spreads searches evenly and moves only a
    /// leaving replica's share when the replicas change.
    next: AtomicUsize,
    /// The collection's schema (from its configuration) and its `all` field, to read the
    /// shipped statistics by field as the leaves do.
    schema: tantivy::schema::Schema,
    all: tantivy::schema::Field,
    /// The threads the calls to leaves block on: kept, because creating a thread per call
    /// (its stack mapped and unmapped) cost more CPU than the calls themselves.
    pool: rayon::ThreadPool,
}

/// One leaf serving a shard, with the root's local view of its health: a replica that
/// failed a call is skipped for [`RETRY_AFTER`], then tried again, so a recovered leaf is
/// used again without a restart. Membership by gossip (`super::membership`) decides which
/// replicas a shard has; failover within a search does not wait for its failure detector.
struct Replica {
    url: String,
    down_until: Mutex<Option<Instant>>,
}

/// A shard and the replica a search calls for it.
type Target = (usize, Arc<Replica>);

/// How long a failed replica is skipped.
const RETRY_AFTER: Duration = Duration::from_millis(500);

impl Replica {
    fn up(&self) -> bool {
        let down = self.down_until.lock().unwrap_or_else(|p| p.into_inner());
        down.is_none_or(|t| Instant::now() >= t)
    }

    fn mark_down(&self) {
        *self.down_until.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Instant::now() + RETRY_AFTER);
    }

    fn mark_up(&self) {
        *self.down_until.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// What every try of one search does.
struct Plan {
    kind: ModelKind,
    model: Option<std::sync::Arc<ActiveModel>>,
    /// The first phase's depth: the rerank window, or the page's end.
    limit: usize,
    /// First-phase hits before the page (without reranking).
    skip: usize,
    /// The statistics the search reads: the first-phase model's field (collection
    /// frequencies for the language model), the body's for snippets, everything for the
    /// reranker's features.
    stats: StatsRequest,
}

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

fn internal(message: String) -> SearchError {
    SearchError::Internal(anyhow::anyhow!(message))
}

fn unsharded(field: &'static str, what: &str) -> SearchError {
    SearchError::Param {
        field,
        message: format!("{what} is not available on a sharded collection yet"),
    }
}

impl Root {
    /// Asks every shard for its configuration and checks that they agree with each other
    /// and with this binary (protocol, feature set).
    ///
    /// `shards[s]` lists the base URLs of shard `s`'s replicas. Each call to a leaf may take
    /// `leaf_timeout`; the whole search `timeout`.
    pub fn connect(
        shards: Vec<Vec<String>>,
        model: Option<ActiveModel>,
        timeout: Duration,
        leaf_timeout: Duration,
        allow_partial: bool,
    ) -> anyhow::Result<Self> {
        anyhow::ensure!(!shards.is_empty(), "a root needs at least one shard");
        let shards_len = shards.len();
        let replicas = shards
            .into_iter()
            .map(|urls| replicas_of(urls, &[]))
            .collect();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(leaf_timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let mut root = Root {
            stats_mode: StatsMode::Gather,
            tables: Default::default(),
            shards: ArcSwap::from_pointee(replicas),
            num_shards: shards_len,
            config: IndexConfig::default(),
            schema: tantivy::schema::Schema::builder().build(),
            all: tantivy::schema::Field::from_field_id(0),
            model: ArcSwapOption::from_pointee(model),
            agent,
            allow_partial,
            timeout,
            next: AtomicUsize::new(0),
            pool: rayon::ThreadPoolBuilder::new()
                .num_threads((8 * shards_len).clamp(16, 256))
                .thread_name(|i| format!("rankd-root-call-{i}"))
                .build()?,
        };
        let mut config: Option<IndexConfig> = None;
        for (shard, replicas) in root.shards.load().iter().enumerate() {
            let mut reachable = 0;
            for replica in replicas {
                let url = &replica.url;
                // A replica that does not answer may be down for now: it is probed again
                // later. One that answers must belong to this collection.
                let info: InfoResponse = match root.get(url, "info") {
                    Ok(info) => info,
                    Err(e) => {
                        eprintln!("warning: shard {shard} replica {url} does not answer: {e}");
                        replica.mark_down();
                        continue;
                    }
                };
                reachable += 1;
                anyhow::ensure!(
                    info.protocol == PROTOCOL,
                    "shard {shard} ({url}) speaks cluster protocol {}, this root {PROTOCOL}",
                    info.protocol
                );
                anyhow::ensure!(
                    info.feature_set == FEATURE_SET_VERSION,
                    "shard {shard} ({url}) computes features {}, this root {FEATURE_SET_VERSION}",
                    info.feature_set
                );
                match &config {
                    None => config = Some(info.config),
                    Some(c) => anyhow::ensure!(
                        *c == info.config,
                        "shard {shard} ({url}) has another index configuration than the others"
                    ),
                }
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
        root.config = config;
        let (schema, fields) = crate::text::schema::build_schema(&root.config);
        root.schema = schema;
        root.all = fields.all;
        Ok(root)
    }

    /// Where searches take their collection statistics from (default: [`StatsMode::Gather`]).
    pub fn with_stats_mode(mut self, mode: StatsMode) -> Self {
        self.stats_mode = mode;
        self
    }

    /// The active reranker.
    pub fn model(&self) -> Option<std::sync::Arc<ActiveModel>> {
        self.model.load_full()
    }

    pub fn num_shards(&self) -> usize {
        self.num_shards
    }

    /// Replaces the shards' replicas (`shards[s]`: shard `s`'s base URLs), as a membership
    /// view changes; a replica kept keeps its health. Searches under way finish on the map
    /// they started with. A map with another number of shards is refused, and so is a new
    /// replica that answers as another collection's leaf ([`Root::foreign`]). Blocks on those
    /// calls.
    pub fn set_replicas(&self, shards: Vec<Vec<String>>) -> anyhow::Result<()> {
        anyhow::ensure!(
            shards.len() == self.num_shards,
            "a replica map of {} shards for a collection of {}",
            shards.len(),
            self.num_shards
        );
        let old = self.shards.load();
        let known = |url: &str| old.iter().flatten().any(|r| r.url == url);
        let new = shards
            .into_iter()
            .zip(old.iter())
            .enumerate()
            .map(|(shard, (urls, before))| {
                let urls = urls
                    .into_iter()
                    .map(|u| u.trim_end_matches('/').to_string())
                    .filter(|u| match known(u) {
                        true => true,
                        false => match self.foreign(u) {
                            None => true,
                            Some(why) => {
                                tracing::error!("not using {u} for shard {shard}: it {why}");
                                false
                            }
                        },
                    })
                    .collect();
                replicas_of(urls, before)
            })
            .collect();
        self.shards.store(Arc::new(new));
        Ok(())
    }

    /// Why the leaf at `url` cannot serve this collection, if it answers and cannot: as at
    /// [`Root::connect`], it must speak this root's protocol and feature set and hold the
    /// collection's index configuration. One that does not answer (yet) is taken, and
    /// skipped by the failover while it does not.
    fn foreign(&self, url: &str) -> Option<String> {
        let info: InfoResponse = match self.get(url, "info") {
            Ok(info) => info,
            Err(e) => {
                tracing::warn!("new replica {url} does not answer yet: {e}");
                return None;
            }
        };
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
        } else if info.config != self.config {
            Some("has another index configuration than the collection's".into())
        } else {
            None
        }
    }

    /// Each shard's replicas' base URLs, as searches see them now.
    pub fn replica_urls(&self) -> Vec<Vec<String>> {
        self.shards
            .load()
            .iter()
            .map(|r| r.iter().map(|x| x.url.clone()).collect())
            .collect()
    }

    /// The shards none of whose replicas the root believes up (a failed replica counts as
    /// down for [`RETRY_AFTER`] after its failure).
    pub fn shards_down(&self) -> Vec<usize> {
        let shards = self.shards.load();
        (0..shards.len())
            .filter(|&s| !shards[s].iter().any(|r| r.up()))
            .collect()
    }

    /// Whether answers may leave out shards without a live replica.
    pub fn allows_partial(&self) -> bool {
        self.allow_partial
    }

    /// A document by id, from the shard its id routes to (its first replica that answers):
    /// the leaf's status and JSON body.
    pub fn document(&self, id: &str) -> Result<(u16, serde_json::Value), SearchError> {
        let shard = super::routing::shard_of(id, self.num_shards as u32) as usize;
        let path = percent_encoding::utf8_percent_encode(id, ID_IN_PATH);
        let mut last = String::from("no live replica");
        let shards = self.shards.load();
        for replica in &shards[shard] {
            let url = format!("{}/doc/{path}", replica.url);
            match self.agent.get(&url).call() {
                Ok(mut r) if r.status().is_success() || r.status() == 404 => {
                    let status = r.status().as_u16();
                    let body = r.body_mut().read_to_vec().map_err(|e| e.to_string());
                    match body.and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string())) {
                        Ok(v) => return Ok((status, v)),
                        Err(e) => last = format!("{url}: {e}"),
                    }
                }
                Ok(r) => last = format!("{url}: {}", r.status()),
                Err(e) => last = format!("{url}: {e}"),
            }
        }
        Err(SearchError::Unavailable(format!(
            "no replica of shard {shard} answered ({last})"
        )))
    }

    fn get<R: DeserializeOwned>(&self, base: &str, call: &str) -> Result<R, String> {
        let url = format!("{base}/cluster/v1/{call}");
        read_reply(self.agent.get(&url).call()).map(|(r, _)| r)
    }

    /// Posts `body` to the `call` of the replica `targets[t]` names.
    fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        targets: &[Target],
        t: usize,
        call: &str,
        body: &B,
    ) -> Result<R, CallError> {
        let (shard, replica) = &targets[t];
        let (shard, base) = (*shard, &replica.url);
        let url = format!("{base}/cluster/v1/{call}");
        let body = serde_json::to_vec(body).map_err(|e| internal(format!("{url}: {e}")))?;
        let start = Instant::now();
        let response = self
            .agent
            .post(&url)
            .header("content-type", "application/json")
            .send(&body[..]);
        let reply = read_reply(response);
        let received = reply.as_ref().map_or(0, |(_, n)| *n);
        crate::metrics::observe_leaf_call(
            call,
            shard,
            start.elapsed().as_secs_f64(),
            body.len(),
            received,
        );
        reply.map(|(r, _)| r).map_err(|reason| CallError::Replica {
            target: t,
            reason: format!("{url}: {reason}"),
        })
    }

    /// Calls `f` for each of `targets` at once (one pool thread each); the replies in
    /// `targets` order.
    fn fan_out<R: Send>(
        &self,
        targets: &[usize],
        f: impl Fn(usize) -> Result<R, CallError> + Sync,
    ) -> Result<Vec<R>, CallError> {
        use rayon::prelude::*;
        if let [t] = targets {
            return Ok(vec![f(*t)?]);
        }
        self.pool.install(|| {
            targets
                .par_iter()
                .with_max_len(1)
                .map(|&t| f(t))
                .collect::<Vec<_>>()
                .into_iter()
                .collect()
        })
    }

    /// One call to each target owning some of a list of documents: `owner[i]` is the target
    /// holding document `i`; `call(t, rows)` makes target `t`'s call for its rows (in list
    /// order) and `items` splits a reply into one item per row. The items come back in list
    /// order; a reply with another number of items fails its replica.
    fn scatter<R: Send, T: Clone>(
        &self,
        owner: &[usize],
        call: impl Fn(usize, &[usize]) -> Result<R, CallError> + Sync,
        items: impl Fn(R) -> Result<Vec<T>, String>,
    ) -> Result<Vec<T>, CallError> {
        let mut targets: Vec<usize> = owner.to_vec();
        targets.sort_unstable();
        targets.dedup();
        let rows_of =
            |t: usize| -> Vec<usize> { (0..owner.len()).filter(|&i| owner[i] == t).collect() };
        let replies = self.fan_out(&targets, |t| call(t, &rows_of(t)))?;
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

    /// Runs one search over every shard. A replica that fails a call is skipped and the
    /// search starts again on the shard's next replica (reads are idempotent); a shard left
    /// without a replica is dropped from the answer, flagged `partial`, or the search fails
    /// with 503 when partial answers are not allowed.
    pub fn search(&self, q: &SearchQuery) -> Result<SearchResponse, SearchError> {
        let plan = self.plan(q)?;
        let deadline = Instant::now() + self.timeout;
        let turn = self.next.fetch_add(1, Ordering::Relaxed) as u64;
        let shards = self.shards.load_full();
        let mut tried: Vec<Vec<bool>> = shards.iter().map(|r| vec![false; r.len()]).collect();
        let mut reasons: Vec<Option<String>> = vec![None; shards.len()];
        let orders: Vec<Vec<usize>> = shards
            .iter()
            .enumerate()
            .map(|(shard, replicas)| {
                let urls: Vec<&str> = replicas.iter().map(|r| r.url.as_str()).collect();
                super::placement::hrw_order(&super::placement::request_key(shard, turn), &urls)
            })
            .collect();
        loop {
            let mut targets: Vec<Target> = Vec::new();
            let mut failures = Vec::new();
            for (shard, replicas) in shards.iter().enumerate() {
                let order = orders[shard].iter().copied();
                // Replicas believed up first, then those marked down (a probe), never one
                // this search already saw fail.
                let pick = order
                    .clone()
                    .find(|&r| !tried[shard][r] && replicas[r].up())
                    .or_else(|| order.clone().find(|&r| !tried[shard][r]));
                match pick {
                    Some(r) => targets.push((shard, replicas[r].clone())),
                    None => failures.push(ShardFailure {
                        shard,
                        reason: reasons[shard].clone().unwrap_or_else(|| {
                            if replicas.is_empty() {
                                "no live replica".into()
                            } else {
                                "no replica answered".into()
                            }
                        }),
                    }),
                }
            }
            if !failures.is_empty() && (!self.allow_partial || targets.is_empty()) {
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
            match self.attempt(q, &plan, &targets) {
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
                    let (shard, replica) = &targets[target];
                    let shard = *shard;
                    replica.mark_down();
                    // A refused generation included: the table goes with it.
                    self.tables.remove(&replica.url);
                    crate::metrics::count_replica_failure(shard);
                    if let Some(r) = shards[shard].iter().position(|x| Arc::ptr_eq(x, replica)) {
                        tried[shard][r] = true;
                    }
                    tracing::warn!("shard {shard} replica {} failed: {reason}", replica.url);
                    reasons[shard] = Some(reason);
                    if Instant::now() >= deadline {
                        return Err(SearchError::Unavailable(format!(
                            "the shards did not answer within {} ms",
                            self.timeout.as_millis()
                        )));
                    }
                }
            }
        }
    }

    /// One statistics call to every target.
    fn stats_round(
        &self,
        targets: &[Target],
        request: &StatsRequest,
    ) -> Result<Vec<StatsReply>, CallError> {
        let all: Vec<usize> = (0..targets.len()).collect();
        let call = StatsCall {
            protocol: PROTOCOL,
            request: request.clone(),
        };
        self.fan_out(&all, |t| self.post(targets, t, "stats", &call))
    }

    /// With [`StatsMode::Table`]: every target's table, or `None` while some are being
    /// fetched. A missing table is fetched in the background (a large collection's table
    /// takes seconds to compute and ship), so no search waits for one.
    fn tables(&self, targets: &[(usize, Arc<Replica>)]) -> Option<Vec<Table>> {
        let mut out = Vec::with_capacity(targets.len());
        for (shard, replica) in targets {
            let (shard, url) = (*shard, replica.url.as_str());
            match self.tables.get(url).map(|e| e.value().clone()) {
                Some(TableState::Ready(table)) => out.push(table),
                Some(TableState::Fetching) => return None,
                Some(TableState::Failed(at)) if at.elapsed() < TABLE_RETRY => return None,
                _ => {
                    self.tables.insert(url.to_string(), TableState::Fetching);
                    self.fetch_table(shard, url.to_string());
                    return None;
                }
            }
        }
        Some(out)
    }

    /// Fetches `url`'s statistics table on a thread of its own.
    fn fetch_table(&self, shard: usize, url: String) {
        let tables = self.tables.clone();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(TABLE_TIMEOUT))
            .http_status_as_error(false)
            .build()
            .into();
        std::thread::spawn(move || {
            let call = format!("{url}/cluster/v1/table");
            let body = serde_json::json!({"protocol": PROTOCOL}).to_string();
            let start = Instant::now();
            let reply = read_body(
                agent
                    .post(&call)
                    .header("content-type", "application/json")
                    .send(body.as_bytes()),
            )
            .and_then(|bytes| Ok((read_table_reply(&bytes)?, bytes.len())));
            match reply {
                Ok(((generation, table), received)) => {
                    crate::metrics::observe_leaf_call(
                        "table",
                        shard,
                        start.elapsed().as_secs_f64(),
                        body.len(),
                        received,
                    );
                    let table = (generation, std::sync::Arc::new(table));
                    tables.insert(url, TableState::Ready(table));
                }
                Err(e) => {
                    tracing::warn!(
                        "shard {shard}: no statistics table from {call} (searches gather their \
                         statistics): {e}"
                    );
                    tables.insert(url, TableState::Failed(Instant::now()));
                }
            }
        });
    }

    /// The collection statistics `request` asks for, and the generation each target pinned:
    /// summed from the targets' tables when the root has them all, else from a statistics
    /// round (also the tables' fallback while they are fetched).
    #[allow(clippy::type_complexity)]
    fn statistics(
        &self,
        targets: &[(usize, Arc<Replica>)],
        request: &StatsRequest,
    ) -> Result<
        (
            GlobalStats,
            Vec<u64>,
            Option<Vec<std::sync::Arc<StatsTable>>>,
        ),
        CallError,
    > {
        let mut stats = GlobalStats::default();
        if self.stats_mode == StatsMode::Table {
            if let Some(tables) = self.tables(targets) {
                for (_, t) in &tables {
                    stats.add(&t.lookup(request));
                }
                let generations = tables.iter().map(|(g, _)| *g).collect();
                return Ok((
                    stats,
                    generations,
                    Some(tables.into_iter().map(|(_, t)| t).collect()),
                ));
            }
        }
        let replies = self.stats_round(targets, request)?;
        for r in &replies {
            stats.add(&r.stats);
        }
        Ok((stats, replies.iter().map(|r| r.generation).collect(), None))
    }

    /// Checks `q` and decides what every try of it does.
    fn plan(&self, q: &SearchQuery) -> Result<Plan, SearchError> {
        q.validate()?;
        if q.fusion.is_some() {
            return Err(unsharded("model", "model=fusion"));
        }
        if !q.collapse.is_empty() {
            return Err(unsharded("collapse", "collapse"));
        }
        if q.explain {
            return Err(unsharded("explain", "explain"));
        }
        if let Ranking::Sort(_) = q.ranking {
            return Err(unsharded("sort", "sort"));
        }
        let kind = match q.model {
            Some(m) => m,
            None => self
                .config
                .default_model
                .parse()
                .map_err(|e: String| internal(format!("index configuration: {e}")))?,
        };
        if let Some(f) = &q.field {
            if !TEXT_FIELDS.contains(&f.as_str()) {
                return Err(SearchError::Param {
                    field: "field",
                    message: format!(
                        "unknown field `{f}` (known: title, headings, body, anchor, url, all)"
                    ),
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
            _ => (q.offset + q.k, q.offset),
        };
        let stats = if model.is_some() {
            StatsRequest::for_query(&self.config, &q.text)?
        } else {
            let field = match kind {
                ModelKind::Bm25F => "all",
                _ => q.field.as_deref().unwrap_or(&self.config.default_field),
            };
            let mut fields = vec![field];
            if q.returns.snippet {
                fields.push("body");
            }
            StatsRequest::for_fields(&self.config, &q.text, &fields, kind == ModelKind::Lm)?
        };
        Ok(Plan {
            kind,
            model,
            limit,
            skip,
            stats,
        })
    }

    /// One try of a search on one replica of each shard in `targets` (shard, replica).
    fn attempt(
        &self,
        q: &SearchQuery,
        plan: &Plan,
        targets: &[Target],
    ) -> Result<SearchResponse, CallError> {
        let (kind, model, limit, skip) = (plan.kind, &plan.model, plan.limit, plan.skip);
        let start = Instant::now();
        let all: Vec<usize> = (0..targets.len()).collect();
        let mut times = PhaseTimes::default();

        // 1. Statistics, summed; each shard pins its searcher.
        let (stats, generations, tables) = self.statistics(targets, &plan.stats)?;

        // 2. First phase, merged.
        let replies: Vec<QueryReply> = self.fan_out(&all, |s| {
            self.post(
                targets,
                s,
                "query",
                &QueryCall {
                    protocol: PROTOCOL,
                    generation: generations[s],
                    text: q.text.clone(),
                    model: kind.name().to_string(),
                    field: q.field.clone(),
                    limit,
                    stats: stats.clone(),
                    boost: match q.ranking {
                        Ranking::Boost { weight, .. } => Some(weight),
                        _ => None,
                    },
                },
            )
        })?;
        if tables.is_some() {
            // A shard whose searcher moved on: its table is fetched again next time (this
            // search goes on with the generation it pinned).
            for (t, r) in replies.iter().enumerate() {
                if r.current != generations[t] {
                    self.tables.remove(&targets[t].1.url);
                }
            }
        }
        let total_hits = replies.iter().map(|r| r.total_hits).sum();
        let mut boosts: std::collections::HashMap<String, f32> = Default::default();
        let mut nodes: std::collections::HashMap<String, u32> = Default::default();
        let lists = replies
            .into_iter()
            .map(|r| {
                r.hits
                    .into_iter()
                    .map(|c| {
                        if let Some(b) = c.boost {
                            boosts.insert(c.id.clone(), f32::from_bits(b));
                        }
                        // Only a reranker reads the window's link subgraph.
                        if let (Some(node), Some(_)) = (c.node, model) {
                            nodes.insert(c.id.clone(), node);
                        }
                        ShardHit {
                            score: f32::from_bits(c.score),
                            id: c.id,
                            address: DocAddress::new(c.doc.segment, c.doc.doc),
                        }
                    })
                    .collect()
            })
            .collect();
        let window = super::merge(lists, limit);
        times.retrieve = start.elapsed().as_secs_f64();

        // 3. Second phase: (window row, score) of the page, best first.
        let mut ranked: Vec<(usize, f32)> = window
            .iter()
            .enumerate()
            .map(|(i, h)| (i, h.hit.score))
            .collect();
        if let Some(active) = &model {
            let t = Instant::now();
            let features = self.window_features(
                q,
                kind,
                active.prf(),
                &stats,
                &generations,
                targets,
                &window,
                &nodes,
                tables.as_deref(),
            )?;
            times.features = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let scores = active
                .score(&features)
                .map_err(|e| internal(format!("reranker {}: {e}", active.id())))?;
            for (r, &s) in ranked.iter_mut().zip(&scores) {
                r.1 = s;
            }
            // Re-sorted by the new score, ties in first-phase order.
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            ranked.truncate(q.offset + q.k);
            ranked.drain(..q.offset.min(ranked.len()));
            times.rerank = t.elapsed().as_secs_f64();
        } else if let Ranking::Boost { .. } = q.ranking {
            // SPEC §1.8: the boost added to the window's first-phase scores, re-sorted with
            // ties in first-phase order, as the single node does.
            for r in ranked.iter_mut() {
                let added = boosts
                    .get(&window[r.0].hit.id)
                    .copied()
                    .ok_or_else(|| internal(format!("no boost for {}", window[r.0].hit.id)))?;
                r.1 += added;
            }
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            ranked.truncate(q.offset + q.k);
            ranked.drain(..q.offset.min(ranked.len()));
        } else {
            ranked.drain(..skip.min(ranked.len()));
        }

        // 4. What the page shows.
        let t = Instant::now();
        let hits = self.page(q, &stats, &generations, targets, &window, &ranked)?;
        times.hits = t.elapsed().as_secs_f64();
        Ok(SearchResponse {
            query: q.text.clone(),
            model: kind.to_string(),
            reranker: model.as_ref().map(|m| m.id().to_string()),
            total_hits,
            took_ms: start.elapsed().as_secs_f64() * 1e3,
            hits,
            fusion: None,
            partial: None,
            shards: None,
            times,
        })
    }

    /// RM3's relevance model of the merged window: the feedback documents' term counts from
    /// their shards, the model estimated here once, its expansion terms' statistics gathered
    /// from every shard and added to `stats` (`LocalCluster::relevance_model` in process).
    fn relevance_model(
        &self,
        q: &SearchQuery,
        stats: &GlobalStats,
        generations: &[u64],
        targets: &[Target],
        window: &[MergedHit],
        tables: Option<&[std::sync::Arc<StatsTable>]>,
    ) -> Result<(Option<Rm3Query>, GlobalStats), CallError> {
        let fb = self.config.models.rm3.fb_docs.min(window.len());
        let owner: Vec<usize> = window[..fb].iter().map(|h| h.shard).collect();
        let feedback: Vec<FeedbackDoc> = self.scatter(
            &owner,
            |t, rows| {
                let docs = rows.iter().map(|&i| doc_ref(&window[i])).collect();
                self.post(
                    targets,
                    t,
                    "feedback",
                    &FeedbackCall {
                        protocol: PROTOCOL,
                        generation: generations[t],
                        docs,
                    },
                )
            },
            |reply: FeedbackReply| Ok(reply.docs),
        )?;
        let source = stats.source(&self.schema);
        let rm = crate::features::prf::estimate(
            &self.config,
            self.all,
            &crate::text::stats::Stats::new(&source),
            &q.text,
            &feedback,
        )?;
        let mut stats = stats.clone();
        if let (Some(rm), Some(tables)) = (&rm, tables) {
            let mut extra = GlobalStats::default();
            for t in tables {
                extra.add(&t.lookup(&rm.stats_request()));
            }
            stats.extend(extra);
        } else if let Some(rm) = &rm {
            let replies = self.stats_round(targets, &rm.stats_request())?;
            let mut extra = GlobalStats::default();
            for (s, r) in replies.iter().enumerate() {
                if r.generation != generations[s] {
                    // The shard committed since the search began: its statistics would mix
                    // two states of it. The search starts again.
                    return Err(CallError::Replica {
                        target: s,
                        reason: "the shard changed during the search".into(),
                    });
                }
                extra.add(&r.stats);
            }
            stats.extend(extra);
        }
        Ok((rm, stats))
    }

    /// The merged window's feature rows, in window order: each leaf sends its documents'
    /// rows and their out-links within the window (`nodes`: each window document's link-graph
    /// node, by id), and the window features are computed here, where the window is whole.
    #[allow(clippy::too_many_arguments)]
    fn window_features(
        &self,
        q: &SearchQuery,
        kind: ModelKind,
        prf: Prf,
        stats: &GlobalStats,
        generations: &[u64],
        targets: &[Target],
        window: &[MergedHit],
        nodes: &std::collections::HashMap<String, u32>,
        tables: Option<&[std::sync::Arc<StatsTable>]>,
    ) -> Result<FeatureMatrix, CallError> {
        let now = crate::features::social::unix_now();
        let rows_nodes: Vec<(usize, u32)> = window
            .iter()
            .enumerate()
            .filter_map(|(i, h)| nodes.get(&h.hit.id).map(|&u| (i, u)))
            .collect();
        let window_nodes = crate::features::link::window_nodes(rows_nodes.iter().map(|&(_, u)| u));
        let prf = prf == Prf::Compute;
        let (rm3, stats) = match prf {
            true => self.relevance_model(q, stats, generations, targets, window, tables)?,
            false => (None, stats.clone()),
        };
        let stats = &stats;
        let set = crate::features::FeatureSet::current();
        let cols = set.len();
        let owner: Vec<usize> = window.iter().map(|h| h.shard).collect();
        let parts: Vec<(Vec<u32>, Vec<u32>)> = self.scatter(
            &owner,
            |t, rows| {
                let docs = rows
                    .iter()
                    .map(|&i| (doc_ref(&window[i]), window[i].hit.score.to_bits(), i + 1))
                    .collect();
                self.post(
                    targets,
                    t,
                    "features",
                    &FeaturesCall {
                        protocol: PROTOCOL,
                        generation: generations[t],
                        text: q.text.clone(),
                        stats: stats.clone(),
                        now,
                        scores_are_bm25f: kind == ModelKind::Bm25F,
                        docs,
                        window_nodes: window_nodes.clone(),
                        prf,
                        rm3: rm3.clone(),
                    },
                )
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
        )?;
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
    fn page(
        &self,
        q: &SearchQuery,
        stats: &GlobalStats,
        generations: &[u64],
        targets: &[Target],
        window: &[MergedHit],
        ranked: &[(usize, f32)],
    ) -> Result<Vec<Hit>, CallError> {
        let r = q.returns;
        let hit = |i: usize, (row, score): (usize, f32), shown: Option<WireHit>| {
            let h = &window[row];
            let a = h.hit.address;
            let shown = shown.unwrap_or(WireHit {
                id: h.hit.id.clone(),
                url: None,
                title: None,
                snippet: None,
            });
            Hit {
                rank: q.offset + i + 1,
                id: h.hit.id.clone(),
                url: r.url.then_some(shown.url),
                title: r.title.then_some(shown.title.unwrap_or_default()),
                snippet: r.snippet.then_some(shown.snippet.unwrap_or_default()),
                score,
                sort_key: None,
                collapsed: None,
                explain: None,
                address: DocAddress::new(h.shard as u32, a.doc_id),
            }
        };
        if !(r.url || r.title || r.snippet) {
            return Ok(ranked
                .iter()
                .enumerate()
                .map(|(i, &x)| hit(i, x, None))
                .collect());
        }
        let owner: Vec<usize> = ranked.iter().map(|&(row, _)| window[row].shard).collect();
        let shown: Vec<WireHit> = self.scatter(
            &owner,
            |t, rows| {
                let docs = rows
                    .iter()
                    .map(|&i| doc_ref(&window[ranked[i].0]))
                    .collect();
                self.post(
                    targets,
                    t,
                    "hits",
                    &HitsCall {
                        protocol: PROTOCOL,
                        generation: generations[t],
                        text: q.text.clone(),
                        stats: stats.clone(),
                        url: r.url,
                        title: r.title,
                        snippet: r.snippet,
                        docs,
                    },
                )
            },
            |reply: HitsReply| Ok(reply.hits),
        )?;
        Ok(ranked
            .iter()
            .zip(shown)
            .enumerate()
            .map(|(i, (&x, s))| hit(i, x, Some(s)))
            .collect())
    }
}

/// A leaf's answer: the decoded body of a 2xx, else why not. A 4xx other than 409 means the
/// root sent a call the leaf could not take (a bug or a version mismatch); it is reported
/// like a dead replica so the search can go on elsewhere, and logged.
fn read_reply<R: DeserializeOwned>(
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<(R, usize), String> {
    let body = read_body(response)?;
    serde_json::from_slice(&body)
        .map(|r| (r, body.len()))
        .map_err(|e| format!("malformed reply: {e}"))
}

/// The body of a 2xx, else why not ([`read_reply`]).
fn read_body(
    response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<Vec<u8>, String> {
    let mut response = response.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response
        .body_mut()
        .with_config()
        .limit(256 << 20)
        .read_to_vec()
        .map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!(
            "{status}: {}",
            String::from_utf8_lossy(&body[..body.len().min(500)])
        ));
    }
    Ok(body)
}

/// The characters a document id keeps escaped in a `/doc/{*id}` path (`/` stays: the route
/// takes the rest of the path).
const ID_IN_PATH: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

/// What a document batch through the root did on each shard.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchReport {
    /// Documents indexed, over all shards.
    pub indexed: usize,
    /// Per shard that received documents: its number and how many.
    pub shards: Vec<(usize, usize)>,
}

impl Root {
    /// Adds or replaces the NDJSON documents of `body` (the format of a leaf's
    /// `POST /admin/documents`): the whole batch is parsed and checked first, so a bad record
    /// rejects it before any shard is written; then each shard's lines go, as one batch, to
    /// every replica of the shard, with the cluster's admin `token`.
    ///
    /// Shards commit one after the other, not together: a replica failing leaves the shards
    /// before it written, and the error says which (as Elasticsearch's bulk API reports per
    /// shard). Resending the same batch is safe: a document replaces the one with its id.
    pub fn upsert(&self, body: &[u8], token: &str) -> Result<BatchReport, SearchError> {
        crate::corpus::jsonl::parse_batch(body).map_err(|e| SearchError::Param {
            field: "body",
            message: e.to_string(),
        })?;
        let n = self.num_shards as u32;
        let mut parts: Vec<Vec<&[u8]>> = vec![Vec::new(); self.num_shards];
        for line in body.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: serde_json::Value = serde_json::from_slice(line)
                .map_err(|e| internal(format!("a checked record does not parse: {e}")))?;
            let id = value["id"]
                .as_str()
                .ok_or_else(|| internal("a checked record has no string id".into()))?;
            parts[super::routing::shard_of(id, n) as usize].push(line);
        }
        let mut report = BatchReport {
            indexed: 0,
            shards: Vec::new(),
        };
        for (shard, lines) in parts.iter().enumerate() {
            if lines.is_empty() {
                continue;
            }
            let batch = lines.join(&b'\n');
            let sent = self.admin_write(shard, "documents", "application/x-ndjson", &batch, token);
            if let Err(reason) = sent {
                let done: Vec<usize> = report.shards.iter().map(|(s, _)| *s).collect();
                return Err(SearchError::Unavailable(format!(
                    "shard {shard} did not take its {} documents: {reason}; shards written \
                     before it: {done:?}; resending the batch is safe",
                    lines.len()
                )));
            }
            report.indexed += lines.len();
            report.shards.push((shard, lines.len()));
        }
        Ok(report)
    }

    /// Posts `body` to `/admin/{path}` of every replica of `shard` with the cluster token;
    /// the first failure, naming its replica.
    fn admin_write(
        &self,
        shard: usize,
        path: &str,
        content_type: &str,
        body: &[u8],
        token: &str,
    ) -> Result<(), String> {
        let shards = self.shards.load();
        if shards[shard].is_empty() {
            return Err("no live replica".into());
        }
        for replica in &shards[shard] {
            let url = format!("{}/admin/{path}", replica.url);
            let response = self
                .agent
                .post(&url)
                .header("content-type", content_type)
                .header("authorization", &format!("Bearer {token}"))
                .send(body);
            read_reply::<serde_json::Value>(response)
                .map_err(|reason| format!("{url}: {reason}"))?;
        }
        Ok(())
    }

    /// The first of `ids` (with its position) that is no document of the collection, asked
    /// of the shard each routes to (its first replica that answers).
    pub fn first_missing(&self, ids: &[String]) -> Result<Option<(usize, String)>, SearchError> {
        for (i, id) in ids.iter().enumerate() {
            let (status, _) = self.document(id).map_err(|e| match e {
                SearchError::Unavailable(m) => {
                    SearchError::Unavailable(format!("{m}; nothing was deleted"))
                }
                other => other,
            })?;
            if status == 404 {
                return Ok(Some((i, id.clone())));
            }
        }
        Ok(None)
    }

    /// Deletes `ids` (each a document of the collection, [`Root::first_missing`]) on every
    /// replica of the shard each routes to. Shards commit one after the other, as batches do.
    pub fn delete(&self, ids: &[String], token: &str) -> Result<usize, SearchError> {
        let n = self.num_shards as u32;
        let mut parts: Vec<Vec<&String>> = vec![Vec::new(); self.num_shards];
        for id in ids {
            parts[super::routing::shard_of(id, n) as usize].push(id);
        }
        let mut done = Vec::new();
        for (shard, ids) in parts.iter().enumerate() {
            if ids.is_empty() {
                continue;
            }
            let body = serde_json::to_vec(&serde_json::json!({ "ids": ids }))
                .map_err(|e| internal(e.to_string()))?;
            let sent =
                self.admin_write(shard, "documents/delete", "application/json", &body, token);
            if let Err(reason) = sent {
                return Err(SearchError::Unavailable(format!(
                    "shard {shard} did not delete its {} documents: {reason}; shards done \
                     before it: {done:?}; resending the deletion is safe only for the ids not \
                     yet deleted",
                    ids.len()
                )));
            }
            done.push(shard);
        }
        Ok(ids.len())
    }
}

/// The replicas at `urls`, reusing those of `before` with the same URL (and their health).
fn replicas_of(urls: Vec<String>, before: &[Arc<Replica>]) -> Vec<Arc<Replica>> {
    urls.into_iter()
        .map(|u| {
            let url = u.trim_end_matches('/').to_string();
            before
                .iter()
                .find(|r| r.url == url)
                .cloned()
                .unwrap_or_else(|| {
                    Arc::new(Replica {
                        url,
                        down_until: Mutex::new(None),
                    })
                })
        })
        .collect()
}

/// The address of a merged hit as its shard knows it.
fn doc_ref(h: &MergedHit) -> DocRef {
    DocRef {
        segment: h.hit.address.segment_ord,
        doc: h.hit.address.doc_id,
    }
}
