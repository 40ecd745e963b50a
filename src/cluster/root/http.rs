//! The root's HTTP client and the HTTP transport of a replica ([`HttpShard`]): the leaf calls
//! of `crate::cluster::wire` as `POST /cluster/v1/*` with JSON bodies (the statistics table
//! as bytes), each with the cluster key (`crate::secret::ClusterKey`); over TLS to a leaf
//! whose URL is `https://` (hyper-rustls, the roots of `crate::tls::client_config`).
//!
//! hyper's own client (`hyper_util::client::legacy`) on the server's runtime: calls are
//! futures, a search's fan-out is one task's `join`, connections are kept alive per leaf,
//! and no thread waits on a socket. The root first blocked a pool thread per call (ureq), and
//! context switches between those threads were its largest cost under load
//! (docs/BENCHMARKS.md, sharded serving).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::transport::{CallFailure, ShardClient};
use crate::cluster::wire::*;
use crate::search::SearchError;
use crate::secret::ClusterKey;
use crate::text::stats_table::StatsTable;

/// The largest leaf answer read (a statistics table holds every term of its shard).
const MAX_REPLY: usize = 256 << 20;

/// How long fetching one shard's statistics table may take (it runs beside the searches,
/// which gather their statistics meanwhile).
pub(crate) const TABLE_TIMEOUT: Duration = Duration::from_secs(300);

/// The root's connections to its leaves: one pool of kept-alive connections, a timeout per
/// call. Cheap to clone (the pool is shared).
#[derive(Clone)]
pub struct Http {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// How long one call may take.
    pub timeout: Duration,
    /// The cluster key, sent with every call.
    key: Option<ClusterKey>,
}

/// A leaf's answer: its status and body.
pub struct Reply {
    pub status: StatusCode,
    pub body: Bytes,
}

impl Http {
    /// `tls`: the roots trusted for `https://` leaves (`None`: the system's).
    pub fn new(
        timeout: Duration,
        key: Option<ClusterKey>,
        tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    ) -> Self {
        let mut connector = HttpConnector::new();
        // Small request/answer pairs: Nagle's delay would hold each for the peer's ACK.
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(timeout));
        // https:// needs the connector to hand the URL's scheme on.
        connector.enforce_http(false);
        let tls = tls.unwrap_or_else(crate::tls::system_roots);
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*tls).clone())
            .https_or_http()
            .enable_http1()
            .wrap_connector(connector);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .build(connector);
        Http {
            client,
            timeout,
            key,
        }
    }

    /// Sends a request and reads the whole answer, within `timeout`.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Reply, String> {
        let mut request = Request::builder().method(method).uri(url);
        if let Some(key) = &self.key {
            request = request.header(hyper::header::AUTHORIZATION, key.bearer());
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| error_chain(&e))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_REPLY)
                .collect()
                .await
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            Ok(Reply { status, body })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(reply) => reply,
            Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
        }
    }

    /// `GET url`, within the call timeout.
    pub async fn get(&self, url: &str) -> Result<Reply, String> {
        self.send(Method::GET, url, &[], Vec::new(), self.timeout)
            .await
    }
}

/// An error with its causes (hyper's client names only the outermost).
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// The body of a 2xx answer, else why not. A 4xx means the root sent a call the leaf could
/// not take (a bug, a version mismatch, or a generation it no longer keeps): reported like a
/// dead replica so the search can go on elsewhere.
pub fn success(reply: Reply) -> Result<Bytes, String> {
    if reply.status.is_success() {
        Ok(reply.body)
    } else {
        Err(format!(
            "{}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body[..reply.body.len().min(500)])
        ))
    }
}

/// A leaf's 400 that is the search's own fault ([`crate::cluster::wire::BAD_SEARCH`]): the
/// search fails with it as a single index's would, and the replica is not blamed.
fn bad_search(reply: &Reply) -> Option<SearchError> {
    if reply.status != hyper::StatusCode::BAD_REQUEST {
        return None;
    }
    let body: serde_json::Value = serde_json::from_slice(&reply.body).ok()?;
    let error = body.get("error")?;
    if error.get("code")?.as_str()? != crate::cluster::wire::BAD_SEARCH {
        return None;
    }
    Some(SearchError::Param {
        field: static_field(error.get("field")?.as_str()?),
        message: error.get("message")?.as_str()?.to_string(),
    })
}

/// The `&'static str` a [`SearchError::Param`] names its field with, for a field name a leaf
/// sent: leaves name fields from the fixed set of search parameters, so each distinct name is
/// kept once; past [`MAX_FIELD_NAMES`] (a leaf sending names of its own), `search`.
fn static_field(name: &str) -> &'static str {
    use std::collections::HashSet;
    use std::sync::{Mutex, OnceLock};
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = crate::sync::Recover::locked(NAMES.get_or_init(Default::default));
    if let Some(known) = names.get(name) {
        return known;
    }
    if names.len() >= MAX_FIELD_NAMES || name.len() > 64 {
        return "search";
    }
    let kept: &'static str = Box::leak(name.to_string().into_boxed_str());
    names.insert(kept);
    kept
}

/// The most distinct field names [`static_field`] keeps.
const MAX_FIELD_NAMES: usize = 128;

/// One leaf serving shard `shard`, reached at `base` (`http://host:port`).
pub(crate) struct HttpShard {
    http: Http,
    base: String,
    shard: usize,
}

impl HttpShard {
    pub fn new(http: &Http, shard: usize, base: &str) -> Self {
        HttpShard {
            http: http.clone(),
            base: base.trim_end_matches('/').to_string(),
            shard,
        }
    }

    /// Posts `body` to `/cluster/v1/{call}`: the 2xx answer's bytes, timed and counted in
    /// the root's metrics.
    async fn post_bytes<B: Serialize>(
        &self,
        call: &'static str,
        body: &B,
        timeout: Duration,
    ) -> Result<Bytes, CallFailure> {
        let url = format!("{}/cluster/v1/{call}", self.base);
        let body = serde_json::to_vec(body).map_err(|e| {
            CallFailure::Search(SearchError::Internal(anyhow::anyhow!(
                "cannot encode the {call} call: {e}"
            )))
        })?;
        let sent = body.len();
        let start = Instant::now();
        let reply = self
            .http
            .send(
                Method::POST,
                &url,
                &[("content-type", "application/json")],
                body,
                timeout,
            )
            .await;
        let received = reply.as_ref().map_or(0, |r| r.body.len());
        crate::metrics::observe_leaf_call(
            call,
            self.shard,
            start.elapsed().as_secs_f64(),
            sent,
            received,
        );
        let reply = reply.map_err(|reason| CallFailure::Replica(format!("{url}: {reason}")))?;
        if let Some(e) = bad_search(&reply) {
            return Err(CallFailure::Search(e));
        }
        success(reply).map_err(|reason| CallFailure::Replica(format!("{url}: {reason}")))
    }

    /// Posts `body` to `/cluster/v1/{call}` and decodes the JSON answer.
    async fn post<B: Serialize, R: DeserializeOwned>(
        &self,
        call: &'static str,
        body: &B,
    ) -> Result<R, CallFailure> {
        let bytes = self.post_bytes(call, body, self.http.timeout).await?;
        serde_json::from_slice(&bytes).map_err(|e| {
            CallFailure::Replica(format!(
                "{}/cluster/v1/{call}: malformed reply: {e}",
                self.base
            ))
        })
    }
}

#[async_trait]
impl ShardClient for HttpShard {
    fn name(&self) -> &str {
        &self.base
    }

    fn url(&self) -> Option<&str> {
        Some(&self.base)
    }

    async fn info(&self) -> Result<InfoResponse, CallFailure> {
        let url = format!("{}/cluster/v1/info", self.base);
        let body = self
            .http
            .get(&url)
            .await
            .and_then(success)
            .map_err(|reason| CallFailure::Replica(format!("{url}: {reason}")))?;
        serde_json::from_slice(&body)
            .map_err(|e| CallFailure::Replica(format!("{url}: malformed reply: {e}")))
    }

    async fn stats(&self, call: &StatsCall) -> Result<StatsReply, CallFailure> {
        self.post("stats", call).await
    }

    async fn table(
        &self,
        call: &TableCall,
    ) -> Result<(u64, std::sync::Arc<StatsTable>), CallFailure> {
        let bytes = self.post_bytes("table", call, TABLE_TIMEOUT).await?;
        let (generation, table) = read_table_reply(&bytes)
            .map_err(|e| CallFailure::Replica(format!("{}/cluster/v1/table: {e}", self.base)))?;
        Ok((generation, std::sync::Arc::new(table)))
    }

    async fn query(&self, call: &QueryCall) -> Result<QueryReply, CallFailure> {
        self.post("query", call).await
    }

    async fn features(&self, call: &FeaturesCall) -> Result<FeaturesReply, CallFailure> {
        self.post("features", call).await
    }

    async fn feedback(&self, call: &FeedbackCall) -> Result<FeedbackReply, CallFailure> {
        self.post("feedback", call).await
    }

    async fn hits(&self, call: &HitsCall) -> Result<HitsReply, CallFailure> {
        self.post("hits", call).await
    }
}
