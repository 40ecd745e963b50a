//! `rankd serve`: open the index and the database and serve the HTTP API. Settings come from
//! flags, `RANKD_*` variables and a TOML file, in that precedence (`crate::config`).

use crate::sync::Recover;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use crate::admin::auth::AdminToken;
use crate::admin::Ops;
use crate::api::cluster::RootState;
use crate::api::{self, AppState};
use crate::cluster::models::CollectionModels;
use crate::cluster::node::{self, ClusterOptions, Following, GossipRoot, LeafGossip};
use crate::cluster::primary::Primary;
use crate::cluster::root::{RootOptions, StatsMode};
use crate::config::{Config, Flags};
use crate::db::{redact, Db};
use crate::error::Invalid;
use crate::secret::Trust;
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
    #[arg(long, default_value_t = RootOptions::default().leaf_timeout.as_millis() as u64)]
    pub leaf_timeout_ms: u64,
    /// With `--role root`: answer without the shards that have no live replica (the answer
    /// says `partial: true` and names them) instead of a 503.
    #[arg(long, default_value_t = RootOptions::default().allow_partial, action = clap::ArgAction::Set)]
    pub allow_partial_results: bool,
    /// With `--role root`: adaptive replica selection: searches call a replica clearly slower
    /// than its shard's fastest lately (over 2× and 1 ms more) after the others; `false`:
    /// rendezvous order only.
    #[arg(long, default_value_t = RootOptions::default().adaptive_replicas, action = clap::ArgAction::Set)]
    pub adaptive_replicas: bool,
    /// With `--role root`: a reranker's model file (as `rankd train` writes it), registered
    /// in the collection's model registry and activated when the collection has no active
    /// model (then `/admin/models` decides).
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
    #[arg(long, default_value = node::DEFAULT_COLLECTION)]
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
    #[arg(long, default_value_t = node::DEFAULT_DISCOVERY_TIMEOUT.as_millis() as u64)]
    pub discovery_timeout_ms: u64,
    /// With `--role root`: where collection statistics come from: `gather` asks every shard
    /// per search; `table` keeps each shard's whole statistics table per index generation
    /// and sums it at the root (docs/BENCHMARKS.md compares them).
    #[arg(long, value_enum, default_value_t = RootOptions::default().stats_mode)]
    pub stats: StatsMode,
    /// With `--role leaf`: follow the generations `rankd publish` writes to this object
    /// store (`s3://BUCKET[/PREFIX]`, `file:///PATH` or a directory) for `--shard-id`: fetch
    /// the newest before serving, then switch to each new one while serving. The data
    /// directory is then a replica: its admin API is off (write to the publishing index).
    #[arg(long, env = "RANKD_STORE")]
    pub store: Option<String>,
    /// With `--store`: this leaf is the shard's primary: it takes the shard's writes,
    /// publishes each one to the store as the shard's next generation before acknowledging
    /// it, and the other leaves started with `--store` for the shard follow it.
    #[arg(long, requires = "store")]
    pub primary: bool,
    /// With `--store` and `--metastore`: the shard's leaves started with this flag choose
    /// their primary through the metastore's lease: the holder takes the writes, the others
    /// follow the store, and one of them takes over within a few seconds when the primary
    /// dies.
    #[arg(long, requires_all = ["store", "metastore"], conflicts_with = "primary")]
    pub elect_primary: bool,
    /// With `--store`: how often to look for a new generation.
    #[arg(long, default_value_t = node::DEFAULT_POLL.as_millis() as u64)]
    pub poll_ms: u64,
    /// With `--role leaf` or `root`: the file holding the cluster key, the secret every call
    /// between the collection's nodes carries [env: RANKD_CLUSTER_KEY_FILE; or the key itself
    /// in RANKD_CLUSTER_KEY; or `cluster_key_file` / `cluster_key` in the configuration
    /// file]. Distinct from the admin token; the same on every node of the collection.
    #[arg(long, value_name = "PATH")]
    pub cluster_key_file: Option<PathBuf>,
    /// Serve HTTPS with this certificate chain (PEM, the server's certificate first; every
    /// role). Needs `--tls-key` [env: RANKD_TLS_CERT, read with the configuration].
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of `--tls-cert` (PEM: PKCS#8, PKCS#1 or SEC1) [env: RANKD_TLS_KEY].
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// With `--role root`: the CA certificates (PEM) trusted for the leaves' `https://` URLs
    /// [env: RANKD_TLS_CA; default: the system's].
    #[arg(long, value_name = "PEM")]
    pub tls_ca: Option<PathBuf>,
    /// With `--role leaf` or `root`: run without a cluster key (a leaf then answers anyone
    /// its cluster calls, which read every document of its shard). Only on a loopback
    /// `--addr`: for tests on one machine.
    #[arg(long)]
    pub insecure_cluster: bool,
    /// Threads that serve requests (default: one per core).
    #[arg(long, env = "RANKD_WORKER_THREADS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub worker_threads: Option<u16>,
    /// The sentence-transformers directory of dense and hybrid search: given, the documents
    /// without a vector are embedded in the background (default: the model that computed
    /// the stored vectors, which are then kept up to date; without stored vectors, none: run
    /// `rankd embed` once, or give this). A server never downloads a model.
    #[arg(long, env = "RANKD_EMBEDDER_DIR")]
    pub embedder: Option<PathBuf>,
    /// Serve the stored document vectors only: do not embed documents added or changed
    /// while serving (nor any, when none are stored).
    #[arg(long)]
    pub no_embed: bool,
}

/// The server's runtime: `threads` workers, or one per core.
fn runtime(threads: Option<u16>) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = threads {
        builder.worker_threads(usize::from(n));
    }
    Ok(builder.enable_all().build()?)
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
        cluster_key_file: args.cluster_key_file,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        tls_ca: args.tls_ca,
    })
    .map_err(|e| Invalid(format!("{e:#}")))?;
    let trust = match args.role {
        Role::Single => None,
        Role::Leaf | Role::Root => Some(cluster_trust(&config, args.insecure_cluster)?),
    };
    let cluster = ClusterOptions {
        gossip: args.gossip,
        seeds: args.seeds,
        node_id: args.node_id,
        collection: args.collection,
        shard_id: args.shard_id,
        advertise_url: args.advertise_url,
        scheme: config.scheme(),
        metastore: args.metastore,
        discovery_timeout: Duration::from_millis(args.discovery_timeout_ms),
        gossip_key: trust.as_ref().and_then(Trust::key).map(|k| *k.gossip_key()),
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
    if args.role == Role::Root {
        let options = RootOptions {
            timeout: Duration::from_secs(config.limits.request_timeout_secs),
            leaf_timeout: Duration::from_millis(args.leaf_timeout_ms),
            allow_partial: args.allow_partial_results,
            adaptive_replicas: args.adaptive_replicas,
            stats_mode: args.stats,
            key: trust.as_ref().and_then(Trust::key).cloned(),
            tls: config
                .tls_ca
                .as_deref()
                .map(|ca| crate::tls::client_config(Some(ca)))
                .transpose()
                .map_err(|e| Invalid(format!("--tls-ca: {e:#}")))?,
            ..RootOptions::default()
        };
        let root_threads = args.worker_threads;
        let model = args
            .model
            .as_deref()
            .map(|path| {
                crate::search::ActiveModel::load(path)
                    .map_err(|e| Invalid(format!("--model {}: {e}", path.display())))
            })
            .transpose()?;
        if cluster.gossip.is_some() {
            if !args.shards.is_empty() {
                return Err(Invalid(
                    "--role root takes its shards from --shard or from --gossip, not both".into(),
                )
                .into());
            }
            return serve_root_gossip(config, cluster, model, args.model, options, root_threads);
        }
        let shards = args
            .shards
            .iter()
            .map(|s| s.split(',').map(|u| u.trim().to_string()).collect())
            .collect();
        return serve_root(
            config,
            shards,
            (model, args.model),
            &cluster.collection,
            options,
            root_threads,
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
    let poll = Duration::from_millis(args.poll_ms);
    let (following, primary) = match (args.store, cluster.shard_id) {
        (Some(url), Some(shard)) if args.primary => (
            None,
            Some(Arc::new({
                let primary = Primary::start(&url, shard, &config.data_dir, poll)?;
                match &cluster.metastore {
                    Some(m) => primary.recording(Arc::new(crate::cluster::primary::Recorder::new(
                        m,
                        &cluster.collection,
                    ))),
                    None => primary,
                }
            })),
        ),
        (Some(url), Some(shard)) => (
            Some(Following::start(&url, shard, &config.data_dir, poll)?),
            None,
        ),
        (Some(_), None) => return Err(Invalid("--store needs --shard-id".into()).into()),
        (None, _) => (None, None),
    };
    // A candidate for the shard's primary follows the store until the election makes it
    // the primary (`crate::cluster::election`); its admin API stays on for then.
    let election = match (&following, args.elect_primary) {
        (Some(_), true) => {
            let held = crate::cluster::generation::local_generation(&config.data_dir)?;
            let gossip = cluster
                .gossip
                .expect("--metastore needs --gossip, checked above");
            Some(crate::cluster::election::Election {
                metastore_url: cluster.metastore.clone().expect("required by clap"),
                collection: cluster.collection.clone(),
                shard: cluster
                    .shard_id
                    .expect("--store needs --shard-id, checked above"),
                shards: held.map_or(1, |m| m.shards),
                node_id: cluster
                    .node_id
                    .clone()
                    .unwrap_or_else(|| format!("leaf@{gossip}")),
                ttl: crate::cluster::election::DEFAULT_TTL,
                poll,
            })
        }
        _ => None,
    };
    // Which shard of how many the leaf serves: its writes refuse documents of other shards.
    let shard = match (&primary, &following) {
        (Some(p), _) => Some((p.shard(), p.shards())),
        (None, Some(_)) => crate::cluster::generation::local_generation(&config.data_dir)?
            .map(|m| (m.shard, m.shards)),
        (None, None) if args.role == Role::Leaf => crate::cluster::shard_of_dir(&config.data_dir)?,
        (None, None) => None,
    };
    let mut config = config;
    if following.is_some() && election.is_none() && config.admin_token.is_some() {
        eprintln!(
            "note: the admin API is off: this leaf's index follows a store (write to the \
             publishing index)"
        );
        config.admin_token = None;
    }
    let gossip = match (args.role, cluster.gossip) {
        (Role::Leaf, Some(_)) => {
            let Some(shard) = cluster.shard_id else {
                return Err(Invalid("--role leaf --gossip needs --shard-id S".into()).into());
            };
            Some(LeafGossip::new(cluster, shard, &config.data_dir)?)
        }
        (Role::Single, Some(_)) => {
            return Err(Invalid("--gossip applies to --role leaf and --role root".into()).into())
        }
        _ => None,
    };
    let index = TextIndex::open(&config.data_dir, index_config)?;
    // A single index and each leaf hold their documents' vectors; a root merges the
    // leaves' nearest documents.
    let dense = (args.role != Role::Root).then(|| DenseJob {
        options: crate::dense::job::JobOptions {
            embedder: args.embedder,
            compute: !args.no_embed,
            ..Default::default()
        },
        retrain: None,
    });
    serve_index_with(
        index,
        config,
        LeafParts {
            trust: trust.filter(|_| args.role == Role::Leaf),
            gossip,
            following,
            shard,
            primary,
            election,
        },
        args.worker_threads,
        dense,
    )
}

/// What makes a served index a leaf of a collection (all `None` for a single node).
#[derive(Default)]
pub(crate) struct LeafParts {
    /// The cluster key callers of `/cluster/v1` must hold.
    trust: Option<Trust>,
    gossip: Option<LeafGossip>,
    /// A replica following a store's generations.
    following: Option<Following>,
    /// Which shard of how many it serves.
    shard: Option<(u32, u32)>,
    /// The shard's primary, publishing its writes to the store.
    primary: Option<Arc<Primary>>,
    /// A candidate for the shard's primary through the metastore (it follows meanwhile).
    election: Option<crate::cluster::election::Election>,
}

/// Runs `retrain` on the served engine, then serves the model the registry holds active
/// (the one it trained, when the guard let it).
fn retrain_and_serve(
    state: &AppState,
    runtime: &tokio::runtime::Handle,
    retrain: Retrain,
) -> anyhow::Result<()> {
    let engine = &state.engine;
    retrain(engine)?;
    let loaded = runtime.block_on(crate::admin::models::sync_and_load(
        &state.ops.db,
        &engine.index.dir,
    ))?;
    if let Some(model) = loaded.model {
        let id = model.id().to_string();
        if engine.model().is_none_or(|m| m.id() != id) {
            engine.set_model(Some(Arc::new(model)));
            *state.reranker_error.locked() = None;
            crate::metrics::set_active_model(Some(&id));
            eprintln!("reranking with model {id}");
        }
    }
    Ok(())
}

/// How a leaf or root trusts its peers: the configured cluster key, or none with
/// `--insecure-cluster`, which only a loopback address may run with (its cluster calls would
/// otherwise answer anyone on the network with every document of the shard).
fn cluster_trust(config: &Config, insecure: bool) -> Result<Trust, Invalid> {
    match (&config.cluster_key, insecure) {
        (Some(_), true) => Err(Invalid(
            "--insecure-cluster and a cluster key contradict each other: drop one".into(),
        )),
        (Some(key), false) => Ok(Trust::Key(key.clone())),
        (None, true) if config.addr.ip().is_loopback() => {
            eprintln!(
                "warning: --insecure-cluster: cluster calls carry no key (loopback tests only)"
            );
            Ok(Trust::Insecure)
        }
        (None, true) => Err(Invalid(format!(
            "--insecure-cluster is only for a loopback --addr, not {}: set the cluster key",
            config.addr
        ))),
        (None, false) => Err(Invalid(
            "a leaf or root needs the cluster key, the same on every node of the collection: \
             --cluster-key-file PATH, RANKD_CLUSTER_KEY_FILE, RANKD_CLUSTER_KEY, or \
             cluster_key_file in the configuration file (--insecure-cluster runs without one \
             on a loopback address, for tests)"
                .into(),
        )),
    }
}

/// A root's event store: the database of `config` (by default the SQLite file in the root's
/// data directory, which is created), its impression writer and retention.
async fn root_events(config: &Config) -> anyhow::Result<crate::events::EventStore> {
    if config.database_url.is_none() {
        std::fs::create_dir_all(&config.data_dir).with_context(|| {
            format!(
                "cannot create the data directory {}",
                config.data_dir.display()
            )
        })?;
    }
    let url = config.database_url();
    let db = Db::open(&url).await?;
    tracing::info!("database: {}", redact(&url));
    tokio::spawn(crate::events::EventStore::run_retention(
        db.clone(),
        config.events.retention_days,
    ));
    Ok(crate::events::EventStore::start(db, config.events.clone()))
}

/// Serves a root whose shards' replicas come from the gossip ([`GossipRoot`]).
fn serve_root_gossip(
    config: Config,
    cluster: ClusterOptions,
    model: Option<crate::search::ActiveModel>,
    model_path: Option<PathBuf>,
    options: RootOptions,
    threads: Option<u16>,
) -> anyhow::Result<()> {
    let tls = config
        .server_tls()
        .map_err(|e| Invalid(format!("--tls-cert/--tls-key: {e:#}")))?;
    let runtime = runtime(threads)?;
    runtime.block_on(async move {
        let api_url = format!("{}://{}", config.scheme(), config.addr);
        let flag = model.as_ref().map(|m| m.reranker.clone());
        let node = GossipRoot::start(&cluster, &config.data_dir, api_url, model, options).await?;
        let events = root_events(&config).await?;
        let models = Arc::new(match &cluster.metastore {
            Some(url) => CollectionModels::in_metastore(&cluster.collection, url),
            None => CollectionModels::local(&cluster.collection, events.db.clone()),
        });
        let following = follow_models(&models, &node.root, flag.as_ref(), &model_path).await;
        let state = Arc::new(RootState {
            root: node.root.clone(),
            ready: AtomicBool::new(false),
            token: config.admin_token.as_deref().map(AdminToken::new),
            jobs: crate::admin::jobs::JobRunner::new(events.db.clone()),
            events,
            auth_failures: crate::admin::auth::FailureThrottle::new(
                config.limits.admin_auth_failures_per_minute,
            ),
            models,
        });
        let (shards, collection) = (node.shards, &cluster.collection);
        let scheme = config.scheme();
        let result =
            crate::api::cluster::serve_root(state, config.addr, &config.limits, tls, |bound| {
                eprintln!(
                    "rankd root is serving {shards} shards of {collection:?} (replicas by \
                     gossip) on {scheme}://{bound}/"
                )
            })
            .await;
        following.abort();
        node.shutdown().await;
        result
    })
}

/// Serves a root over the leaves at `shards`.
fn serve_root(
    config: Config,
    shards: Vec<Vec<String>>,
    (model, model_path): (Option<crate::search::ActiveModel>, Option<PathBuf>),
    collection: &str,
    options: RootOptions,
    threads: Option<u16>,
) -> anyhow::Result<()> {
    if shards.is_empty() {
        return Err(Invalid("--role root needs --shard URL for every shard".into()).into());
    }
    let n = shards.len();
    let tls = config
        .server_tls()
        .map_err(|e| Invalid(format!("--tls-cert/--tls-key: {e:#}")))?;
    let runtime = runtime(threads)?;
    runtime.block_on(async move {
        let flag = model.as_ref().map(|m| m.reranker.clone());
        let root =
            Arc::new(crate::cluster::root::Root::connect_http(shards, model, options).await?);
        let events = root_events(&config).await?;
        let models = Arc::new(CollectionModels::local(collection, events.db.clone()));
        let following = follow_models(&models, &root, flag.as_ref(), &model_path).await;
        let state = Arc::new(RootState {
            root,
            ready: AtomicBool::new(false),
            token: config.admin_token.as_deref().map(AdminToken::new),
            jobs: crate::admin::jobs::JobRunner::new(events.db.clone()),
            events,
            auth_failures: crate::admin::auth::FailureThrottle::new(
                config.limits.admin_auth_failures_per_minute,
            ),
            models,
        });
        let scheme = config.scheme();
        let result =
            crate::api::cluster::serve_root(state, config.addr, &config.limits, tls, |bound| {
                eprintln!("rankd root is serving {n} shards on {scheme}://{bound}/")
            })
            .await;
        following.abort();
        result
    })
}

/// Registers the `--model` flag's model in the collection's registry (activated when the
/// collection has none), serves the registry's active model, and follows it. A registry that
/// cannot be read at start is followed in the background meanwhile: the root serves the flag's
/// model, or none, until it can.
async fn follow_models(
    models: &Arc<CollectionModels>,
    root: &Arc<crate::cluster::root::Root>,
    flag: Option<&crate::rerank::Reranker>,
    path: &Option<PathBuf>,
) -> tokio::task::JoinHandle<()> {
    let from = path.as_ref().map(|p| p.display().to_string());
    let flag = flag.zip(from.as_deref());
    match models.start(root, flag).await {
        Ok(()) => match root.model() {
            Some(m) => eprintln!("reranking with the collection's active model {}", m.id()),
            None => eprintln!("the collection has no active model: first-phase results"),
        },
        Err(e) => eprintln!(
            "warning: cannot read the collection's model registry ({e:#}); following it in the \
             background"
        ),
    }
    models.spawn_follow(root.clone())
}

/// Serves `index` with `config` until SIGTERM or Ctrl-C. First removes what a crashed writer
/// left in the data directory (`crate::admin::recovery`), so the manifest is current before
/// the link scores are checked against it.
pub(crate) fn serve_index(
    index: TextIndex,
    config: Config,
    leaf: Option<Trust>,
    dense: DenseJob,
) -> anyhow::Result<()> {
    let leaf = LeafParts {
        trust: leaf,
        ..LeafParts::default()
    };
    serve_index_with(index, config, leaf, None, Some(dense))
}

/// Trains a reranker on the serving engine once its documents' vectors are ready, storing it
/// and asking for its activation when the guard lets it (`crate::search::model`): the demo's,
/// whose first reranker trained before the vectors existed.
pub(crate) type Retrain = Box<dyn FnOnce(&crate::search::Engine) -> anyhow::Result<()> + Send>;

/// The embedding job of a server (`crate::dense::job`), and what follows when its vectors are
/// ready.
pub(crate) struct DenseJob {
    pub options: crate::dense::job::JobOptions,
    /// Run once, the first time every document has a vector while the active reranker does
    /// not read the dense similarity; the model it activates is then served.
    pub retrain: Option<Retrain>,
}

/// [`serve_index`], a leaf also joining the gossip when `gossip` says how, following a
/// store's generations when `following` says which, and running the embedding job
/// (`crate::dense::job`) when `dense` says how.
fn serve_index_with(
    index: TextIndex,
    config: Config,
    leaf: LeafParts,
    threads: Option<u16>,
    dense: Option<DenseJob>,
) -> anyhow::Result<()> {
    let LeafParts {
        trust: leaf,
        gossip,
        following,
        shard,
        primary,
        election,
    } = leaf;
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
    let tls = config
        .server_tls()
        .map_err(|e| Invalid(format!("--tls-cert/--tls-key: {e:#}")))?;
    let runtime = runtime(threads)?;
    runtime.block_on(async move {
        let url = config.database_url();
        let db = Db::open(&url).await?;
        tracing::info!("database: {}", redact(&url));
        let events = crate::events::EventStore::start(db.clone(), config.events.clone());
        tokio::spawn(crate::events::EventStore::run_retention(
            db.clone(),
            config.events.retention_days,
        ));
        let ops = Ops::new(db, config.admin_token.as_deref(), config.limits.clone());
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
        if following.is_some() || primary.is_some() {
            let held = crate::cluster::generation::local_generation(&engine.index.dir)?;
            engine.set_store_generation(held.map_or(0, |m| m.generation));
        }
        let state = Arc::new(
            AppState::new(engine, ops, events, leaf, loaded.error).with_shard(
                shard,
                primary,
                following.is_some(),
            ),
        );
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        if let Some(DenseJob { options, retrain }) = dense {
            let (state, stopping) = (state.clone(), stopping.clone());
            let runtime = tokio::runtime::Handle::current();
            let retrain = std::sync::Mutex::new(retrain);
            // The job's thread is not joined at exit: its writes are atomic, so stopping it
            // mid-run loses only the run.
            std::thread::Builder::new()
                .name("embedding".into())
                .spawn(move || {
                    let engine = &state.engine;
                    crate::dense::job::run(
                        &engine.index,
                        &engine.dense_status,
                        &options,
                        &|d| {
                            engine.set_dense(Some(d));
                            let ready = matches!(
                                engine.dense_status.get(),
                                crate::dense::Progress::Ready { .. }
                            );
                            // Trained again unless the active reranker already reads
                            // these vectors' similarity.
                            let reads = engine.model().is_some_and(|m| engine.dense_serves(&m));
                            if let Some(retrain) = retrain.locked().take_if(|_| ready && !reads) {
                                if let Err(e) = retrain_and_serve(&state, &runtime, retrain) {
                                    eprintln!("warning: retraining the reranker: {e:#}");
                                }
                            }
                        },
                        &|| stopping.load(std::sync::atomic::Ordering::Relaxed),
                    )
                })
                .context("cannot start the embedding thread")?;
        }
        crate::api::admin::experiments::resume(&state)
            .await
            .context("cannot read the running experiment")?;
        tokio::spawn(crate::api::admin::experiments::watch(state.clone()));
        let (elected_tx, elected_rx) = tokio::sync::oneshot::channel::<std::net::SocketAddr>();
        match (following, election) {
            (Some(f), Some(election)) => {
                let (state, scheme) = (state.clone(), config.scheme());
                tokio::spawn(async move {
                    let Ok(bound) = elected_rx.await else { return };
                    let slot = state.primary.clone();
                    let url = format!("{scheme}://{bound}");
                    crate::cluster::election::run(election, f.store, state, slot, url).await
                });
            }
            (Some(f), None) => {
                tokio::spawn(crate::cluster::generation::follow(
                    f.store,
                    f.shard,
                    state.clone(),
                    f.interval,
                ));
            }
            (None, _) => {}
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
        let log = state.events.log.clone();
        let scheme = config.scheme();
        api::serve(state, config.addr, tls, |bound| {
            eprintln!(
                "rankd is serving {docs} documents on {scheme}://{bound}/ (try \
                 /search?q=iterator)"
            );
            let _ = bound_tx.send(bound);
            let _ = elected_tx.send(bound);
        })
        .await?;
        stopping.store(true, std::sync::atomic::Ordering::Relaxed);
        // The impressions of the last answers are still queued: write them before exiting.
        if !log.flush(std::time::Duration::from_secs(10)).await {
            tracing::warn!("impressions still queued at exit were not written");
        }
        Ok(())
    })
}
