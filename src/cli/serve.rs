//! `rankd serve`: open the index and the database and serve the HTTP API. Settings come from
//! flags, `RANKD_*` variables and a TOML file, in that precedence (`crate::config`).

use crate::sync::Recover;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use crate::admin::auth::FailureThrottle;
use crate::admin::Ops;
use crate::api::cluster::RootState;
use crate::api::{self, AppState};
use crate::cluster::membership::{keys, ClusterView, Membership, MembershipConfig, NodeKeys};
use crate::cluster::metastore::{
    LiveMap, MapCache, MapSource, Metastore, NodeRecord, ReplicaState,
};
use crate::cluster::root::{Root, RootOptions, StatsMode};
use crate::config::{Config, Flags};
use crate::db::{redact, Db};
use crate::error::Invalid;
use crate::text::TextIndex;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// TOML configuration file (or `RANKD_CONFIG`); keys in docs/OPERATIONS.md, "Configuration".
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Listen address [env: RANKD_ADDR] [default: 127.0.0.1:8080].
    #[arg(long)]
    pub addr: Option<SocketAddr>,
    /// Where the index and everything derived from it live [env: RANKD_DATA_DIR]
    /// [default: ./data].
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// `postgres://..` or `sqlite:PATH` [env: RANKD_DATABASE_URL or DATABASE_URL]
    /// [default: SQLite in DATA_DIR/rankd.db].
    #[arg(long)]
    pub database_url: Option<String>,
    /// Index configuration overriding the stored one's scoring parameters.
    #[arg(long)]
    pub index_config: Option<PathBuf>,
    /// `single` serves one index; `leaf` serves it also as one shard of a collection
    /// (`/cluster/v1/*`); `root` searches a collection whose shards leaves serve (`--shard`),
    /// holding no index itself.
    #[arg(long, value_enum, default_value_t = Role::Single)]
    pub role: Role,
    /// With `--role root`: the base URLs of each shard's leaves, in shard order (repeat the
    /// flag; replicas of one shard comma-separated: `--shard http://a:8101,http://b:8101`).
    #[arg(long = "shard", value_name = "URL[,URL..]")]
    pub shards: Vec<String>,
    /// With `--role root`: how long one call to a leaf may take before the root tries the
    /// shard's next replica.
    #[arg(long, default_value_t = 1000)]
    pub leaf_timeout_ms: u64,
    /// With `--role root`: answer without the shards that have no live replica (the answer
    /// says `partial: true` and names them) instead of a 503.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub allow_partial_results: bool,
    /// With `--role root`: the reranker's model file (as `rankd train` writes it).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Join the cluster's gossip (chitchat over UDP) at this address: a leaf announces its
    /// shard there, a root learns its shards' replicas from it instead of `--shard`.
    #[arg(long, value_name = "ADDR")]
    pub gossip: Option<SocketAddr>,
    /// With `--gossip`: the gossip addresses of nodes to join through (repeat the flag or
    /// separate by commas; a node may name itself).
    #[arg(long = "seed", value_name = "ADDR[,ADDR..]", value_delimiter = ',')]
    pub seeds: Vec<String>,
    /// With `--gossip`: this node's id in the cluster [default: ROLE@GOSSIP_ADDR].
    #[arg(long)]
    pub node_id: Option<String>,
    /// With `--gossip`: the collection served (a leaf) or searched (a root).
    #[arg(long, default_value = "main")]
    pub collection: String,
    /// With `--role leaf`: the shard this leaf serves (announced with `--gossip`, fetched
    /// with `--store`).
    #[arg(long)]
    pub shard_id: Option<u32>,
    /// With `--gossip`: the base URL others reach this node's HTTP API at
    /// [default: http:// and the bound address].
    #[arg(long)]
    pub advertise_url: Option<String>,
    /// With `--gossip`: the cluster metastore (`postgres://..`, or `sqlite:PATH`): a leaf
    /// registers itself and its replica there; a root reads the collection's shards from it
    /// and keeps the last map read in `DATA_DIR/cluster/last_map.json`, which it starts from
    /// (with a warning) when the metastore is unreachable.
    #[arg(long, value_name = "URL")]
    pub metastore: Option<String>,
    /// With `--role root --gossip`: how long to wait at start for a live replica of every
    /// shard before serving without the missing ones.
    #[arg(long, default_value_t = 10_000)]
    pub discovery_timeout_ms: u64,
    /// With `--role root`: where collection statistics come from: `gather` asks every shard
    /// per search; `table` keeps each shard's whole statistics table per index generation
    /// and sums it at the root (docs/BENCHMARKS.md compares them).
    #[arg(long, value_enum, default_value_t = StatsArg::Gather)]
    pub stats: StatsArg,
    /// With `--role leaf`: follow the generations `rankd publish` writes to this object
    /// store (`s3://BUCKET[/PREFIX]`, `file:///PATH` or a directory) for `--shard-id`: fetch
    /// the newest before serving, then switch to each new one while serving. The data
    /// directory is then a replica: its admin API is off (write to the publishing index).
    #[arg(long, env = "RANKD_STORE")]
    pub store: Option<String>,
    /// With `--store`: how often to look for a new generation.
    #[arg(long, default_value_t = 2000)]
    pub poll_ms: u64,
}

/// A leaf following a store's generations of one shard.
pub struct Following {
    pub store: crate::cluster::generation::Store,
    pub shard: u32,
    pub interval: Duration,
}

/// `--stats`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsArg {
    Gather,
    Table,
}

impl StatsArg {
    fn mode(self) -> StatsMode {
        match self {
            StatsArg::Gather => StatsMode::Gather,
            StatsArg::Table => StatsMode::Table,
        }
    }
}

/// What a `rankd serve` process is in a collection.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Single,
    Leaf,
    Root,
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    let config = Config::load(Flags {
        config: args.config,
        addr: args.addr,
        data_dir: args.data_dir,
        database_url: args.database_url,
    })
    .map_err(|e| Invalid(format!("{e:#}")))?;
    let cluster = ClusterArgs {
        gossip: args.gossip,
        seeds: args.seeds,
        node_id: args.node_id,
        collection: args.collection,
        shard_id: args.shard_id,
        advertise_url: args.advertise_url,
        metastore: args.metastore,
        discovery_timeout: Duration::from_millis(args.discovery_timeout_ms),
    };
    if cluster.gossip.is_none()
        && ((cluster.shard_id.is_some() && args.store.is_none())
            || cluster.metastore.is_some()
            || !cluster.seeds.is_empty())
    {
        return Err(Invalid(
            "--shard-id needs --gossip ADDR or --store URL; --seed and --metastore need --gossip"
                .into(),
        )
        .into());
    }
    if args.role != Role::Leaf && args.store.is_some() {
        return Err(Invalid("--store applies to --role leaf".into()).into());
    }
    let stats = args.stats.mode();
    if args.role == Role::Root && cluster.gossip.is_some() {
        if !args.shards.is_empty() {
            return Err(Invalid(
                "--role root takes its shards from --shard or from --gossip, not both".into(),
            )
            .into());
        }
        let calls = Duration::from_millis(args.leaf_timeout_ms);
        let model = load_model(args.model.as_deref())?;
        return serve_root_gossip(
            config,
            cluster,
            model,
            calls,
            args.allow_partial_results,
            stats,
        );
    }
    if args.role == Role::Root {
        let shards = args
            .shards
            .iter()
            .map(|s| s.split(',').map(|u| u.trim().to_string()).collect())
            .collect();
        let calls = Duration::from_millis(args.leaf_timeout_ms);
        return serve_root(
            config,
            shards,
            args.model.as_deref(),
            calls,
            args.allow_partial_results,
            stats,
        );
    }
    if !args.shards.is_empty() || args.model.is_some() {
        return Err(Invalid("--shard and --model apply to --role root".into()).into());
    }
    let index_config = args
        .index_config
        .as_deref()
        .map(crate::text::IndexConfig::load)
        .transpose()
        .map_err(|e| Invalid(format!("{e:#}")))?;
    let following = match (args.store, cluster.shard_id) {
        (Some(url), Some(shard)) => {
            Some(follow_store(&url, shard, &config.data_dir, args.poll_ms)?)
        }
        (Some(_), None) => return Err(Invalid("--store needs --shard-id".into()).into()),
        (None, _) => None,
    };
    let mut config = config;
    if following.is_some() && config.admin_token.is_some() {
        eprintln!(
            "note: the admin API is off: this leaf's index follows a store (write to the \
             publishing index)"
        );
        config.admin_token = None;
    }
    let gossip = match (args.role, cluster.gossip) {
        (Role::Leaf, Some(_)) => Some(LeafGossip::new(cluster, &config.data_dir)?),
        (Role::Single, Some(_)) => {
            return Err(Invalid("--gossip applies to --role leaf and --role root".into()).into())
        }
        _ => None,
    };
    let index = TextIndex::open(&config.data_dir, index_config)?;
    serve_index_with(index, config, args.role == Role::Leaf, gossip, following)
}

/// Opens the store a leaf follows and brings `data_dir` to shard `shard`'s newest generation
/// before the index is opened. A store out of reach is survived when the directory already
/// holds a generation (it is served, and the store tried again while serving).
fn follow_store(url: &str, shard: u32, data_dir: &Path, poll_ms: u64) -> anyhow::Result<Following> {
    use crate::cluster::generation;
    let store = generation::Store::open(url)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    match runtime.block_on(generation::bootstrap(&store, data_dir, shard)) {
        Ok(Some(a)) => eprintln!(
            "fetched generation {} of shard {shard} from {url}: {} files, {} bytes ({} files \
             reused)",
            a.generation, a.files_fetched, a.bytes_fetched, a.files_reused
        ),
        Ok(None) => {}
        Err(e) if generation::local_generation(data_dir)?.is_some() => eprintln!(
            "warning: serving the generation in {}: {e:#}",
            data_dir.display()
        ),
        Err(e) => return Err(e),
    }
    Ok(Following {
        store,
        shard,
        interval: Duration::from_millis(poll_ms.max(10)),
    })
}

/// The cluster flags of `rankd serve`.
struct ClusterArgs {
    gossip: Option<SocketAddr>,
    seeds: Vec<String>,
    node_id: Option<String>,
    collection: String,
    shard_id: Option<u32>,
    advertise_url: Option<String>,
    metastore: Option<String>,
    discovery_timeout: Duration,
}

impl ClusterArgs {
    fn membership(&self, role: &str) -> MembershipConfig {
        let gossip = self.gossip.expect("checked by the caller");
        let id = self
            .node_id
            .clone()
            .unwrap_or_else(|| format!("{role}@{gossip}"));
        MembershipConfig::new(id, gossip, self.seeds.clone())
    }
}

/// What a leaf announces by gossip, and where it registers.
struct LeafGossip {
    cluster: ClusterArgs,
    shard: u32,
    /// The collection's shard count, from `DATA_DIR/../collection.json` when the leaf's data
    /// directory is a shard of a split collection (`rankd ingest --shards`).
    shards: Option<u32>,
}

impl LeafGossip {
    fn new(cluster: ClusterArgs, data_dir: &Path) -> anyhow::Result<LeafGossip> {
        let Some(shard) = cluster.shard_id else {
            return Err(Invalid("--role leaf --gossip needs --shard-id S".into()).into());
        };
        // DATA_DIR is COLLECTION/shards/S when the collection was split by `rankd ingest`.
        let collection = data_dir.parent().and_then(Path::parent);
        let record = match collection {
            Some(dir) => crate::cluster::read_collection(dir)?,
            None => None,
        };
        let shards = match record {
            Some(c) if shard >= c.shards => {
                return Err(Invalid(format!(
                    "--shard-id {shard}: the collection in {} has {} shards",
                    collection.unwrap_or(data_dir).display(),
                    c.shards
                ))
                .into())
            }
            Some(c) => Some(c.shards),
            None => None,
        };
        Ok(LeafGossip {
            cluster,
            shard,
            shards,
        })
    }

    /// Joins the gossip once the HTTP address is known, registers in the metastore (a
    /// failure there is logged and counted: the leaf serves without it), and mirrors the
    /// server's readiness into the `ready` key until the process ends.
    async fn run(
        self,
        bound: tokio::sync::oneshot::Receiver<SocketAddr>,
        state: Arc<AppState>,
    ) -> anyhow::Result<()> {
        let Ok(bound) = bound.await else {
            return Ok(());
        };
        let api_url = self
            .cluster
            .advertise_url
            .clone()
            .unwrap_or_else(|| format!("http://{bound}"));
        let announced = NodeKeys {
            role: "leaf".into(),
            api_url: api_url.clone(),
            collection: self.cluster.collection.clone(),
            shard: Some(self.shard),
            shards: self.shards,
            generation: state.engine.store_generation(),
            ready: true,
        };
        let config = self.cluster.membership("leaf");
        let node_id = config.node_id.clone();
        let gossip = config.advertise;
        let membership = Membership::start(config, &announced).await?;
        eprintln!(
            "gossip on udp://{gossip} as {node_id}: shard {} of {:?}",
            self.shard, self.cluster.collection
        );
        if let Some(url) = &self.cluster.metastore {
            if let Err(e) = register_leaf(
                url,
                &self.cluster.collection,
                self.shard,
                self.shards,
                &node_id,
                &api_url,
                gossip,
            )
            .await
            {
                crate::metrics::count_metastore_error("register");
                eprintln!("warning: cannot register in the metastore (serving anyway): {e:#}");
            }
        }
        // Readiness, and the store generation a following leaf serves, as they change.
        let mut ready = true;
        let mut generation = state.engine.store_generation();
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = state.ready.load(std::sync::atomic::Ordering::SeqCst);
            if now != ready {
                ready = now;
                membership
                    .set(keys::READY, if ready { "1" } else { "0" })
                    .await;
            }
            let serving = state.engine.store_generation();
            if serving != generation {
                generation = serving;
                if let Some(g) = generation {
                    membership.set(keys::GENERATION, &g.to_string()).await;
                }
            }
        }
    }
}

/// Records a leaf, its collection (when the leaf knows the shard count) and its replica.
async fn register_leaf(
    url: &str,
    collection: &str,
    shard: u32,
    shards: Option<u32>,
    node_id: &str,
    api_url: &str,
    gossip: SocketAddr,
) -> anyhow::Result<()> {
    let store = Metastore::connect(url, METASTORE_TIMEOUT).await?;
    if let Some(n) = shards {
        store.create_collection(collection, n).await?;
    }
    store
        .register_node(&NodeRecord {
            node_id: node_id.to_string(),
            role: "leaf".into(),
            api_url: api_url.to_string(),
            gossip_addr: gossip.to_string(),
            registered_at: crate::db::now_ms(),
        })
        .await?;
    store
        .upsert_replicas(collection, &[(shard, node_id, ReplicaState::Serving)])
        .await
}

/// How long one metastore connection or read may take.
const METASTORE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a root reads the metastore again.
const METASTORE_REFRESH: Duration = Duration::from_secs(5);

fn load_model(model: Option<&Path>) -> anyhow::Result<Option<crate::search::ActiveModel>> {
    model
        .map(|path| {
            crate::search::ActiveModel::load(path)
                .map_err(|e| Invalid(format!("--model {}: {e}", path.display())).into())
        })
        .transpose()
}

/// Serves a root whose shards' replicas come from the gossip's live view (in rendezvous
/// order), the shard count from the metastore or, without one, from the leaves' keys.
fn serve_root_gossip(
    config: Config,
    cluster: ClusterArgs,
    model: Option<crate::search::ActiveModel>,
    leaf_timeout: Duration,
    allow_partial: bool,
    stats: StatsMode,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let collection = cluster.collection.clone();
        let live_map = match &cluster.metastore {
            Some(url) => {
                let cache = MapCache::in_data_dir(&config.data_dir);
                let (live, source) = LiveMap::open(url, cache.clone(), METASTORE_TIMEOUT)
                    .await
                    .map_err(|e| Invalid(format!("{e:#}")))?;
                if let MapSource::Cache { error } = source {
                    eprintln!(
                        "warning: the metastore is unreachable ({error}); serving from the last \
                         known cluster map {} and retrying every {} s",
                        cache.path.display(),
                        METASTORE_REFRESH.as_secs()
                    );
                }
                Some(live)
            }
            None => None,
        };
        let keys = NodeKeys {
            role: "root".into(),
            api_url: cluster
                .advertise_url
                .clone()
                .unwrap_or_else(|| format!("http://{}", config.addr)),
            collection: collection.clone(),
            shard: None,
            shards: None,
            generation: None,
            ready: true,
        };
        let membership = Membership::start(cluster.membership("root"), &keys).await?;
        let mut view = membership.view();
        let deadline = tokio::time::Instant::now() + cluster.discovery_timeout;
        let from_map = live_map
            .as_ref()
            .and_then(|m| m.get().collection(&collection).cloned());
        let shards = match from_map {
            Some(c) => {
                if c.hash_scheme != crate::cluster::routing::HASH_SCHEME {
                    return Err(Invalid(format!(
                        "collection {collection:?} is routed by {}; this binary routes by {}",
                        c.hash_scheme,
                        crate::cluster::routing::HASH_SCHEME
                    ))
                    .into());
                }
                c.shards.len() as u32
            }
            None => {
                let _ = tokio::time::timeout_at(
                    deadline,
                    view.wait_for(|v| v.announced_shards(&collection) != Ok(None)),
                )
                .await
                .is_ok();
                let v = view.borrow().clone();
                match v.announced_shards(&collection) {
                    Err(e) => return Err(Invalid(e).into()),
                    Ok(Some(n)) => n,
                    _ => {
                        return Err(Invalid(format!(
                            "no leaf of collection {collection:?} announced its shard count \
                             by gossip within {} ms{}",
                            cluster.discovery_timeout.as_millis(),
                            if live_map.is_some() {
                                " and the metastore does not know the collection"
                            } else {
                                ""
                            }
                        ))
                        .into())
                    }
                }
            }
        };
        let replica_map = {
            let collection = collection.clone();
            let live_map = live_map.clone();
            move |v: &Arc<ClusterView>| {
                crate::cluster::membership::replica_map(
                    v,
                    live_map.as_ref().map(|m| m.get()).as_deref(),
                    &collection,
                    shards,
                )
            }
        };
        let complete = tokio::time::timeout_at(
            deadline,
            view.wait_for(|v| replica_map(v).iter().all(|r| !r.is_empty())),
        )
        .await
        .is_ok();
        if !complete {
            eprintln!(
                "warning: after {} ms, shards {:?} have no live replica; serving without them \
                 until one joins",
                cluster.discovery_timeout.as_millis(),
                replica_map(&view.borrow().clone())
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.is_empty())
                    .map(|(s, _)| s)
                    .collect::<Vec<_>>()
            );
        }
        let initial = replica_map(&view.borrow_and_update().clone());
        let options = RootOptions {
            timeout: Duration::from_secs(config.limits.request_timeout_secs),
            leaf_timeout,
            allow_partial,
            stats_mode: stats,
        };
        let root = Root::connect_http(initial, model, options).await?;
        let state = Arc::new(RootState {
            root,
            ready: AtomicBool::new(false),
            token: config.admin_token.clone(),
        });
        let following = state.clone();
        tokio::spawn(async move {
            while view.changed().await.is_ok() {
                let next = replica_map(&view.borrow_and_update().clone());
                tracing::info!("membership changed: replicas {next:?}");
                // New replicas are asked who they are.
                if let Err(e) = following.root.set_replicas(next).await {
                    tracing::error!("{e:#}");
                }
            }
        });
        let _refresh = live_map
            .as_ref()
            .map(|m| m.spawn_refresh(METASTORE_REFRESH));
        let result = crate::api::cluster::serve_root(state, config.addr, &config.limits, |bound| {
            eprintln!(
                "rankd root is serving {shards} shards of {collection:?} (replicas by gossip) on \
                 http://{bound}/"
            )
        })
        .await;
        let _ = membership.shutdown().await;
        result
    })
}

/// Serves a root over the leaves at `shards`.
fn serve_root(
    config: Config,
    shards: Vec<Vec<String>>,
    model: Option<&Path>,
    leaf_timeout: Duration,
    allow_partial: bool,
    stats: StatsMode,
) -> anyhow::Result<()> {
    if shards.is_empty() {
        return Err(Invalid("--role root needs --shard URL for every shard".into()).into());
    }
    let model = load_model(model)?;
    let options = RootOptions {
        timeout: Duration::from_secs(config.limits.request_timeout_secs),
        leaf_timeout,
        allow_partial,
        stats_mode: stats,
    };
    let n = shards.len();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let root = Root::connect_http(shards, model, options).await?;
        let state = Arc::new(RootState {
            root,
            ready: AtomicBool::new(false),
            token: config.admin_token.clone(),
        });
        crate::api::cluster::serve_root(state, config.addr, &config.limits, |bound| {
            eprintln!("rankd root is serving {n} shards on http://{bound}/")
        })
        .await
    })
}

/// Serves `index` with `config` until SIGTERM or Ctrl-C. First removes what a crashed writer
/// left in the data directory (`crate::admin::recovery`), so the manifest is current before
/// the link scores are checked against it.
pub fn serve_index(index: TextIndex, config: Config, leaf: bool) -> anyhow::Result<()> {
    serve_index_with(index, config, leaf, None, None)
}

/// [`serve_index`], a leaf also joining the gossip when `gossip` says how, and following a
/// store's generations when `following` says which.
fn serve_index_with(
    index: TextIndex,
    config: Config,
    leaf: bool,
    gossip: Option<LeafGossip>,
    following: Option<Following>,
) -> anyhow::Result<()> {
    let recovery = crate::admin::recovery::recover(&index)?;
    if !recovery.is_empty() {
        eprintln!(
            "recovered from an interrupted write: removed {} temporary and {} uncommitted \
             index files{}",
            recovery.temp_files.len(),
            recovery.segment_files,
            if recovery.manifest_rewritten {
                "; rewrote manifest.json, which lagged behind the index"
            } else {
                ""
            }
        );
    }
    if recovery.index_busy {
        tracing::info!(
            "another process is writing the index in {}; its files were left alone",
            index.dir.display()
        );
    }
    let docs = index.num_docs();
    let (links, links_stale) = match crate::links::load_for_serving(&index) {
        Ok(Some((l, stale))) => {
            if stale {
                eprintln!(
                    "warning: the link scores predate the last change of the index: serving \
                     them for the documents they cover; POST /admin/graph (or `rankd graph`) \
                     recomputes them"
                );
            }
            (Some(l), stale)
        }
        Ok(None) => (None, false),
        Err(e) => {
            eprintln!("warning: serving without link scores: {e:#}");
            (None, false)
        }
    };
    if links.is_none() {
        eprintln!("note: no link scores loaded; `rankd graph` computes them");
    }
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let url = config.database_url();
        let db = Db::open(&url).await?;
        tracing::info!("database: {}", redact(&url));
        let ops = Ops::new(db, config.admin_token.as_deref(), config.limits.clone());
        let auth_failures = FailureThrottle::new(config.limits.admin_auth_failures_per_minute);
        ops.link_freshness.locked().stale_at_start = links_stale;
        if ops.token.is_none() {
            eprintln!("note: the admin API is disabled; set RANKD_ADMIN_TOKEN to enable it");
        }
        let loaded = crate::admin::models::sync_and_load(&ops.db, &index.dir)
            .await
            .context("cannot read the model registry")?;
        let reranker = loaded.model;
        match (&reranker, &loaded.error) {
            (Some(m), _) => eprintln!("reranking with model {} ({})", m.id(), m.path.display()),
            (None, Some(e)) => tracing::error!("{e}"),
            (None, None) => {
                eprintln!("note: no active reranker; `rankd train` or POST /admin/train makes one")
            }
        }
        crate::metrics::set_active_model(reranker.as_ref().map(|m| m.id()));
        let engine = crate::search::Engine::new(index)
            .with_links(links)
            .with_model(reranker);
        if following.is_some() {
            let held = crate::cluster::generation::local_generation(&engine.index.dir)?;
            engine.set_store_generation(held.map_or(0, |m| m.generation));
        }
        let state = Arc::new(AppState {
            engine,
            ready: AtomicBool::new(false),
            ops,
            reranker_error: Mutex::new(loaded.error),
            auth_failures,
            leaf,
        });
        if let Some(f) = following {
            tokio::spawn(crate::cluster::generation::follow(
                f.store,
                f.shard,
                state.clone(),
                f.interval,
            ));
        }
        let (bound_tx, bound_rx) = tokio::sync::oneshot::channel();
        let _gossip = gossip.map(|g| {
            let state = state.clone();
            tokio::spawn(async move {
                // A leaf outside the gossip is invisible to its roots: stop rather than
                // serve nobody.
                if let Err(e) = g.run(bound_rx, state).await {
                    eprintln!("error: {e:#}");
                    std::process::exit(1);
                }
            })
        });
        api::serve(state, config.addr, |bound| {
            eprintln!(
                "rankd is serving {docs} documents on http://{bound}/ (try /search?q=iterator)"
            );
            let _ = bound_tx.send(bound);
        })
        .await
    })
}
