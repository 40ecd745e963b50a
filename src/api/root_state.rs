//! A root's state, shared by its routes (`super::cluster`'s search, events and writes,
//! `super::cluster_models`' registry): in a file of its own so that neither imports the other.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::cluster::root::Root;

/// A root's state.
pub(crate) struct RootState {
    pub root: Arc<Root>,
    pub ready: AtomicBool,
    /// The admin token checked on the root's admin routes (`None`: they answer 503). It
    /// stays on the root: the writes go on to the leaves with the cluster key.
    pub token: Option<crate::admin::auth::AdminToken>,
    /// The root's impression log and `POST /events`, as a single node's: the answers users
    /// see and click are the root's.
    pub events: crate::events::EventStore,
    /// Wrong admin tokens per address, as on a single node (`crate::admin::auth`).
    pub auth_failures: crate::admin::auth::FailureThrottle,
    /// The collection's model registry, which this root follows.
    pub models: Arc<crate::cluster::models::CollectionModels>,
    /// The root's jobs (the graph job over the shards), recorded in its database.
    pub jobs: Arc<crate::admin::jobs::JobRunner>,
}
