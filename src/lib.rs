//! rankd — a search-engine ranking server.
//!
//! The modules follow the data: documents come in (`corpus`), become an index (`text`) and a
//! link graph (`graph`), get scored, evaluated (`eval`) and leave through the HTTP API (`api`).
//! Formulas live in `../shared/docs/SPEC.md`; each module cites its section.
//!
//! Layers point one way (`tests/layers.rs` keeps them so): the front ends (`cli`, `api`,
//! `admin` jobs) call the entry points (`search` for one index, `cluster` for a collection
//! over shards, `training`, `judgments`, `active`), which call the rest. A sharded collection
//! is searched by one root algorithm (`cluster::root`) over a shard transport: shards open in
//! this process, leaves over HTTP, or a test's fake. A request's rules are written once
//! (`search::request`, for `/search`, a root and evaluations); a search analyses its query
//! once and hands its steps one `features::View` of what it reads.

pub mod active;
pub mod admin;
pub mod api;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod corpus;
pub mod db;
pub mod dense;
pub mod durable;
pub mod embed;
pub mod error;
pub mod eval;
pub mod events;
pub mod features;
pub mod graph;
pub mod interleave;
pub mod judgments;
pub mod links;
pub mod metrics;
pub mod pairwise;
pub mod panics;
pub mod rerank;
pub mod search;
pub mod secret;
pub mod sync;
pub mod text;
pub mod tls;
pub mod training;
pub mod user_clicks;
