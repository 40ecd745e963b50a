//! A shard's primary chosen through the metastore, and replaced when it dies: every leaf of
//! the shard started with `--elect-primary` follows the store and asks the metastore for the
//! shard's primary lease (`Metastore::lease_primary`: one conditional upsert per ask, so the
//! database decides, not a protocol of ours). The holder renews it every third of its time to
//! live; it becomes the primary (`super::primary::Primary::promote`: it stops following,
//! takes the store's newest generation and publishes each write after it); a holder that
//! cannot renew stops writing a third of the lease before it expires anywhere else, and
//! another leaf takes the lease once it has expired. Quickwit assigns its indexing pipelines
//! through its metastore (its control plane) the same way; Elasticsearch's master promotes a
//! replica. The store's create-if-absent put still fences a primary that writes after losing
//! its lease (a paused process), so the lease decides who should write and the store who did.
//!
//! Nothing here runs while a write is committed: promotion and demotion take the index's
//! write lock ([`Writes`]), so a follower never switches generations under a write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;

use super::generation::{self, Store};
use super::metastore::Metastore;
use super::primary::Primary;
use crate::search::Engine;

/// How long a primary lease lasts unless renewed.
pub const DEFAULT_TTL: Duration = Duration::from_secs(3);

/// The lock a served index's writes hold from their first check to their acknowledgement.
pub trait Writes {
    fn writes(&self) -> &tokio::sync::Mutex<()>;
}

/// One leaf's candidacy for a shard's primary.
pub struct Election {
    pub metastore_url: String,
    pub collection: String,
    pub shard: u32,
    pub shards: u32,
    /// Who holds the lease (the node's gossip id).
    pub node_id: String,
    pub ttl: Duration,
    /// How often a replica looks for a new generation.
    pub poll: Duration,
}

/// A follower of the store, stopped between generations ([`generation::follow_until`]).
struct Follower {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Follower {
    fn start<E>(store: &Store, shard: u32, engine: &Arc<E>, poll: Duration) -> Follower
    where
        E: AsRef<Engine> + Send + Sync + 'static,
    {
        let (stop, until) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(generation::follow_until(
            store.clone(),
            shard,
            engine.clone(),
            poll,
            until,
        ));
        Follower { stop, task }
    }

    /// Stops it once the generation it may be switching to is in place.
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Runs `election` for the leaf serving `engine` until the process ends: following `store`
/// while another leaf holds the lease, the primary in `slot` while this one does. `api_url`
/// is recorded with the lease (who holds it, for operators).
pub async fn run<E>(
    election: Election,
    store: Store,
    engine: Arc<E>,
    slot: Arc<ArcSwapOption<Primary>>,
    api_url: String,
) where
    E: AsRef<Engine> + Writes + Send + Sync + 'static,
{
    let Election {
        metastore_url,
        collection,
        shard,
        shards,
        node_id,
        ttl,
        poll,
    } = election;
    let mut follower = Some(Follower::start(&store, shard, &engine, poll));
    let mut metastore: Option<Metastore> = None;
    let mut last_error = String::new();
    let every = ttl / 3;
    // Each metastore call within half a round, so a slow one leaves time for the next.
    let patience = every / 2;
    loop {
        let asked = Instant::now();
        let held = lease(&mut metastore, &metastore_url, patience, |m| {
            m.lease_primary(&collection, shard, &node_id, &api_url, ttl)
        })
        .await;
        let held = match held {
            Ok(held) => {
                last_error.clear();
                held
            }
            Err(e) => {
                let message = format!("{e:#}");
                if message != last_error {
                    tracing::warn!(
                        "shard {shard}: cannot renew or take the primary lease: {message}"
                    );
                    last_error = message;
                }
                false
            }
        };
        // Writes stop a third of the lease before another leaf may take it.
        let until = asked + ttl * 2 / 3;
        let current = slot.load_full();
        match (held, current) {
            // Renewed; also a lease that ran out here while nobody took it elsewhere: this
            // leaf holds it again, and the store still fences it if another wrote meanwhile.
            (true, Some(primary)) if !primary.fenced_by_publisher() => primary.extend_lease(until),
            (true, Some(_)) => {
                // Another publisher won although this leaf holds the lease: give it up and
                // follow; a later round may take it again.
                demote(&slot, &store, shard, &engine, &mut follower, poll).await;
                let (c, n) = (collection.as_str(), node_id.as_str());
                let _ = lease(&mut metastore, &metastore_url, patience, |m| async move {
                    m.release_primary(c, shard, n).await.map(|()| true)
                })
                .await;
            }
            (true, None) => {
                let writing = engine.writes().lock().await;
                if let Some(f) = follower.take() {
                    f.stop().await;
                }
                let promoted =
                    Primary::promote(store.clone(), shard, shards, &engine, poll, until).await;
                // Promoting may have taken a while (a download): renew before writing.
                let renewed_at = Instant::now();
                let renewed = lease(&mut metastore, &metastore_url, patience, |m| {
                    m.lease_primary(&collection, shard, &node_id, &api_url, ttl)
                })
                .await;
                match (promoted, renewed) {
                    (Ok(p), Ok(true)) => {
                        p.extend_lease(renewed_at + ttl * 2 / 3);
                        tracing::warn!(
                            "shard {shard}: this leaf ({node_id}) is the primary now, from \
                             generation {}",
                            engine.as_ref().as_ref().store_generation().unwrap_or(0)
                        );
                        let recorder = super::primary::Recorder::new(&metastore_url, &collection);
                        slot.store(Some(Arc::new(p.recording(Arc::new(recorder)))));
                    }
                    (promoted, _) => {
                        if let Err(e) = promoted {
                            tracing::error!("shard {shard}: cannot become the primary: {e:#}");
                        }
                        follower = Some(Follower::start(&store, shard, &engine, poll));
                    }
                }
                drop(writing);
            }
            (false, Some(primary)) if primary.fenced().is_some() => {
                tracing::warn!("shard {shard}: this leaf is no longer the primary; following");
                demote(&slot, &store, shard, &engine, &mut follower, poll).await;
            }
            (false, _) => {}
        }
        tokio::time::sleep(every.saturating_sub(asked.elapsed())).await;
    }
}

/// One metastore call within `patience`, connecting first when not connected (the pool
/// reconnects by itself after a failure).
async fn lease<'m, F, Fut>(
    metastore: &'m mut Option<Metastore>,
    url: &str,
    patience: Duration,
    call: F,
) -> anyhow::Result<bool>
where
    F: FnOnce(&'m Metastore) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    if metastore.is_none() {
        *metastore = Some(Metastore::connect(url, patience).await?);
    }
    let m: &'m Metastore = metastore.as_ref().expect("connected above");
    match tokio::time::timeout(patience, call(m)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(anyhow::anyhow!(
            "no answer within {} ms",
            patience.as_millis()
        )),
    }
}

/// This leaf stops being the primary: under the index's write lock, the slot is emptied,
/// the directory brought back to the store's generation when it holds anything the store
/// does not ([`generation::resync`]), and following starts again.
async fn demote<E>(
    slot: &ArcSwapOption<Primary>,
    store: &Store,
    shard: u32,
    engine: &Arc<E>,
    follower: &mut Option<Follower>,
    poll: Duration,
) where
    E: AsRef<Engine> + Writes + Send + Sync + 'static,
{
    let _writing = engine.writes().lock().await;
    slot.store(None);
    match generation::resync(store, shard, engine).await {
        Ok(true) => tracing::warn!(
            "shard {shard}: dropped what this leaf held beyond the store's generation"
        ),
        Ok(false) => {}
        Err(e) => tracing::error!(
            "shard {shard}: cannot bring this leaf back to the store's generation: {e:#}; \
             following from what it holds"
        ),
    }
    if follower.is_none() {
        *follower = Some(Follower::start(store, shard, engine, poll));
    }
}
