//! What the root asks of a shard's replica, whatever carries the question: the
//! [`ShardClient`] trait, and its in-process implementation [`LocalShard`] (a shard open in
//! this process, answered by the leaf's own functions, `crate::cluster::leaf`). The HTTP
//! implementation is [`super::http::HttpShard`]; unit tests add their own (`super::tests`).
//!
//! The root's rounds ([`super::Root`]) are written once over this trait, as Quickwit writes
//! its root once over `SearchServiceClientImpl::{Local, Grpc}`: a collection in one process,
//! one over the network and a fake one in a test run the same algorithm.

use std::sync::Arc;

use async_trait::async_trait;

use crate::cluster::leaf::{self, LeafError, Pins};
use crate::cluster::wire::*;
use crate::search::Engine;
use crate::search::SearchError;
use crate::text::stats_table::StatsTable;

/// Why a call to a replica failed.
#[derive(Debug)]
pub enum CallFailure {
    /// The replica did not answer properly (down, slow, refused the call, or answered
    /// nonsense): the search moves on to another replica of the shard.
    Replica(String),
    /// The search itself is wrong (a parameter no replica can take): no other replica would
    /// answer otherwise, so the search fails with it.
    Search(SearchError),
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallFailure::Replica(reason) => f.write_str(reason),
            CallFailure::Search(e) => write!(f, "{e}"),
        }
    }
}

/// The calls of a search to one replica of a shard (the messages of `crate::cluster::wire`).
#[async_trait]
pub trait ShardClient: Send + Sync + 'static {
    /// Names the replica in errors, logs and health: its base URL, or `in-process shard N`.
    fn name(&self) -> &str;

    /// The replica's base URL when it is reached over HTTP: admin writes and `/doc` go there
    /// (`super::admin`).
    fn url(&self) -> Option<&str> {
        None
    }

    /// What the root checks before sending the replica any search.
    async fn info(&self) -> Result<InfoResponse, CallFailure>;

    /// The shard's part of the collection statistics; pins its current searcher.
    async fn stats(&self, call: &StatsCall) -> Result<StatsReply, CallFailure>;

    /// The shard's whole statistics table and the generation it describes; may take seconds
    /// on a large shard (`super::tables` runs it beside the searches).
    async fn table(&self, call: &TableCall) -> Result<(u64, Arc<StatsTable>), CallFailure>;

    /// The shard's first-phase top with the collection's statistics.
    async fn query(&self, call: &QueryCall) -> Result<QueryReply, CallFailure>;

    /// The feature rows of the shard's documents of a merged window.
    async fn features(&self, call: &FeaturesCall) -> Result<FeaturesReply, CallFailure>;

    /// The term counts of the shard's feedback documents (RM3).
    async fn feedback(&self, call: &FeedbackCall) -> Result<FeedbackReply, CallFailure>;

    /// What the page shows of the shard's documents.
    async fn hits(&self, call: &HitsCall) -> Result<HitsReply, CallFailure>;
}

/// A shard open in this process: the leaf's functions over its engine, called directly (no
/// encoding). A leaf's HTTP routes (`crate::api::cluster`) serve the same object.
///
/// Calls run on the caller's thread: each takes about a millisecond at most, and a hand-off
/// to another thread cost more than it saved (docs/BENCHMARKS.md, sharded serving).
pub struct LocalShard {
    engine: Arc<dyn AsRef<Engine> + Send + Sync>,
    pins: Pins,
    name: String,
}

impl LocalShard {
    /// `engine` serving as a shard; `name` names it in errors (e.g. `in-process shard 2`).
    pub fn new(engine: Arc<dyn AsRef<Engine> + Send + Sync>, name: impl Into<String>) -> Self {
        LocalShard {
            engine,
            pins: Pins::default(),
            name: name.into(),
        }
    }

    pub fn engine(&self) -> &Engine {
        (*self.engine).as_ref()
    }

    /// The searchers this shard keeps for searches in flight.
    pub fn pins(&self) -> &Pins {
        &self.pins
    }

    /// A leaf's failure as the root sees it: the search's own errors fail the search, the
    /// rest (a generation gone, a document not in the searcher, an internal error) fail the
    /// replica, as they do over HTTP.
    fn failure(&self, e: LeafError) -> CallFailure {
        match e {
            LeafError::Search(e @ SearchError::Param { .. }) => CallFailure::Search(e),
            other => CallFailure::Replica(format!("{}: {other}", self.name)),
        }
    }
}

#[async_trait]
impl ShardClient for LocalShard {
    fn name(&self) -> &str {
        &self.name
    }

    async fn info(&self) -> Result<InfoResponse, CallFailure> {
        Ok(leaf::info(self.engine()))
    }

    async fn stats(&self, call: &StatsCall) -> Result<StatsReply, CallFailure> {
        leaf::stats(self.engine(), &self.pins, call).map_err(|e| self.failure(e))
    }

    async fn table(&self, call: &TableCall) -> Result<(u64, Arc<StatsTable>), CallFailure> {
        let (generation, bytes) =
            leaf::table(self.engine(), &self.pins, call).map_err(|e| self.failure(e))?;
        let table = StatsTable::from_bytes(&bytes)
            .map_err(|e| CallFailure::Replica(format!("{}: {e}", self.name)))?;
        Ok((generation, Arc::new(table)))
    }

    async fn query(&self, call: &QueryCall) -> Result<QueryReply, CallFailure> {
        leaf::query(self.engine(), &self.pins, call).map_err(|e| self.failure(e))
    }

    async fn features(&self, call: &FeaturesCall) -> Result<FeaturesReply, CallFailure> {
        leaf::features(self.engine(), &self.pins, call).map_err(|e| self.failure(e))
    }

    async fn feedback(&self, call: &FeedbackCall) -> Result<FeedbackReply, CallFailure> {
        leaf::feedback(self.engine(), &self.pins, call).map_err(|e| self.failure(e))
    }

    async fn hits(&self, call: &HitsCall) -> Result<HitsReply, CallFailure> {
        leaf::hits(self.engine(), &self.pins, call).map_err(|e| self.failure(e))
    }
}
