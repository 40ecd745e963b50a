//! Sharded serving (design in docs/design/scale-out.md): a collection split over
//! shards by a stable hash of the document id ([`routing`]), searched as one index.
//!
//! Exactness comes from two rules every part follows:
//!
//! - **Collection statistics are the collection's.** A search first gathers, from every
//!   shard, the statistics its models and features read (`crate::text::stats`), sums them,
//!   and scores every shard with the sums — Elasticsearch's `dfs_query_then_fetch`, Solr's
//!   `ExactStatsCache`. The sums are integers, so a shard computes exactly the floats the
//!   single index computes for the same document.
//! - **One order.** Shards return their top in the canonical order (score descending, then
//!   id ascending, `crate::text::search::BoundModel::top`), and the root merges by the same
//!   key, so the merged window is the single index's window, ties included.
//!
//! The root's algorithm ([`root`]) is written once over a shard transport: shards open in
//! this process (`root::transport::LocalShard`, what the tests compare with the single index)
//! or leaves over HTTP (`root::http::HttpShard`, what `rankd serve --role root` uses).

pub mod election;
pub mod generation;
pub mod gossip_auth;
pub mod leaf;
pub mod membership;
pub mod metastore;
pub mod models;
pub mod node;
pub mod placement;
pub mod primary;
pub mod root;
pub mod routing;
pub mod storage;
pub mod wire;

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::corpus::Document;
use crate::error::Invalid;

/// What `DIR/shards/collection.json` records of a collection split over shards on one disk
/// (`rankd ingest --shards N`): shard `s`'s data directory is `DIR/shards/<s>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Collection {
    pub shards: u32,
    /// [`routing::HASH_SCHEME`] when the documents were routed.
    pub hash_scheme: String,
}

/// `DIR/shards/collection.json`, if `dir` holds a collection split over shards.
pub(crate) fn read_collection(dir: &Path) -> anyhow::Result<Option<Collection>> {
    let path = dir.join("shards").join("collection.json");
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let c = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a collection record", path.display()))?;
    Ok(Some(c))
}

/// Which shard of how many `data_dir` is, when it is a shard directory of a collection split
/// by `rankd ingest --shards N` (`COLLECTION/shards/S`, beside `collection.json`).
pub(crate) fn shard_of_dir(data_dir: &Path) -> anyhow::Result<Option<(u32, u32)>> {
    let (Some(name), Some(collection)) = (
        data_dir.file_name().and_then(|n| n.to_str()),
        data_dir.parent().and_then(Path::parent),
    ) else {
        return Ok(None);
    };
    let (Ok(shard), Some(c)) = (name.parse::<u32>(), read_collection(collection)?) else {
        return Ok(None);
    };
    Ok((shard < c.shards).then_some((shard, c.shards)))
}

fn dirs_of(dir: &Path, shards: u32) -> Vec<PathBuf> {
    (0..shards)
        .map(|s| dir.join("shards").join(s.to_string()))
        .collect()
}

/// The data directories of `shards` shards under `dir`, created and recorded on first use;
/// a directory already split another way is refused (its documents would be misrouted).
pub fn shard_dirs(dir: &Path, shards: u32) -> anyhow::Result<Vec<PathBuf>> {
    if shards == 0 {
        return Err(Invalid("--shards must be at least 1".into()).into());
    }
    let base = dir.join("shards");
    let want = Collection {
        shards,
        hash_scheme: routing::HASH_SCHEME.to_string(),
    };
    match read_collection(dir)? {
        Some(have) if have != want => {
            return Err(Invalid(format!(
                "{} holds {} shards routed by {}; this ingest asks for {} shards routed by {}",
                base.display(),
                have.shards,
                have.hash_scheme,
                want.shards,
                want.hash_scheme
            ))
            .into())
        }
        Some(_) => {}
        None => {
            std::fs::create_dir_all(&base)
                .with_context(|| format!("cannot create {}", base.display()))?;
            crate::durable::write_atomic(
                &base.join("collection.json"),
                serde_json::to_string_pretty(&want)?.as_bytes(),
            )?;
        }
    }
    Ok(dirs_of(dir, shards))
}

/// The shards' data directories when `dir` holds a collection split over shards
/// (`DIR/shards/collection.json`), `None` when it does not. A collection routed by a scheme
/// this binary does not know is refused.
pub(crate) fn existing_shard_dirs(dir: &Path) -> anyhow::Result<Option<Vec<PathBuf>>> {
    let Some(c) = read_collection(dir)? else {
        return Ok(None);
    };
    if c.hash_scheme != routing::HASH_SCHEME {
        return Err(Invalid(format!(
            "{} is routed by {}; this rankd routes by {}",
            dir.join("shards").display(),
            c.hash_scheme,
            routing::HASH_SCHEME
        ))
        .into());
    }
    Ok(Some(dirs_of(dir, c.shards)))
}

/// `docs` split by [`routing::shard_of`], one list per shard.
pub fn route(docs: Vec<Document>, shards: u32) -> Vec<Vec<Document>> {
    let mut out: Vec<Vec<Document>> = (0..shards).map(|_| Vec::new()).collect();
    for d in docs {
        out[routing::shard_of(&d.id, shards) as usize].push(d);
    }
    out
}
