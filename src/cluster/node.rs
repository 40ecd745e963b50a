//! A cluster node's start-up and its duties beside the HTTP API: a leaf following a store's
//! generations, joining the gossip, registering in the metastore and announcing its
//! readiness; a root discovering its shards' replicas (metastore and gossip) and following
//! the membership as it changes.
//!
//! The `rankd serve` command maps its flags to [`ClusterOptions`], checks how they combine
//! and calls these, then serves the HTTP API; nothing here knows of flags or routes. A leaf's
//! state is seen through [`LeafStatus`], which the API's state implements.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::generation::{self, Store};
use super::membership::{keys, ClusterView, Membership, MembershipConfig, NodeKeys};
use super::metastore::{LiveMap, MapCache, MapSource, Metastore, NodeRecord, ReplicaState};
use super::root::{Root, RootOptions};
use crate::error::Invalid;
use crate::search::ActiveModel;

/// How long one metastore connection or read may take.
pub(crate) const METASTORE_TIMEOUT: Duration = Duration::from_secs(3);
/// How often a root reads the metastore again.
pub(crate) const METASTORE_REFRESH: Duration = Duration::from_secs(5);
/// The longest pause between a leaf's attempts to register in the metastore.
const REGISTER_RETRY_MAX: Duration = Duration::from_secs(30);
/// How often a leaf looks for a new generation in its store, unless told otherwise.
pub(crate) const DEFAULT_POLL: Duration = Duration::from_millis(2000);
/// How long a gossip root waits at start for a live replica of every shard, unless told
/// otherwise.
pub(crate) const DEFAULT_DISCOVERY_TIMEOUT: Duration = Duration::from_millis(10_000);
/// The collection a node serves or searches, unless told otherwise.
pub(crate) const DEFAULT_COLLECTION: &str = "main";

/// How a node takes part in a cluster's gossip and metastore.
#[derive(Debug, Clone)]
pub(crate) struct ClusterOptions {
    /// The gossip (chitchat, UDP) address; `None`: no gossip.
    pub gossip: Option<SocketAddr>,
    /// Gossip addresses to join through.
    pub seeds: Vec<String>,
    /// Default `ROLE@GOSSIP_ADDR`.
    pub node_id: Option<String>,
    pub collection: String,
    /// A leaf's shard.
    pub shard_id: Option<u32>,
    /// The base URL others reach this node's HTTP API at (default: [`Self::scheme`] and the
    /// bound address).
    pub advertise_url: Option<String>,
    /// `https` when the node serves TLS, else `http`.
    pub scheme: &'static str,
    /// `postgres://..` or `sqlite:PATH`.
    pub metastore: Option<String>,
    /// How long a root waits at start for every shard to have a live replica.
    pub discovery_timeout: Duration,
    /// The gossip's members are authenticated with it (`super::gossip_auth`): the cluster
    /// key's; `None` only with `--insecure-cluster`.
    pub gossip_key: Option<[u8; 32]>,
}

impl ClusterOptions {
    fn membership(&self, role: &str) -> MembershipConfig {
        let gossip = self.gossip.expect("checked by the caller");
        let id = self
            .node_id
            .clone()
            .unwrap_or_else(|| format!("{role}@{gossip}"));
        MembershipConfig {
            key: self.gossip_key,
            ..MembershipConfig::new(id, gossip, self.seeds.clone())
        }
    }
}

/// A leaf following a store's generations of one shard.
pub(crate) struct Following {
    pub store: Store,
    pub shard: u32,
    pub interval: Duration,
}

impl Following {
    /// Opens the store at `url` and brings `data_dir` to shard `shard`'s newest generation
    /// before the index is opened. A store out of reach is survived when the directory
    /// already holds a generation (it is served, and the store tried again while serving).
    pub fn start(
        url: &str,
        shard: u32,
        data_dir: &Path,
        interval: Duration,
    ) -> anyhow::Result<Following> {
        let store = Store::open(url)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        match runtime.block_on(generation::bootstrap(&store, data_dir, shard)) {
            Ok(Some(a)) => eprintln!(
                "fetched generation {} of shard {shard} from {url}: {} files, {} bytes ({} \
                 files reused)",
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
            interval: interval.max(Duration::from_millis(10)),
        })
    }
}

/// What a leaf announces as it changes.
pub(crate) trait LeafStatus: Send + Sync + 'static {
    /// Whether it serves searches.
    fn ready(&self) -> bool;
    /// The store generation it serves, when it follows a store.
    fn store_generation(&self) -> Option<u64>;
}

/// What a leaf announces by gossip, and where it registers.
#[derive(Clone)]
pub(crate) struct LeafGossip {
    options: ClusterOptions,
    shard: u32,
    /// The collection's shard count, from `DATA_DIR/../collection.json` when the leaf's data
    /// directory is a shard of a split collection (`rankd ingest --shards`).
    shards: Option<u32>,
}

impl LeafGossip {
    /// A leaf of shard `shard` serving `data_dir`.
    pub fn new(options: ClusterOptions, shard: u32, data_dir: &Path) -> anyhow::Result<LeafGossip> {
        // DATA_DIR is COLLECTION/shards/S when the collection was split by `rankd ingest`.
        let collection = data_dir.parent().and_then(Path::parent);
        let record = match collection {
            Some(dir) => super::read_collection(dir)?,
            None => None,
        };
        let shards = match record {
            Some(c) if shard >= c.shards => {
                return Err(Invalid(format!(
                    "shard {shard}: the collection in {} has {} shards",
                    collection.unwrap_or(data_dir).display(),
                    c.shards
                ))
                .into())
            }
            Some(c) => Some(c.shards),
            None => None,
        };
        Ok(LeafGossip {
            options,
            shard,
            shards,
        })
    }

    /// Joins the gossip once the HTTP address is known, registers in the metastore (in the
    /// background, retried until it succeeds: the leaf serves meanwhile), and mirrors
    /// `status` into the `ready` and `generation` keys until the process ends.
    pub async fn run(
        self,
        bound: tokio::sync::oneshot::Receiver<SocketAddr>,
        status: Arc<dyn LeafStatus>,
    ) -> anyhow::Result<()> {
        let Ok(bound) = bound.await else {
            return Ok(());
        };
        let api_url = self
            .options
            .advertise_url
            .clone()
            .unwrap_or_else(|| format!("{}://{bound}", self.options.scheme));
        let announced = NodeKeys {
            role: "leaf".into(),
            api_url: api_url.clone(),
            collection: self.options.collection.clone(),
            shard: Some(self.shard),
            shards: self.shards,
            generation: status.store_generation(),
            ready: true,
        };
        let config = self.options.membership("leaf");
        let node_id = config.node_id.clone();
        let gossip = config.advertise;
        let membership = Membership::start(config, &announced).await?;
        eprintln!(
            "gossip on udp://{gossip} as {node_id}: shard {} of {:?}",
            self.shard, self.options.collection
        );
        if let Some(url) = &self.options.metastore {
            let record = NodeRecord {
                node_id: node_id.clone(),
                role: "leaf".into(),
                api_url,
                gossip_addr: gossip.to_string(),
                registered_at: crate::db::now_ms(),
            };
            let (leaf, url) = (self.clone(), url.clone());
            tokio::spawn(async move { leaf.register_until_done(&url, &record).await });
        }
        // Readiness, and the store generation a following leaf serves, as they change.
        let mut ready = true;
        let mut generation = status.store_generation();
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let now = status.ready();
            if now != ready {
                ready = now;
                membership
                    .set(keys::READY, if ready { "1" } else { "0" })
                    .await;
            }
            let serving = status.store_generation();
            if serving != generation {
                generation = serving;
                if let Some(g) = generation {
                    membership.set(keys::GENERATION, &g.to_string()).await;
                }
            }
        }
    }

    /// Registers, retrying with a doubling pause (up to [`REGISTER_RETRY_MAX`]) until the
    /// metastore takes it: a leaf started while the metastore is down or busy (leaves
    /// starting together all apply its migrations) registers once it can, and serves
    /// meanwhile. The first failure is a warning, each one is counted, and the success after
    /// failures is said.
    async fn register_until_done(&self, url: &str, record: &NodeRecord) {
        let mut pause = Duration::from_millis(250);
        for attempt in 1u32.. {
            match self.register(url, record).await {
                Ok(()) if attempt == 1 => return,
                Ok(()) => {
                    eprintln!("registered in the metastore at attempt {attempt}");
                    return;
                }
                Err(e) => {
                    crate::metrics::count_metastore_error("register");
                    if attempt == 1 {
                        eprintln!(
                            "warning: cannot register in the metastore (serving meanwhile, \
                             retrying up to every {} s): {e:#}",
                            REGISTER_RETRY_MAX.as_secs()
                        );
                    }
                }
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(REGISTER_RETRY_MAX);
        }
    }

    /// Records the leaf, its collection (when the leaf knows the shard count) and its
    /// replica.
    async fn register(&self, url: &str, node: &NodeRecord) -> anyhow::Result<()> {
        let store = Metastore::connect(url, METASTORE_TIMEOUT).await?;
        let collection = &self.options.collection;
        if let Some(n) = self.shards {
            store.create_collection(collection, n).await?;
        }
        store.register_node(node).await?;
        store
            .upsert_replicas(
                collection,
                &[(self.shard, &node.node_id, ReplicaState::Serving)],
            )
            .await
    }
}

/// A root whose shards' replicas come from the gossip's live view (in rendezvous order),
/// the shard count from the metastore or, without one, from the leaves' keys; started by
/// [`GossipRoot::start`], it follows the membership until [`GossipRoot::shutdown`].
pub(crate) struct GossipRoot {
    pub root: Arc<Root>,
    pub shards: u32,
    membership: Membership,
    following: tokio::task::JoinHandle<()>,
    refresh: Option<tokio::task::JoinHandle<()>>,
}

impl GossipRoot {
    /// Joins the gossip (announcing `api_url` unless `options.advertise_url` says
    /// otherwise), learns the shard count, waits up to `options.discovery_timeout` for a live
    /// replica of every shard (then serves without the missing ones, with a warning), and
    /// connects. The metastore's last map is kept in `data_dir` and started from when the
    /// metastore is unreachable.
    pub async fn start(
        options: &ClusterOptions,
        data_dir: &Path,
        api_url: String,
        model: Option<ActiveModel>,
        root_options: RootOptions,
    ) -> anyhow::Result<GossipRoot> {
        let collection = options.collection.clone();
        let live_map = match &options.metastore {
            Some(url) => {
                let cache = MapCache::in_data_dir(data_dir);
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
            api_url: options.advertise_url.clone().unwrap_or(api_url),
            collection: collection.clone(),
            shard: None,
            shards: None,
            generation: None,
            ready: true,
        };
        let membership = Membership::start(options.membership("root"), &keys).await?;
        let mut view = membership.view();
        let deadline = tokio::time::Instant::now() + options.discovery_timeout;
        let from_map = live_map
            .as_ref()
            .and_then(|m| m.get().collection(&collection).cloned());
        let shards = match from_map {
            Some(c) => {
                if c.hash_scheme != super::routing::HASH_SCHEME {
                    return Err(Invalid(format!(
                        "collection {collection:?} is routed by {}; this binary routes by {}",
                        c.hash_scheme,
                        super::routing::HASH_SCHEME
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
                            options.discovery_timeout.as_millis(),
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
            let live_map = live_map.clone();
            move |v: &Arc<ClusterView>| {
                super::membership::replica_map(
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
                options.discovery_timeout.as_millis(),
                replica_map(&view.borrow().clone())
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.is_empty())
                    .map(|(s, _)| s)
                    .collect::<Vec<_>>()
            );
        }
        let initial = replica_map(&view.borrow_and_update().clone());
        let root = Arc::new(Root::connect_http(initial, model, root_options).await?);
        let following = {
            let root = root.clone();
            tokio::spawn(async move {
                while view.changed().await.is_ok() {
                    let next = replica_map(&view.borrow_and_update().clone());
                    tracing::info!("membership changed: replicas {next:?}");
                    // New replicas are asked who they are.
                    if let Err(e) = root.set_replicas(next).await {
                        tracing::error!("{e:#}");
                    }
                }
            })
        };
        let refresh = live_map
            .as_ref()
            .map(|m| m.spawn_refresh(METASTORE_REFRESH));
        Ok(GossipRoot {
            root,
            shards,
            membership,
            following,
            refresh,
        })
    }

    /// Leaves the gossip and stops following it.
    pub async fn shutdown(self) {
        self.following.abort();
        if let Some(r) = self.refresh {
            r.abort();
        }
        let _ = self.membership.shutdown().await;
    }
}
