//! The cluster metastore (`docs/design/scale-out.md` §9): what is true about a cluster, in
//! PostgreSQL (SQLite too, for single-host clusters and parity tests), and the last map read
//! from it, kept in a file so that serving does not depend on the database being up.
//!
//! Tables (`migrations/{postgres,sqlite}/0003_cluster.sql`): collections (name, shard count,
//! hash scheme), their shards with the current generation, nodes as they registered, replicas
//! (which node holds which shard, in which state) and published generations (manifest key,
//! time). Gossip ([`super::membership`]) says who is alive; these tables say what exists.
//! The queries are written once for sqlx's `Any` driver, as `crate::db`'s are, and the schema
//! is the ops database's migration set, so one database can hold both.
//!
//! **Publishing is a compare-and-set.** [`Metastore::publish_generation`] moves a shard's
//! current generation from the one the publisher saw to its new one in one `UPDATE … WHERE
//! current = expected`: of two publishers starting from the same generation, the database
//! lets exactly one update the row (PostgreSQL re-checks the condition after the first commit;
//! SQLite's write lock serialises them), and the other learns the generation that won.
//!
//! **The database is not on the search path.** A node reads the map at start and then every
//! few seconds; each successful read replaces the map it serves from and is written to a
//! cache file (`crate::durable::write_atomic`: temporary file, fsync, rename). A node that
//! cannot reach the database at start serves from that file with a loud warning, or stops with
//! an error naming the database and the missing file when there is none; a failure mid-run is
//! logged and counted (`rankd_metastore_errors_total`, `rankd_metastore_up 0`) and the last
//! map stays in force.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use sqlx::any::AnyConnectOptions;
use sqlx::Row;

use super::routing::HASH_SCHEME;
use crate::db::{now_ms, redact, Backend, Db};

/// What a node does with a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReplicaState {
    /// Placed on the node, nothing fetched yet.
    Assigned,
    /// Fetching a generation.
    Fetching,
    /// Answering searches.
    Serving,
    /// Serving until enough other replicas are ready, then leaving the shard.
    Draining,
}

impl ReplicaState {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaState::Assigned => "assigned",
            ReplicaState::Fetching => "fetching",
            ReplicaState::Serving => "serving",
            ReplicaState::Draining => "draining",
        }
    }

    fn parse(s: &str) -> anyhow::Result<ReplicaState> {
        Ok(match s {
            "assigned" => ReplicaState::Assigned,
            "fetching" => ReplicaState::Fetching,
            "serving" => ReplicaState::Serving,
            "draining" => ReplicaState::Draining,
            other => anyhow::bail!("unknown replica state {other:?} in the metastore"),
        })
    }
}

/// A node as it registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub node_id: String,
    /// `leaf` or `root`.
    pub role: String,
    pub api_url: String,
    pub gossip_addr: String,
    /// Milliseconds since the epoch.
    pub registered_at: i64,
}

/// One replica of a shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaRecord {
    pub node_id: String,
    pub state: ReplicaState,
}

/// One shard: its current generation and its replicas.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRecord {
    pub shard: u32,
    /// `None` until the first publish.
    pub current_generation: Option<u64>,
    /// The current generation's manifest key.
    pub manifest_key: Option<String>,
    pub replicas: Vec<ReplicaRecord>,
}

/// A collection and its shards (all of them, in order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CollectionRecord {
    pub name: String,
    pub hash_scheme: String,
    pub shards: Vec<ShardRecord>,
}

/// Everything the metastore says about the cluster at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMap {
    pub collections: Vec<CollectionRecord>,
    pub nodes: Vec<NodeRecord>,
    /// When it was read (milliseconds since the epoch).
    pub read_at: i64,
}

impl ClusterMap {
    pub fn collection(&self, name: &str) -> Option<&CollectionRecord> {
        self.collections.iter().find(|c| c.name == name)
    }

    /// The base URLs of the nodes holding `shard` of `collection` in a serving state.
    pub fn replica_urls(&self, collection: &str, shard: u32) -> Vec<String> {
        let Some(c) = self.collection(collection) else {
            return Vec::new();
        };
        let Some(s) = c.shards.iter().find(|s| s.shard == shard) else {
            return Vec::new();
        };
        s.replicas
            .iter()
            .filter(|r| matches!(r.state, ReplicaState::Serving | ReplicaState::Draining))
            .filter_map(|r| self.nodes.iter().find(|n| n.node_id == r.node_id))
            .map(|n| n.api_url.clone())
            .collect()
    }
}

/// What a publish did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// The shard's current generation is now the new one.
    Won,
    /// Another publisher moved the shard first: its current generation is `current`, and
    /// nothing was written.
    Lost { current: Option<u64> },
}

/// Records a published generation in `cluster_generations` (once: a second record of the
/// same generation is a no-op).
async fn insert_generation(
    tx: &mut sqlx::Transaction<'static, sqlx::Any>,
    collection: &str,
    shard: u32,
    generation: u64,
    manifest_key: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO cluster_generations \
         (collection, shard, generation, manifest_key, published_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (collection, shard, generation) DO NOTHING",
    )
    .bind(collection)
    .bind(i64::from(shard))
    .bind(generation as i64)
    .bind(manifest_key)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A connection to the metastore.
#[derive(Clone)]
pub struct Metastore {
    db: Db,
    /// The URL without its password, for messages.
    url: String,
}

impl Metastore {
    /// Connects to `url` (`postgres://…` or `sqlite:…`) within `timeout` and applies the
    /// schema's migrations. The error names the database (password hidden).
    pub async fn connect(url: &str, timeout: Duration) -> anyhow::Result<Metastore> {
        sqlx::any::install_default_drivers();
        let backend = Backend::of_url(url)?;
        let shown = redact(url);
        let options = AnyConnectOptions::from_str(url)
            .with_context(|| format!("invalid metastore URL {shown:?}"))?;
        let pool = crate::db::pool_options(backend, 4).acquire_timeout(timeout);
        // One connection first, outside the pool: a pool that cannot connect reports only
        // that it timed out, this one why ("Connection refused", a bad password, …).
        let probe = async {
            use sqlx::Connection;
            sqlx::AnyConnection::connect_with(&options)
                .await?
                .close()
                .await
        };
        tokio::time::timeout(timeout, probe)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {} ms", timeout.as_millis()))
            .and_then(|r| r.map_err(anyhow::Error::from))
            .with_context(|| format!("cannot connect to the metastore {shown:?}"))?;
        let pool = tokio::time::timeout(timeout, pool.connect_with(options))
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {} ms", timeout.as_millis()))
            .and_then(|r| r.map_err(anyhow::Error::from))
            .with_context(|| format!("cannot connect to the metastore {shown:?}"))?;
        // The ops database's migration set (`crate::db::Db::open` runs the same): the cluster
        // tables are part of it, so a database may serve as both.
        crate::db::migrator(backend)
            .run(&pool)
            .await
            .with_context(|| format!("cannot apply the migrations to the metastore {shown:?}"))?;
        Ok(Metastore {
            db: Db { pool, backend },
            url: shown,
        })
    }

    /// The database, for the tables other modules keep in it (`super::models`).
    pub fn into_db(self) -> Db {
        self.db
    }

    /// The URL, password hidden.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Records a collection of `shards` shards routed by this binary's
    /// [`super::routing::HASH_SCHEME`], and its shards. Recording it again is a no-op; a
    /// collection of that name with another shard count or scheme is refused.
    pub async fn create_collection(&self, name: &str, shards: u32) -> anyhow::Result<()> {
        anyhow::ensure!(shards > 0, "a collection needs at least one shard");
        // Idempotent under concurrency: leaves starting together all create their collection,
        // and on PostgreSQL a read-then-insert lets two of them insert (the second failing on
        // the primary key). The inserts skip what exists; the row read afterwards is checked.
        let mut tx = self.db.begin_write().await?;
        sqlx::query(
            "INSERT INTO cluster_collections (name, shards, hash_scheme, created_at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(i64::from(shards))
        .bind(HASH_SCHEME)
        .bind(now_ms())
        .execute(&mut *tx)
        .await?;
        let row =
            sqlx::query("SELECT shards, hash_scheme FROM cluster_collections WHERE name = $1")
                .bind(name)
                .fetch_one(&mut *tx)
                .await?;
        let (have, scheme): (i64, String) = (row.try_get(0)?, row.try_get(1)?);
        anyhow::ensure!(
            have == i64::from(shards) && scheme == HASH_SCHEME,
            "collection {name:?} already exists with {have} shards routed by {scheme}; \
             asked for {shards} shards routed by {HASH_SCHEME}"
        );
        for shard in 0..shards {
            sqlx::query(
                "INSERT INTO cluster_shards (collection, shard) VALUES ($1, $2) \
                 ON CONFLICT (collection, shard) DO NOTHING",
            )
            .bind(name)
            .bind(i64::from(shard))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Records `node` (again): its role and addresses replace those of its last registration.
    pub async fn register_node(&self, node: &NodeRecord) -> anyhow::Result<()> {
        anyhow::ensure!(
            node.role == "leaf" || node.role == "root",
            "a node's role is leaf or root, not {:?}",
            node.role
        );
        sqlx::query(
            "INSERT INTO cluster_nodes (node_id, role, api_url, gossip_addr, registered_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (node_id) DO UPDATE SET role = excluded.role, \
             api_url = excluded.api_url, gossip_addr = excluded.gossip_addr, \
             registered_at = excluded.registered_at",
        )
        .bind(&node.node_id)
        .bind(&node.role)
        .bind(&node.api_url)
        .bind(&node.gossip_addr)
        .bind(node.registered_at)
        .execute(&self.db.pool)
        .await
        .with_context(|| format!("cannot register node {:?}", node.node_id))?;
        Ok(())
    }

    /// Sets the state of each `(shard, node_id, state)` replica of `collection` (inserting
    /// those not yet recorded), in one transaction. The shard and the node must exist.
    pub async fn upsert_replicas(
        &self,
        collection: &str,
        replicas: &[(u32, &str, ReplicaState)],
    ) -> anyhow::Result<()> {
        let mut tx = self.db.begin_write().await?;
        for (shard, node, state) in replicas {
            sqlx::query(
                "INSERT INTO cluster_replicas (collection, shard, node_id, state, updated_at) \
                 VALUES ($1, $2, $3, $4, $5) \
                 ON CONFLICT (collection, shard, node_id) DO UPDATE SET state = excluded.state, \
                 updated_at = excluded.updated_at",
            )
            .bind(collection)
            .bind(i64::from(*shard))
            .bind(*node)
            .bind(state.as_str())
            .bind(now_ms())
            .execute(&mut *tx)
            .await
            .with_context(|| {
                format!(
                    "cannot record node {node:?} as replica of shard {shard} of {collection:?} \
                     (are the collection and the node registered?)"
                )
            })?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Makes `generation` (with its manifest at `manifest_key`) the current generation of
    /// `shard`, if the shard's current generation is still `expected` (`None`: never
    /// published). Exactly one of several publishers from the same `expected` wins; the
    /// others get [`Publish::Lost`] with the generation that won, and wrote nothing.
    pub async fn publish_generation(
        &self,
        collection: &str,
        shard: u32,
        expected: Option<u64>,
        generation: u64,
        manifest_key: &str,
    ) -> anyhow::Result<Publish> {
        let expected_i = expected.map_or(0, |g| g as i64);
        anyhow::ensure!(
            (generation as i64) > expected_i,
            "generation {generation} does not follow {expected:?}"
        );
        let mut tx = self.db.begin_write().await?;
        let moved = sqlx::query(
            "UPDATE cluster_shards SET current_generation = $1 \
             WHERE collection = $2 AND shard = $3 AND COALESCE(current_generation, 0) = $4",
        )
        .bind(generation as i64)
        .bind(collection)
        .bind(i64::from(shard))
        .bind(expected_i)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if moved == 0 {
            let row = sqlx::query(
                "SELECT current_generation FROM cluster_shards \
                 WHERE collection = $1 AND shard = $2",
            )
            .bind(collection)
            .bind(i64::from(shard))
            .fetch_optional(&mut *tx)
            .await?;
            tx.rollback().await?;
            let Some(row) = row else {
                anyhow::bail!("collection {collection:?} has no shard {shard} in the metastore");
            };
            let current: Option<i64> = row.try_get(0)?;
            return Ok(Publish::Lost {
                current: current.map(|g| g as u64),
            });
        }
        insert_generation(&mut tx, collection, shard, generation, manifest_key).await?;
        tx.commit().await?;
        Ok(Publish::Won)
    }

    /// Records generation `generation` of `shard` (its manifest at `manifest_key`), which a
    /// primary published: the store's create-if-absent put decided it already, so this only
    /// moves the shard's current generation forward to it, never back (records that arrive
    /// out of order leave the newest). False when the metastore does not know the shard yet
    /// (its leaves have not registered the collection).
    pub async fn record_generation(
        &self,
        collection: &str,
        shard: u32,
        generation: u64,
        manifest_key: &str,
    ) -> anyhow::Result<bool> {
        let mut tx = self.db.begin_write().await?;
        let known =
            sqlx::query("SELECT 1 FROM cluster_shards WHERE collection = $1 AND shard = $2")
                .bind(collection)
                .bind(i64::from(shard))
                .fetch_optional(&mut *tx)
                .await?
                .is_some();
        if !known {
            tx.rollback().await?;
            return Ok(false);
        }
        insert_generation(&mut tx, collection, shard, generation, manifest_key).await?;
        sqlx::query(
            "UPDATE cluster_shards SET current_generation = $1 WHERE collection = $2 \
             AND shard = $3 AND COALESCE(current_generation, 0) < $1",
        )
        .bind(generation as i64)
        .bind(collection)
        .bind(i64::from(shard))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Takes or renews, for `node_id` (reached at `api_url`), the lease on the primary of
    /// `shard` of `collection` until `ttl` from now: true when the node holds it after the
    /// call (it held it already, nobody did, or the last holder's lease had expired). One
    /// conditional upsert, so of two nodes asking at once the database lets one take it.
    /// Expiry is read on the nodes' clocks: they must agree within a fraction of `ttl`
    /// (`super::election` leaves a third of it as margin).
    pub async fn lease_primary(
        &self,
        collection: &str,
        shard: u32,
        node_id: &str,
        api_url: &str,
        ttl: Duration,
    ) -> anyhow::Result<bool> {
        let now = now_ms();
        let mut tx = self.db.begin_write().await?;
        let taken = sqlx::query(
            "INSERT INTO cluster_primaries (collection, shard, node_id, api_url, expires_at) \
             VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (collection, shard) DO UPDATE \
             SET node_id = $3, api_url = $4, expires_at = $5 \
             WHERE cluster_primaries.node_id = $3 OR cluster_primaries.expires_at < $6",
        )
        .bind(collection)
        .bind(i64::from(shard))
        .bind(node_id)
        .bind(api_url)
        .bind(now + ttl.as_millis() as i64)
        .bind(now)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        tx.commit().await?;
        Ok(taken == 1)
    }

    /// Gives up `node_id`'s lease on the primary of `shard`, if it holds it, so another node
    /// may take it at once instead of after the lease's expiry (a primary that another
    /// publisher fenced gives its lease up this way).
    pub async fn release_primary(
        &self,
        collection: &str,
        shard: u32,
        node_id: &str,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "DELETE FROM cluster_primaries WHERE collection = $1 AND shard = $2 AND node_id = $3",
        )
        .bind(collection)
        .bind(i64::from(shard))
        .bind(node_id)
        .execute(&self.db.pool)
        .await?;
        Ok(())
    }

    /// The whole map: collections with their shards (current generation, manifest key,
    /// replicas) and the registered nodes.
    pub async fn read_map(&self) -> anyhow::Result<ClusterMap> {
        let pool = &self.db.pool;
        let mut map = ClusterMap {
            read_at: now_ms(),
            ..ClusterMap::default()
        };
        for row in
            sqlx::query("SELECT name, shards, hash_scheme FROM cluster_collections ORDER BY name")
                .fetch_all(pool)
                .await?
        {
            let shards: i64 = row.try_get(1)?;
            map.collections.push(CollectionRecord {
                name: row.try_get(0)?,
                hash_scheme: row.try_get(2)?,
                shards: (0..shards as u32)
                    .map(|shard| ShardRecord {
                        shard,
                        current_generation: None,
                        manifest_key: None,
                        replicas: Vec::new(),
                    })
                    .collect(),
            });
        }
        let rows = sqlx::query(
            "SELECT s.collection, s.shard, s.current_generation, g.manifest_key \
             FROM cluster_shards s LEFT JOIN cluster_generations g \
             ON g.collection = s.collection AND g.shard = s.shard \
             AND g.generation = s.current_generation",
        )
        .fetch_all(pool)
        .await?;
        for row in rows {
            let (c, s): (String, i64) = (row.try_get(0)?, row.try_get(1)?);
            let generation: Option<i64> = row.try_get(2)?;
            let key: Option<String> = row.try_get(3)?;
            if let Some(shard) = shard_mut(&mut map, &c, s) {
                shard.current_generation = generation.map(|g| g as u64);
                shard.manifest_key = key;
            }
        }
        let rows = sqlx::query(
            "SELECT collection, shard, node_id, state FROM cluster_replicas \
             ORDER BY collection, shard, node_id",
        )
        .fetch_all(pool)
        .await?;
        for row in rows {
            let (c, s): (String, i64) = (row.try_get(0)?, row.try_get(1)?);
            let record = ReplicaRecord {
                node_id: row.try_get(2)?,
                state: ReplicaState::parse(&row.try_get::<String, _>(3)?)?,
            };
            if let Some(shard) = shard_mut(&mut map, &c, s) {
                shard.replicas.push(record);
            }
        }
        for row in sqlx::query(
            "SELECT node_id, role, api_url, gossip_addr, registered_at FROM cluster_nodes \
             ORDER BY node_id",
        )
        .fetch_all(pool)
        .await?
        {
            map.nodes.push(NodeRecord {
                node_id: row.try_get(0)?,
                role: row.try_get(1)?,
                api_url: row.try_get(2)?,
                gossip_addr: row.try_get(3)?,
                registered_at: row.try_get(4)?,
            });
        }
        Ok(map)
    }
}

fn shard_mut<'a>(
    map: &'a mut ClusterMap,
    collection: &str,
    shard: i64,
) -> Option<&'a mut ShardRecord> {
    map.collections
        .iter_mut()
        .find(|c| c.name == collection)?
        .shards
        .get_mut(usize::try_from(shard).ok()?)
}

/// The last map read from the metastore, in a JSON file (by default
/// `DATA_DIR/cluster/last_map.json`).
#[derive(Debug, Clone)]
pub struct MapCache {
    pub path: PathBuf,
}

impl MapCache {
    pub fn in_data_dir(data_dir: &Path) -> MapCache {
        MapCache {
            path: data_dir.join("cluster").join("last_map.json"),
        }
    }

    /// Replaces the file with `map`, atomically.
    pub fn save(&self, map: &ClusterMap) -> anyhow::Result<()> {
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let text = serde_json::to_vec_pretty(map)?;
        crate::durable::write_atomic(&self.path, &text)
    }

    /// The cached map; `Ok(None)` when there is no file.
    pub fn load(&self) -> anyhow::Result<Option<ClusterMap>> {
        let text = match std::fs::read(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(e).with_context(|| format!("cannot read {}", self.path.display()))
            }
        };
        let map = serde_json::from_slice(&text)
            .with_context(|| format!("{} is not a cluster map", self.path.display()))?;
        Ok(Some(map))
    }
}

/// Where the map a node serves from came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapSource {
    Metastore,
    /// The cache file, because the metastore could not be read (`error` says why).
    Cache {
        error: String,
    },
}

/// The map a node serves from, replaced by every successful read of the metastore.
pub struct LiveMap {
    url: String,
    cache: MapCache,
    timeout: Duration,
    map: ArcSwap<ClusterMap>,
    store: tokio::sync::Mutex<Option<Metastore>>,
}

impl LiveMap {
    /// Reads the map at start: from the metastore at `url` (and then saved to `cache`), else
    /// from `cache` with a warning naming the database's error, else an error saying both.
    pub async fn open(
        url: &str,
        cache: MapCache,
        timeout: Duration,
    ) -> anyhow::Result<(Arc<LiveMap>, MapSource)> {
        let read = async {
            let store = Metastore::connect(url, timeout).await?;
            let map = tokio::time::timeout(timeout, store.read_map())
                .await
                .map_err(|_| anyhow::anyhow!("no answer within {} ms", timeout.as_millis()))?
                .with_context(|| format!("cannot read the cluster map from {}", store.url()))?;
            anyhow::Ok((store, map))
        };
        let (store, map, source) = match read.await {
            Ok((store, map)) => {
                crate::metrics::set_metastore_up(true);
                if let Err(e) = cache.save(&map) {
                    tracing::warn!("cannot save the cluster map cache: {e:#}");
                }
                (Some(store), map, MapSource::Metastore)
            }
            Err(e) => {
                crate::metrics::set_metastore_up(false);
                crate::metrics::count_metastore_error("read_map");
                let error = format!("{e:#}");
                match cache.load() {
                    Ok(Some(map)) => {
                        tracing::warn!(
                            "metastore unreachable ({error}); serving from the last known map \
                             {} (read at {}); retrying in the background",
                            cache.path.display(),
                            crate::db::rfc3339(map.read_at)
                        );
                        (None, map, MapSource::Cache { error })
                    }
                    Ok(None) => anyhow::bail!(
                        "the metastore is unreachable and there is no last known map to start \
                         from ({} does not exist): {error}",
                        cache.path.display()
                    ),
                    Err(cache_error) => anyhow::bail!(
                        "the metastore is unreachable ({error}) and the last known map cannot \
                         be read: {cache_error:#}"
                    ),
                }
            }
        };
        let live = Arc::new(LiveMap {
            url: url.to_string(),
            cache,
            timeout,
            map: ArcSwap::from_pointee(map),
            store: tokio::sync::Mutex::new(store),
        });
        Ok((live, source))
    }

    /// The map in force.
    pub fn get(&self) -> Arc<ClusterMap> {
        self.map.load_full()
    }

    /// One refresh: on success the map is replaced and saved; on failure it stays, and the
    /// error is logged, counted and returned.
    pub async fn refresh(&self) -> anyhow::Result<()> {
        let result = async {
            let mut store = self.store.lock().await;
            if store.is_none() {
                *store = Some(Metastore::connect(&self.url, self.timeout).await?);
            }
            let s = store.as_ref().expect("just connected");
            let read = tokio::time::timeout(self.timeout, s.read_map())
                .await
                .map_err(|_| anyhow::anyhow!("no answer within {} ms", self.timeout.as_millis()))
                .and_then(|r| r)
                .with_context(|| format!("cannot read the cluster map from {}", s.url()));
            if read.is_err() {
                // The next try connects anew, and its error names the cause (a pool that
                // lost its server only says that it timed out).
                *store = None;
            }
            read
        }
        .await;
        match result {
            Ok(map) => {
                crate::metrics::set_metastore_up(true);
                if let Err(e) = self.cache.save(&map) {
                    tracing::warn!("cannot save the cluster map cache: {e:#}");
                }
                self.map.store(Arc::new(map));
                Ok(())
            }
            Err(e) => {
                crate::metrics::set_metastore_up(false);
                crate::metrics::count_metastore_error("read_map");
                tracing::warn!(
                    "metastore unreachable: {e:#}; serving from the map read at {}",
                    crate::db::rfc3339(self.get().read_at)
                );
                Err(e)
            }
        }
    }

    /// Refreshes every `every` until the task is dropped.
    pub fn spawn_refresh(self: &Arc<Self>, every: Duration) -> tokio::task::JoinHandle<()> {
        let live = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let _ = live.refresh().await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_round_trip_and_absence() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MapCache::in_data_dir(dir.path());
        assert_eq!(cache.load().unwrap(), None);
        let map = ClusterMap {
            collections: vec![CollectionRecord {
                name: "c".into(),
                hash_scheme: HASH_SCHEME.into(),
                shards: vec![ShardRecord {
                    shard: 0,
                    current_generation: Some(3),
                    manifest_key: Some("c/3/0.json".into()),
                    replicas: vec![ReplicaRecord {
                        node_id: "a".into(),
                        state: ReplicaState::Serving,
                    }],
                }],
            }],
            nodes: vec![],
            read_at: 7,
        };
        cache.save(&map).unwrap();
        assert_eq!(cache.load().unwrap(), Some(map));
        std::fs::write(&cache.path, b"{").unwrap();
        let err = cache.load().unwrap_err();
        assert!(
            format!("{err:#}").contains("is not a cluster map"),
            "{err:#}"
        );
    }
}
