//! A shard's primary: the one leaf that takes the shard's writes, while its replicas follow
//! the store (`super::generation::follow`). Elasticsearch's split of a shard into a primary
//! and replicas, with Quickwit's way of moving the data: the primary commits each write to
//! its own index and publishes the result as the shard's next generation in the object store
//! before it acknowledges the write; replicas fetch generations from the store. So an
//! acknowledged write is durable twice (the primary's fsynced commit and the store), a
//! replica that was down converges by itself from the store when it returns, and replicas
//! never take writes of their own, so they cannot diverge.
//!
//! **Who is primary** is the operator's choice (`rankd serve --role leaf --store URL
//! --shard-id S --primary`), as Elasticsearch's allocation or Quickwit's indexer assignment
//! are the control plane's, not a consensus among data nodes. Two primaries of one shard are
//! fenced by the store itself: a generation's manifest is created with a create-if-absent
//! put, so of two primaries writing at once only one creates the next generation; the other
//! is told so ([`super::generation::AnotherPublisher`]), answers the write with an error
//! (it is not acknowledged), stops taking writes and follows the store like a replica, which
//! replaces its unpublished commit with the winner's generation. No protocol of our own
//! decides anything: the store's conditional put does.
//!
//! **Acknowledgement**: a write is answered 200 once its commit is published; the answer
//! names the generation, which the root uses to wait for copies when asked
//! (`wait_for`, `super::root::admin`). A commit whose publishing failed (the store out of
//! reach) is not acknowledged; the next write or the next start of the primary publishes it
//! with whatever follows it.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::generation::{self, AnotherPublisher, Check, Manifest, Store};
use crate::error::Invalid;
use crate::search::Engine;
use crate::sync::Recover;

/// How often publishing is tried again when the index changed under it (a commit or a merge
/// between listing its files and reading them).
const ATTEMPTS: usize = 3;

/// The primary of one shard: publishes each committed write as the shard's next generation.
pub struct Primary {
    store: Store,
    shard: u32,
    shards: u32,
    dir: PathBuf,
    /// How often a fenced primary looks for the winner's generations.
    interval: Duration,
    /// The newest generation this primary published or started from: the one the next
    /// publication succeeds (`None`: the store had none).
    newest: tokio::sync::Mutex<Option<Manifest>>,
    /// Why this leaf no longer takes writes: another primary published first.
    fenced: Mutex<Option<String>>,
    /// Until when its lease on the shard's primary lets it write, when it was elected through
    /// the metastore (`super::election`); `None`: the operator's choice, no lease.
    lease_until: Mutex<Option<Instant>>,
    /// Where it records the generations it publishes, if anywhere.
    recorder: Option<std::sync::Arc<Recorder>>,
}

/// Records a primary's generations in the cluster metastore (`--metastore`), so that what
/// exists is read in one place, as `rankd publish --metastore` records its own. In the
/// background and best-effort: the store's put is the commit, the record only follows it
/// ([`super::metastore::Metastore::record_generation`] moves forward only, so records
/// arriving out of order are harmless); a failure is logged and counted
/// (`rankd_metastore_errors_total{operation="record_generation"}`) and the next generation's
/// record catches up.
pub struct Recorder {
    url: String,
    collection: String,
    metastore: tokio::sync::Mutex<Option<super::metastore::Metastore>>,
}

impl Recorder {
    pub fn new(url: &str, collection: &str) -> Recorder {
        Recorder {
            url: url.to_string(),
            collection: collection.to_string(),
            metastore: tokio::sync::Mutex::new(None),
        }
    }

    async fn record(&self, shard: u32, generation: u64, manifest_key: &str) {
        let mut held = self.metastore.lock().await;
        let outcome = async {
            if held.is_none() {
                *held = Some(
                    super::metastore::Metastore::connect(&self.url, Duration::from_secs(5)).await?,
                );
            }
            let m = held.as_ref().expect("connected above");
            m.record_generation(&self.collection, shard, generation, manifest_key)
                .await
        }
        .await;
        match outcome {
            Ok(true) => {}
            Ok(false) => tracing::warn!(
                "shard {shard}: generation {generation} not recorded: the metastore does not \
                 know shard {shard} of {:?} yet",
                self.collection
            ),
            Err(e) => {
                *held = None;
                crate::metrics::count_metastore_error("record_generation");
                tracing::warn!(
                    "shard {shard}: cannot record generation {generation} in the metastore: \
                     {e:#}"
                );
            }
        }
    }
}

/// Why a committed write was not acknowledged.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Another primary of the shard published first: this leaf takes no writes any more.
    #[error("{0}")]
    Fenced(String),
    /// The commit is on this primary's disk but not in the store (out of reach, or failing):
    /// the next write publishes it.
    #[error("committed on the primary but not published: {0:#}")]
    Failed(anyhow::Error),
}

impl Primary {
    /// Opens the store at `url` for shard `shard` of the index in `data_dir`: brings the
    /// directory to the store's newest generation when the store has a newer one than the
    /// directory holds, then publishes what the directory holds beyond it (the first
    /// generation of a new shard, or a commit made before a crash and never published).
    pub fn start(
        url: &str,
        shard: u32,
        data_dir: &Path,
        interval: Duration,
    ) -> anyhow::Result<Primary> {
        let store = Store::open(url)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let newest = match generation::latest(&store, shard).await? {
                Some(g) => Some(generation::manifest(&store, shard, g).await?),
                None => None,
            };
            let held = generation::local_generation(data_dir)?;
            if newest.as_ref().map(|m| m.generation) > held.as_ref().map(|m| m.generation) {
                if let Some(a) = generation::bootstrap(&store, data_dir, shard).await? {
                    eprintln!(
                        "fetched generation {} of shard {shard} from {url}: {} files, {} bytes",
                        a.generation, a.files_fetched, a.bytes_fetched
                    );
                }
            }
            let held = generation::local_generation(data_dir)?;
            let shards = shard_count(data_dir, shard, held.as_ref().or(newest.as_ref()))?;
            let primary = Primary {
                store,
                shard,
                shards,
                dir: data_dir.to_path_buf(),
                interval: interval.max(Duration::from_millis(10)),
                newest: tokio::sync::Mutex::new(newest),
                fenced: Mutex::new(None),
                lease_until: Mutex::new(None),
                recorder: None,
            };
            let g = primary.publish_dir().await.map_err(|e| match e {
                PublishError::Fenced(why) => anyhow::anyhow!(why),
                PublishError::Failed(e) => e,
            })?;
            eprintln!("primary of shard {shard} of {shards}: generation {g} in {url}");
            Ok(primary)
        })
    }

    pub fn shard(&self) -> u32 {
        self.shard
    }

    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// A replica of `shard` serving `engine` (following the store until now) made the shard's
    /// primary by its lease (`super::election`), writing until `lease_until` unless the lease
    /// is extended: first brought to the store's newest generation, which its first write
    /// succeeds. The caller holds the index's write lock and has stopped following.
    pub async fn promote<E>(
        store: Store,
        shard: u32,
        shards: u32,
        engine: &std::sync::Arc<E>,
        interval: Duration,
        lease_until: Instant,
    ) -> anyhow::Result<Primary>
    where
        E: AsRef<Engine> + Send + Sync + 'static,
    {
        let dir = engine.as_ref().as_ref().index.dir.clone();
        let held = engine.as_ref().as_ref().store_generation();
        if let Some(m) = generation::newer(&store, held, shard).await? {
            generation::switch_to(&store, engine, m).await?;
        }
        let newest = generation::local_generation(&dir)?;
        Ok(Primary {
            store,
            shard,
            shards,
            dir,
            interval: interval.max(Duration::from_millis(10)),
            newest: tokio::sync::Mutex::new(newest),
            fenced: Mutex::new(None),
            lease_until: Mutex::new(Some(lease_until)),
            recorder: None,
        })
    }

    /// The primary, recording each generation it publishes with `recorder`.
    pub fn recording(mut self, recorder: std::sync::Arc<Recorder>) -> Primary {
        self.recorder = Some(recorder);
        self
    }

    /// Its lease was renewed: it may write until `until`.
    pub fn extend_lease(&self, until: Instant) {
        let mut lease = self.lease_until.locked();
        if lease.is_some() {
            *lease = Some(until);
        }
    }

    /// Another primary published first: this one must not write again.
    pub fn fenced_by_publisher(&self) -> bool {
        self.fenced.locked().is_some()
    }

    /// Why this leaf takes no writes any more: another primary published first, or its lease
    /// ran out (the metastore was not reached to renew it).
    pub fn fenced(&self) -> Option<String> {
        if let Some(why) = self.fenced.locked().clone() {
            return Some(why);
        }
        self.lease_until
            .locked()
            .is_some_and(|until| Instant::now() >= until)
            .then(|| {
                format!(
                    "its lease on the primary of shard {} ran out (the metastore was not \
                     reached to renew it)",
                    self.shard
                )
            })
    }

    /// The store it publishes to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Publishes the index after a committed write; the caller holds the index's write lock,
    /// so generations follow the commits' order. The generation that holds the write.
    /// Fenced: the engine is handed to a follower of the store, which replaces the
    /// unpublished commit with the other primary's generations.
    pub async fn publish<E>(
        self: &std::sync::Arc<Self>,
        engine: std::sync::Arc<E>,
    ) -> Result<u64, PublishError>
    where
        E: AsRef<Engine> + Send + Sync + 'static,
    {
        let was_fenced = self.fenced().is_some();
        // On a task of its own, so that a request dropped mid-way (its client gone, the
        // root's timeout) cannot stop it between creating the generation and recording it:
        // the next write would then publish from a stale generation and be fenced by its own.
        let me = self.clone();
        let outcome = tokio::spawn(async move { me.publish_dir().await })
            .await
            .unwrap_or_else(|e| {
                Err(PublishError::Failed(anyhow::anyhow!(
                    "publishing stopped: {e}"
                )))
            });
        match &outcome {
            Ok(g) => engine.as_ref().as_ref().set_store_generation(*g),
            // Once; an elected primary is followed again by its election (`super::election`).
            Err(PublishError::Fenced(_)) if was_fenced || self.lease_until.locked().is_some() => {}
            Err(PublishError::Fenced(_)) => {
                // Drop the unpublished commit (the store's generation laid out again), then
                // follow the winner. Writes are refused from now on, before they commit.
                let (store, shard, interval) = (self.store.clone(), self.shard, self.interval);
                tokio::spawn(async move {
                    if let Err(e) = generation::resync(&store, shard, &engine).await {
                        tracing::error!(
                            "shard {shard}: cannot bring this leaf back to the store's \
                             generation: {e:#}"
                        );
                    }
                    generation::follow(store, shard, engine, interval).await
                });
            }
            Err(PublishError::Failed(_)) => {}
        }
        outcome
    }

    async fn publish_dir(&self) -> Result<u64, PublishError> {
        if let Some(why) = self.fenced() {
            return Err(PublishError::Fenced(why));
        }
        let mut newest = self.newest.lock().await;
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let outcome = generation::publish_after(
                &self.store,
                &self.dir,
                self.shard,
                self.shards,
                newest.clone(),
                Check::Sizes,
            )
            .await;
            let published = match outcome {
                Ok(p) => p,
                Err(e) => {
                    if let Some(lost) = e.downcast_ref::<AnotherPublisher>() {
                        let why = format!(
                            "this leaf is no longer the primary of shard {}: {lost}; it takes \
                             no writes and follows the store (restart it with --primary to \
                             take writes again once the other primary is stopped)",
                            self.shard
                        );
                        tracing::error!("{why}");
                        *self.fenced.locked() = Some(why.clone());
                        return Err(PublishError::Fenced(why));
                    }
                    // The index changed while its files were read: read them again.
                    last = Some(e);
                    continue;
                }
            };
            let Some(record) = published.record else {
                return Ok(published.generation);
            };
            crate::durable::write_atomic(
                &self.dir.join(generation::LOCAL_RECORD),
                &serde_json::to_vec_pretty(&record).map_err(|e| PublishError::Failed(e.into()))?,
            )
            .map_err(PublishError::Failed)?;
            let g = record.generation;
            *newest = Some(record);
            crate::metrics::set_generation(self.shard, g, published.bytes_uploaded);
            if let Some(recorder) = &self.recorder {
                let (recorder, shard, key) = (recorder.clone(), self.shard, published.manifest);
                tokio::spawn(async move { recorder.record(shard, g, &key).await });
            }
            return Ok(g);
        }
        Err(PublishError::Failed(last.unwrap_or_else(|| {
            anyhow::anyhow!("publishing was not attempted")
        })))
    }
}

/// The collection's shard count for a primary of `shard` in `data_dir`: from the generation
/// it holds or the store's newest, else from the collection the directory belongs to
/// (`rankd ingest --shards`), else 1 for shard 0 (a single index published as one shard).
fn shard_count(data_dir: &Path, shard: u32, known: Option<&Manifest>) -> anyhow::Result<u32> {
    if let Some(m) = known {
        return Ok(m.shards);
    }
    if let Some((s, n)) = super::shard_of_dir(data_dir)? {
        if s != shard {
            return Err(Invalid(format!(
                "{} is shard {s} of its collection, not --shard-id {shard}",
                data_dir.display()
            ))
            .into());
        }
        return Ok(n);
    }
    if shard == 0 {
        return Ok(1);
    }
    Err(Invalid(format!(
        "cannot tell how many shards the collection of {} has: it is no shard directory of \
         `rankd ingest --shards N` and the store has no generation of shard {shard} yet",
        data_dir.display()
    ))
    .into())
}

impl std::fmt::Debug for Primary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Primary")
            .field("store", &self.store.url)
            .field("shard", &self.shard)
            .field("shards", &self.shards)
            .finish()
    }
}
