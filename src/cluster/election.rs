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
    let follow = || {
        tokio::spawn(generation::follow(
            store.clone(),
            shard,
            engine.clone(),
            poll,
        ))
    };
    let mut follower = Some(follow());
    let mut metastore: Option<Metastore> = None;
    let mut last_error = String::new();
    let every = ttl / 3;
    loop {
        let asked = Instant::now();
        let held = async {
            if metastore.is_none() {
                metastore = Some(Metastore::connect(&metastore_url, every).await?);
            }
            let m = metastore.as_ref().expect("connected above");
            tokio::time::timeout(
                every,
                m.lease_primary(&collection, shard, &node_id, &api_url, ttl),
            )
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {} ms", every.as_millis()))?
        }
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
                metastore = None;
                false
            }
        };
        // Writes stop a third of the lease before another leaf may take it.
        let until = asked + ttl * 2 / 3;
        match (held, slot.load_full()) {
            (true, Some(primary)) if primary.fenced().is_none() => primary.extend_lease(until),
            (true, Some(_)) => {
                // Fenced by another publisher although it holds the lease: give it up and
                // follow; the next round may take it again.
                let _writing = engine.writes().lock().await;
                slot.store(None);
                follower = Some(follow());
                if let Some(m) = &metastore {
                    let _ = m.release_primary(&collection, shard, &node_id).await;
                }
            }
            (true, None) => {
                let _writing = engine.writes().lock().await;
                if let Some(f) = follower.take() {
                    f.abort();
                    let _ = f.await;
                }
                match Primary::promote(store.clone(), shard, shards, &engine, poll, until).await {
                    Ok(p) => {
                        tracing::warn!(
                            "shard {shard}: this leaf ({node_id}) is the primary now, from \
                             generation {}",
                            engine.as_ref().as_ref().store_generation().unwrap_or(0)
                        );
                        slot.store(Some(Arc::new(p)));
                    }
                    Err(e) => {
                        tracing::error!("shard {shard}: cannot become the primary: {e:#}");
                        follower = Some(follow());
                        if let Some(m) = &metastore {
                            let _ = m.release_primary(&collection, shard, &node_id).await;
                        }
                    }
                }
            }
            (false, Some(primary)) if primary.fenced().is_some() => {
                let _writing = engine.writes().lock().await;
                tracing::warn!("shard {shard}: this leaf is no longer the primary; following");
                slot.store(None);
                follower = Some(follow());
            }
            (false, _) => {}
        }
        tokio::time::sleep(every.saturating_sub(asked.elapsed())).await;
    }
}
