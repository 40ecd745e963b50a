//! What a root does besides searching: documents by id, and admin writes fanned out to the
//! replicas of the shards concerned, over HTTP with the cluster key (a leaf's
//! `POST /cluster/v1/documents` and `/cluster/v1/documents/delete`, which take the bodies of
//! its `/admin/documents` and `/admin/documents/delete`; `GET /doc/{id}`). The admin token a
//! root's client sends stays on the root.
//!
//! Shards commit one after the other, not together: a replica failing leaves the shards
//! before it written, and the error says which (as Elasticsearch's bulk API reports per
//! shard). Resending the same batch is safe: a document replaces the one with its id.

use hyper::Method;
use serde::Serialize;

use super::http::success;
use super::{internal, Root};
use crate::cluster::routing::shard_of;
use crate::search::SearchError;

/// What a document batch through the root did on each shard.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BatchReport {
    /// Documents indexed, over all shards.
    pub indexed: usize,
    /// Per shard that received documents: its number and how many.
    pub shards: Vec<(usize, usize)>,
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
        let shard = shard_of(id, self.num_shards as u32) as usize;
        let path = percent_encoding::utf8_percent_encode(id, ID_IN_PATH);
        let mut last = String::from("no live replica");
        let shards = self.shards.load_full();
        for replica in &shards[shard] {
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
    /// every replica of the shard.
    pub async fn upsert(&self, body: &[u8]) -> Result<BatchReport, SearchError> {
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
        let mut report = BatchReport {
            indexed: 0,
            shards: Vec::new(),
        };
        for (shard, lines) in parts.iter().enumerate() {
            if lines.is_empty() {
                continue;
            }
            let batch = lines.join(&b'\n');
            let sent = self
                .admin_write(shard, "documents", "application/x-ndjson", batch)
                .await;
            if let Err(reason) = sent {
                let done: Vec<usize> = report.shards.iter().map(|(s, _)| *s).collect();
                return Err(SearchError::Unavailable(format!(
                    "shard {shard} did not take its {} documents: {reason}; shards written \
                     before it: {done:?}; resending the batch is safe",
                    lines.len()
                )));
            }
            report.indexed += lines.len();
            report.shards.push((shard, lines.len()));
        }
        Ok(report)
    }

    /// Posts `body` to `/cluster/v1/{path}` of every replica of `shard` (with the cluster
    /// key, as every call); the first failure, naming its replica.
    async fn admin_write(
        &self,
        shard: usize,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<(), String> {
        let shards = self.shards.load_full();
        if shards[shard].is_empty() {
            return Err("no live replica".into());
        }
        for replica in &shards[shard] {
            let Some(base) = replica.client.url() else {
                return Err(format!("{} takes no writes over HTTP", replica.name()));
            };
            let url = format!("{base}/cluster/v1/{path}");
            let headers = [("content-type", content_type)];
            self.http
                .send(
                    Method::POST,
                    &url,
                    &headers,
                    body.clone(),
                    self.http.timeout,
                )
                .await
                .and_then(success)
                .map_err(|reason| format!("{url}: {reason}"))?;
        }
        Ok(())
    }

    /// The first of `ids` (with its position) that is no document of the collection, asked
    /// of the shard each routes to (its first replica that answers).
    pub async fn first_missing(
        &self,
        ids: &[String],
    ) -> Result<Option<(usize, String)>, SearchError> {
        for (i, id) in ids.iter().enumerate() {
            let (status, _) = self.document(id).await.map_err(|e| match e {
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

    /// Deletes `ids` (each a document of the collection, [`Root::first_missing`]) on every
    /// replica of the shard each routes to. Shards commit one after the other, as batches do.
    pub async fn delete(&self, ids: &[String]) -> Result<usize, SearchError> {
        let n = self.num_shards as u32;
        let mut parts: Vec<Vec<&String>> = vec![Vec::new(); self.num_shards];
        for id in ids {
            parts[shard_of(id, n) as usize].push(id);
        }
        let mut done = Vec::new();
        for (shard, ids) in parts.iter().enumerate() {
            if ids.is_empty() {
                continue;
            }
            let body = serde_json::to_vec(&serde_json::json!({ "ids": ids }))
                .map_err(|e| internal(e.to_string()))?;
            let sent = self
                .admin_write(shard, "documents/delete", "application/json", body)
                .await;
            if let Err(reason) = sent {
                return Err(SearchError::Unavailable(format!(
                    "shard {shard} did not delete its {} documents: {reason}; shards done \
                     before it: {done:?}; resending the deletion is safe only for the ids not \
                     yet deleted",
                    ids.len()
                )));
            }
            done.push(shard);
        }
        Ok(ids.len())
    }
}
