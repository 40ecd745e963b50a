//! A root's graph job: the link scores of the whole collection (SPEC §2), computed on the
//! root from the documents every shard sends, and stored on every shard as its part, as
//! `rankd graph --data-dir COLLECTION` stores them from one disk.
//!
//! 1. Each shard's writers ([`Root::writers`]: its primary, or every replica of a shard
//!    without one) send their documents' ids, URLs and out-links with the index generation
//!    they read them from (`POST /cluster/v1/link_docs`). Copies of one shard must hold the
//!    same documents: a shard whose copies differ is refused (finish the writes first).
//! 2. The root builds the collection's graph from all of them, sorted by id as the single
//!    index numbers its nodes, and computes every score once
//!    ([`crate::links::compute_parts`]): the same graph, so the same floats, as the single
//!    index and `rankd graph` over the collection.
//! 3. Each writer receives its shard's part with the generation it read
//!    (`POST /cluster/v1/links`), and stores and serves it only if it is still at that
//!    generation; a primary publishes it as its next generation, which its replicas follow.
//!
//! An orchestrated job rather than timely dataflow over the leaves: the graph of a
//! collection one root can search fits one machine (`docs/SCALING.md` sizes it), the
//! leaves keep serving while the root computes, and the result is exactly the single
//! index's. Shards are stored independently; the error names what was stored where, and
//! running the job again is safe.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use hyper::Method;
use serde::Serialize;

use super::http::success;
use super::Root;
use crate::cluster::wire::{LinkDocsCall, LinkDocsReply, LinksCall, LinksReply, PROTOCOL};
use crate::corpus::Document;
use crate::graph::LinkScoreOptions;
use crate::search::SearchError;

/// How long one shard may take to send its documents or store its scores: a large shard's
/// documents are megabytes, and storing publishes a generation.
const GRAPH_CALL_TIMEOUT: Duration = Duration::from_secs(600);

/// What a graph job over the collection did.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct GraphReport {
    /// Nodes of the collection's graph (documents and link targets that are none).
    pub nodes: usize,
    pub edges: usize,
    /// Operator-chosen TrustRank seeds, if any were given.
    pub seeds: Option<usize>,
    pub seconds: f64,
    pub shards: Vec<ShardLinks>,
}

/// One shard's part of the job.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ShardLinks {
    pub shard: usize,
    /// Entries of its part (its documents).
    pub nodes: usize,
    /// The replicas that stored it: the primary, or every replica of a shard without one.
    pub written_on: Vec<String>,
    /// The store generation publishing it, when the shard has a primary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
}

impl Root {
    /// Computes the collection's link scores from its shards' documents and stores each
    /// shard's part on the replicas that take its writes. `trusted`: TrustRank seeds by
    /// document id (`None`: the top inverse-PageRank candidates, as on a single node).
    ///
    /// Runs on a blocking thread (a job's), calling the shards through `runtime`; `progress`
    /// hears each step, and `cancel` stops the job between algorithms
    /// ([`crate::graph::GraphError::Cancelled`]) before anything is stored.
    pub fn recompute_links(
        &self,
        runtime: &tokio::runtime::Handle,
        trusted: Option<Vec<String>>,
        progress: &mut dyn FnMut(crate::graph::scores::Progress),
        cancel: &std::sync::atomic::AtomicBool,
    ) -> anyhow::Result<GraphReport> {
        let start = Instant::now();
        let shards = self.num_shards;
        // 1. Every writer's documents.
        let reads = (0..shards).map(|shard| self.shard_link_docs(shard));
        let mut read = Vec::with_capacity(shards);
        for (shard, outcome) in runtime.block_on(join_all(reads)).into_iter().enumerate() {
            read.push(outcome.map_err(|e| {
                SearchError::Unavailable(format!("shard {shard}: {e}; nothing was stored"))
            })?);
        }
        let mut docs = Vec::new();
        for (shard, (_, replies)) in read.iter_mut().enumerate() {
            let (first, rest) = replies.split_first_mut().expect("a shard has a writer");
            if let Some((name, _)) = rest.iter().find(|(_, r)| r.docs != first.1.docs) {
                return Err(SearchError::Unavailable(format!(
                    "shard {shard}: replicas {} and {name} hold different documents; finish \
                     the writes to the shard, then run the graph job again; nothing was stored",
                    first.0
                ))
                .into());
            }
            // Only the replies' generations are read after this: the documents move.
            docs.extend(std::mem::take(&mut first.1.docs).into_iter().map(|d| {
                let document = Document {
                    id: d.id,
                    url: d.url,
                    links: d.links,
                    ..Default::default()
                };
                (document, shard)
            }));
        }
        docs.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        // 2. The scores, on this thread.
        let seeds = trusted.as_ref().map(Vec::len);
        let (scores, stats, parts) = crate::links::compute_parts(
            docs,
            shards,
            &LinkScoreOptions::default(),
            trusted.as_deref(),
            progress,
            cancel,
        )?;
        // 3. Each shard's part, to each writer that read it.
        let stores =
            read.iter()
                .zip(&parts)
                .enumerate()
                .map(|(shard, ((_, replies), part))| async move {
                    let mut written = Vec::new();
                    let mut generation = None;
                    for (name, reply) in replies {
                        let call = LinksCall {
                            protocol: PROTOCOL,
                            generation: reply.generation.clone(),
                            scores: part.clone(),
                        };
                        let stored: LinksReply = match self.call(name, "links", &call).await {
                            Ok(r) => r,
                            Err(e) if written.is_empty() => return Err(e),
                            Err(e) => return Err(format!("{e} (stored on {written:?} before it)")),
                        };
                        generation = stored.generation.or(generation);
                        written.push(name.clone());
                    }
                    Ok(ShardLinks {
                        shard,
                        nodes: part.n(),
                        written_on: written,
                        generation,
                    })
                });
        let outcomes = runtime.block_on(join_all(stores));
        let mut report = GraphReport {
            nodes: scores.n(),
            edges: stats.edges,
            seeds,
            seconds: 0.0,
            shards: Vec::new(),
        };
        let mut failed = Vec::new();
        for (shard, outcome) in outcomes.into_iter().enumerate() {
            match outcome {
                Ok(s) => report.shards.push(s),
                Err(e) => failed.push(format!("shard {shard}: {e}")),
            }
        }
        if !failed.is_empty() {
            let stored: Vec<usize> = report.shards.iter().map(|s| s.shard).collect();
            return Err(SearchError::Unavailable(format!(
                "{}; the scores were stored on shards {stored:?}; running the graph job again \
                 is safe",
                failed.join("; ")
            ))
            .into());
        }
        report.seconds = start.elapsed().as_secs_f64();
        Ok(report)
    }

    /// The documents of `shard` from each replica that takes its writes, by replica URL.
    #[allow(clippy::type_complexity)]
    async fn shard_link_docs(
        &self,
        shard: usize,
    ) -> Result<(usize, Vec<(String, LinkDocsReply)>), String> {
        let writers = self.writers(shard).await?;
        let mut replies = Vec::new();
        for replica in &writers.replicas {
            let Some(base) = replica.client.url() else {
                return Err(format!("{} takes no calls over HTTP", replica.name()));
            };
            let call = LinkDocsCall { protocol: PROTOCOL };
            let reply: LinkDocsReply = self.call(base, "link_docs", &call).await?;
            replies.push((base.to_string(), reply));
        }
        Ok((shard, replies))
    }

    /// `POST {base}/cluster/v1/{path}` with `call`, and its JSON answer.
    async fn call<C: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        base: &str,
        path: &str,
        call: &C,
    ) -> Result<R, String> {
        let url = format!("{base}/cluster/v1/{path}");
        let body = serde_json::to_vec(call).map_err(|e| format!("{url}: {e}"))?;
        let reply = self
            .http
            .send(
                Method::POST,
                &url,
                &[("content-type", "application/json")],
                body,
                GRAPH_CALL_TIMEOUT,
            )
            .await
            .and_then(success)
            .map_err(|e| format!("{url}: {e}"))?;
        serde_json::from_slice(&reply).map_err(|e| format!("{url} answered no such JSON: {e}"))
    }
}
