//! What a root does besides searching: documents by id, and admin writes sent to the
//! replicas of the shards concerned that take writes, over HTTP with the cluster key (a leaf's
//! `POST /cluster/v1/documents` and `/cluster/v1/documents/delete`, which take the bodies of
//! its `/admin/documents` and `/admin/documents/delete`; `GET /doc/{id}`). The admin token a
//! root's client sends stays on the root.
//!
//! **Who takes a shard's writes** is asked of its replicas at each write (`info`, which says
//! whether a leaf takes writes and whether it is the shard's primary): a shard with a primary
//! (`crate::cluster::primary`) is written on the primary alone, and its replicas follow the
//! store; the write is acknowledged once the primary published it, and `wait_for=N` waits
//! until N copies serve that generation. A shard without one (leaves with their own data
//! directories) is written on every replica, and only when every replica answers: writing
//! the ones that answer would leave the others behind for good, which is what a primary
//! avoids.
//!
//! Shards are written independently, as Elasticsearch's bulk API writes its shards: one that
//! fails leaves the others written, and the error names exactly which shards took their
//! documents (and in which generation) and which did not. Resending is safe: a document
//! replaces the one with its id, and a deletion with `missing_ok` counts ids already gone as
//! deleted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Method;
use serde::Serialize;

use super::http::success;
use super::replicas::Replica;
use super::{internal, Root};
use crate::cluster::routing::shard_of;
use crate::search::SearchError;

/// The most `wait_for` may wait for copies, beside the root's request time limit.
pub const WAIT_FOR_LIMIT: Duration = Duration::from_secs(30);

/// How often copies are asked for their generation while waiting for them.
const WAIT_FOR_POLL: Duration = Duration::from_millis(50);

/// What a write through the root did on each shard it concerned.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct BatchReport {
    /// Documents indexed (a batch) or deleted (a deletion), over all shards.
    pub indexed: usize,
    /// Per shard that received documents or ids, in shard order.
    pub shards: Vec<ShardWrite>,
}

/// One shard's part of a write.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ShardWrite {
    pub shard: usize,
    /// Documents (or ids) sent to it.
    pub documents: usize,
    /// The replicas that took it: the primary, or every replica of a shard without one.
    pub written_on: Vec<String>,
    /// The store generation holding the write, when the shard has a primary.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// Copies serving that generation when the answer was given (with `wait_for`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copies: Option<usize>,
}

/// A shard's replicas that take its writes, as asked at the time of a write.
pub(super) struct Writers {
    pub replicas: Vec<Arc<Replica>>,
    /// They are primaries: the shard's other replicas follow the store.
    pub primary: bool,
}

/// The characters a document id keeps escaped in a `/doc/{*id}` path (`/` stays: the route
/// takes the rest of the path).
const ID_IN_PATH: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}');

impl Root {
    /// A document by id, from the shard its id routes to (its first replica that answers):
    /// the leaf's status and JSON body.
    pub async fn document(&self, id: &str) -> Result<(u16, serde_json::Value), SearchError> {
        self.document_from(id, None).await
    }

    /// [`Root::document`], asking `first` before the shard's replicas.
    async fn document_from(
        &self,
        id: &str,
        first: Option<Arc<Replica>>,
    ) -> Result<(u16, serde_json::Value), SearchError> {
        let shard = shard_of(id, self.num_shards as u32) as usize;
        let path = percent_encoding::utf8_percent_encode(id, ID_IN_PATH);
        let mut last = String::from("no live replica");
        let shards = self.shards.load_full();
        for replica in first.iter().chain(&shards[shard]) {
            let Some(base) = replica.client.url() else {
                last = format!("{} is not reached over HTTP", replica.name());
                continue;
            };
            let url = format!("{base}/doc/{path}");
            match self.http.get(&url).await {
                Ok(r) if r.status.is_success() || r.status == 404 => {
                    match serde_json::from_slice(&r.body) {
                        Ok(v) => return Ok((r.status.as_u16(), v)),
                        Err(e) => last = format!("{url}: {e}"),
                    }
                }
                Ok(r) => last = format!("{url}: {}", r.status),
                Err(e) => last = format!("{url}: {e}"),
            }
        }
        Err(SearchError::Unavailable(format!(
            "no replica of shard {shard} answered ({last})"
        )))
    }

    /// Adds or replaces the NDJSON documents of `body` (the format of a leaf's
    /// `POST /admin/documents`): the whole batch is parsed and checked first, so a bad record
    /// rejects it before any shard is written; then each shard's lines go, as one batch, to
    /// the replicas of the shard that take writes ([`Root::write`]).
    pub async fn upsert(&self, body: &[u8], wait_for: usize) -> Result<BatchReport, SearchError> {
        crate::corpus::jsonl::parse_batch(body).map_err(|e| SearchError::Param {
            field: "body",
            message: e.to_string(),
        })?;
        let n = self.num_shards as u32;
        let mut parts: Vec<Vec<&[u8]>> = vec![Vec::new(); self.num_shards];
        for line in body.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: serde_json::Value = serde_json::from_slice(line)
                .map_err(|e| internal(format!("a checked record does not parse: {e}")))?;
            let id = value["id"]
                .as_str()
                .ok_or_else(|| internal("a checked record has no string id".into()))?;
            parts[shard_of(id, n) as usize].push(line);
        }
        let parts = parts
            .into_iter()
            .map(|lines| (lines.len(), lines.join(&b'\n')))
            .collect();
        self.write(
            "documents",
            "application/x-ndjson",
            parts,
            wait_for,
            "resending the batch is safe: a document replaces the one with its id",
        )
        .await
    }

    /// Deletes `ids` on the replicas that take writes of the shard each routes to
    /// ([`Root::write`]). Unless `missing_ok`, each id must be a document of the collection
    /// ([`Root::first_missing`], asked first); with it, ids already gone count as deleted, so
    /// a deletion can be resent.
    pub async fn delete(
        &self,
        ids: &[String],
        missing_ok: bool,
        wait_for: usize,
    ) -> Result<BatchReport, SearchError> {
        let n = self.num_shards as u32;
        let mut parts: Vec<Vec<&String>> = vec![Vec::new(); self.num_shards];
        for id in ids {
            parts[shard_of(id, n) as usize].push(id);
        }
        let mut bodies = Vec::with_capacity(parts.len());
        for ids in &parts {
            let body = if ids.is_empty() {
                Vec::new()
            } else {
                serde_json::to_vec(&serde_json::json!({ "ids": ids }))
                    .map_err(|e| internal(e.to_string()))?
            };
            bodies.push((ids.len(), body));
        }
        let path = if missing_ok {
            "documents/delete?missing_ok=true"
        } else {
            "documents/delete"
        };
        self.write(
            path,
            "application/json",
            bodies,
            wait_for,
            "resending the deletion with missing_ok=true is safe: ids already deleted count \
             as deleted",
        )
        .await
    }

    /// Sends each shard its part (`parts[s]`: how many documents or ids, and the body; none
    /// when 0) at `/cluster/v1/{path}` of the replicas that take its writes, all shards at
    /// once; then, with `wait_for` above 1, waits until that many copies of each written
    /// shard serve the generation holding the write. Shards that failed do not undo the
    /// others: the error names what was written where, and `resend` says how to finish.
    async fn write(
        &self,
        path: &str,
        content_type: &str,
        parts: Vec<(usize, Vec<u8>)>,
        wait_for: usize,
        resend: &str,
    ) -> Result<BatchReport, SearchError> {
        let shards = self.shards.load_full();
        if let Some((shard, replicas)) = parts
            .iter()
            .enumerate()
            .filter(|(_, (n, _))| *n > 0)
            .map(|(s, _)| (s, shards[s].len()))
            .find(|&(_, r)| wait_for > r)
        {
            return Err(SearchError::Param {
                field: "wait_for",
                message: format!(
                    "wait_for={wait_for}, but shard {shard} has {replicas} replicas; nothing \
                     was written"
                ),
            });
        }
        let sends = parts.iter().enumerate().filter(|(_, (n, _))| *n > 0).map(
            |(shard, (n, body))| async move {
                let outcome = self.write_shard(shard, path, content_type, body).await;
                (shard, *n, outcome)
            },
        );
        let outcomes = futures_util::future::join_all(sends).await;
        let mut report = BatchReport {
            indexed: 0,
            shards: Vec::new(),
        };
        let mut failed = Vec::new();
        for (shard, documents, outcome) in outcomes {
            match outcome {
                Ok((written_on, generation)) => {
                    report.indexed += documents;
                    report.shards.push(ShardWrite {
                        shard,
                        documents,
                        written_on,
                        generation,
                        copies: None,
                    });
                }
                Err(reason) => failed.push(format!(
                    "shard {shard} did not take its {documents}: {reason}"
                )),
            }
        }
        if !failed.is_empty() {
            let written: Vec<String> = report
                .shards
                .iter()
                .map(|w| match w.generation {
                    Some(g) => format!("shard {} ({}, generation {g})", w.shard, w.documents),
                    None => format!("shard {} ({})", w.shard, w.documents),
                })
                .collect();
            return Err(SearchError::Unavailable(format!(
                "{}; written: {}; {resend}",
                failed.join("; "),
                if written.is_empty() {
                    "nothing".to_string()
                } else {
                    written.join(", ")
                }
            )));
        }
        if wait_for > 1 {
            self.wait_for_copies(&mut report, wait_for).await?;
        }
        Ok(report)
    }

    /// Waits until `wanted` replicas of each shard of `report` written through a primary
    /// serve its generation, within [`WAIT_FOR_LIMIT`] and the root's request time limit.
    async fn wait_for_copies(
        &self,
        report: &mut BatchReport,
        wanted: usize,
    ) -> Result<(), SearchError> {
        let limit = WAIT_FOR_LIMIT.min(self.options.timeout.mul_f64(0.8));
        let started = Instant::now();
        let shards = self.shards.load_full();
        loop {
            let mut short = Vec::new();
            for w in report.shards.iter_mut() {
                let Some(g) = w.generation else { continue };
                let asked = shards[w.shard].iter().map(|r| async move {
                    let info =
                        tokio::time::timeout(self.options.leaf_timeout, r.client.info()).await;
                    matches!(info, Ok(Ok(i)) if i.store_generation >= Some(g))
                });
                let copies = futures_util::future::join_all(asked)
                    .await
                    .into_iter()
                    .filter(|&serving| serving)
                    .count();
                w.copies = Some(copies);
                if copies < wanted {
                    short.push(format!(
                        "shard {} ({copies} of {wanted} serve generation {g})",
                        w.shard
                    ));
                }
            }
            if short.is_empty() {
                return Ok(());
            }
            if started.elapsed() >= limit {
                return Err(SearchError::Unavailable(format!(
                    "written and durable on every shard's primary, but after {} ms too few \
                     copies serve it: {}",
                    limit.as_millis(),
                    short.join(", ")
                )));
            }
            tokio::time::sleep(WAIT_FOR_POLL).await;
        }
    }

    /// The replicas of `shard` that take its writes, asked now (`info`): its primaries when
    /// one answers as such; else, when none of its replicas follows a store, every replica,
    /// each of which must answer and take writes.
    pub(super) async fn writers(&self, shard: usize) -> Result<Writers, String> {
        let shards = self.shards.load_full();
        let replicas = &shards[shard];
        if replicas.is_empty() {
            return Err("no live replica".into());
        }
        let asked = replicas.iter().map(|r| async move {
            match tokio::time::timeout(self.options.leaf_timeout, r.client.info()).await {
                Ok(Ok(info)) => Ok(info),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!(
                    "no answer within {} ms",
                    self.options.leaf_timeout.as_millis()
                )),
            }
        });
        let infos = futures_util::future::join_all(asked).await;
        // One primary only, even when two say they are (one was fenced and has not noticed
        // yet, or an operator started two): the one holding the newest generation. Writing
        // both would make the second fail against the first's generation.
        let primary = replicas
            .iter()
            .zip(&infos)
            .filter_map(|(r, i)| match i {
                Ok(info) if info.primary => Some((info.store_generation, r)),
                _ => None,
            })
            .max_by_key(|(generation, _)| *generation);
        if let Some((_, r)) = primary {
            return Ok(Writers {
                replicas: vec![r.clone()],
                primary: true,
            });
        }
        let mut problems = Vec::new();
        let mut follows = false;
        for (r, info) in replicas.iter().zip(&infos) {
            match info {
                Ok(i) if i.writes => {}
                Ok(i) if i.store_generation.is_some() => follows = true,
                Ok(_) => problems.push(format!("{} takes no writes", r.name())),
                Err(e) => problems.push(format!("{} did not answer ({e})", r.name())),
            }
        }
        if follows {
            return Err(format!(
                "no primary of the shard is up (its replicas follow a store; {}); nothing was \
                 written to it",
                if problems.is_empty() {
                    "none takes writes".to_string()
                } else {
                    problems.join(", ")
                }
            ));
        }
        if !problems.is_empty() {
            return Err(format!(
                "{}: a shard without a primary is written on every replica, so nothing was \
                 written to it",
                problems.join(", ")
            ));
        }
        Ok(Writers {
            replicas: replicas.clone(),
            primary: false,
        })
    }

    /// Posts `body` to `/cluster/v1/{path}` of the replicas of `shard` that take its writes
    /// ([`Root::writers`]): the replicas written and the generation holding the write (from
    /// a primary's answer), or the first failure, naming its replica.
    async fn write_shard(
        &self,
        shard: usize,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<(Vec<String>, Option<u64>), String> {
        let writers = self.writers(shard).await?;
        let mut written = Vec::new();
        let mut generation = None;
        for replica in &writers.replicas {
            let Some(base) = replica.client.url() else {
                return Err(format!("{} takes no writes over HTTP", replica.name()));
            };
            let url = format!("{base}/cluster/v1/{path}");
            let headers = [("content-type", content_type)];
            let reply = self
                .http
                .send(
                    Method::POST,
                    &url,
                    &headers,
                    body.to_vec(),
                    self.options.timeout,
                )
                .await
                .and_then(success)
                .map_err(|reason| match written.is_empty() {
                    true => format!("{url}: {reason}"),
                    false => format!("{url}: {reason} (written on {written:?} before it)"),
                })?;
            if writers.primary {
                let answer: serde_json::Value = serde_json::from_slice(&reply)
                    .map_err(|e| format!("{url} answered no JSON: {e}"))?;
                generation = answer["generation"].as_u64().or(generation);
            }
            written.push(replica.name().to_string());
        }
        Ok((written, generation))
    }

    /// The first of `ids` (with its position) that is no document of the collection, asked
    /// of the shard each routes to: its primary when it has one (its replicas may not serve
    /// the newest writes yet), else its first replica that answers.
    pub async fn first_missing(
        &self,
        ids: &[String],
    ) -> Result<Option<(usize, String)>, SearchError> {
        for (i, id) in ids.iter().enumerate() {
            let shard = shard_of(id, self.num_shards as u32) as usize;
            let primary = match self.writers(shard).await {
                Ok(w) if w.primary => w.replicas.first().cloned(),
                _ => None,
            };
            let (status, _) = self.document_from(id, primary).await.map_err(|e| match e {
                SearchError::Unavailable(m) => {
                    SearchError::Unavailable(format!("{m}; nothing was deleted"))
                }
                other => other,
            })?;
            if status == 404 {
                return Ok(Some((i, id.clone())));
            }
        }
        Ok(None)
    }
}
