//! The root's copies of its shards' statistics tables (`StatsMode::Table`): each replica's
//! whole table (`crate::text::stats_table`) per index generation, fetched once in the
//! background, so a search answers its statistics from their sum without a round trip.
//!
//! A missing table is fetched beside the searches (a large shard's table takes seconds to
//! compute and ship) and no search waits for one: until every target's table is here, a
//! search gathers its statistics. A leaf's query reply names its current generation; a table
//! of an older one is dropped and fetched again by the next search, and until then searches
//! run on the generation the table describes, so they stay exact.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dashmap::DashMap;

use super::replicas::Target;
use crate::cluster::wire::{TableCall, PROTOCOL};
use crate::text::stats_table::StatsTable;

/// A shard's whole statistics table and the generation it describes.
pub(crate) type Table = (u64, Arc<StatsTable>);

/// Where the root is with a replica's table.
#[derive(Clone)]
enum TableState {
    Fetching,
    Ready(Table),
    /// The fetch failed then (an older leaf without tables, say): not tried again before
    /// [`RETRY`].
    Failed(Instant),
}

/// How long after a failed table fetch the root gathers before fetching again.
const RETRY: Duration = Duration::from_secs(10);

/// The tables, by replica name.
#[derive(Clone, Default)]
pub(crate) struct Tables {
    by_replica: Arc<DashMap<String, TableState>>,
}

impl Tables {
    /// Every target's table, or `None` while some are missing; a missing one starts being
    /// fetched (on the runtime, beside this search).
    pub fn all(&self, targets: &[Target]) -> Option<Vec<Table>> {
        let mut out = Vec::with_capacity(targets.len());
        for (shard, replica) in targets {
            let name = replica.name();
            match self.by_replica.get(name).map(|e| e.value().clone()) {
                Some(TableState::Ready(table)) => out.push(table),
                Some(TableState::Fetching) => return None,
                Some(TableState::Failed(at)) if at.elapsed() < RETRY => return None,
                _ => {
                    self.by_replica
                        .insert(name.to_string(), TableState::Fetching);
                    self.fetch(*shard, replica.client.clone());
                    return None;
                }
            }
        }
        Some(out)
    }

    /// Forgets a replica's table: it failed, or its searcher moved on.
    pub fn forget(&self, name: &str) {
        self.by_replica.remove(name);
    }

    fn fetch(&self, shard: usize, client: Arc<dyn super::transport::ShardClient>) {
        let tables = self.by_replica.clone();
        tokio::spawn(async move {
            let name = client.name().to_string();
            match client.table(&TableCall { protocol: PROTOCOL }).await {
                Ok(table) => {
                    tables.insert(name, TableState::Ready(table));
                }
                Err(e) => {
                    tracing::warn!(
                        "shard {shard}: no statistics table from {name} (searches gather their \
                         statistics): {e}"
                    );
                    tables.insert(name, TableState::Failed(Instant::now()));
                }
            }
        });
    }
}
