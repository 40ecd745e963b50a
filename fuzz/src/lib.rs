//! What the fuzz targets share: a scratch directory for the readers that take a path, and a
//! rankd HTTP router over a small index (link scores, judgments, admin token) that requests
//! are sent to in-process, without a socket.
//!
//! The properties every target checks are the API's and the readers' promises: no panic, no
//! 5xx for any input, and every error answer is the documented JSON error object.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

use rankd::api::AppState;
use rankd::text::TextIndex;

pub mod targets;

pub const TOKEN: &str = "fuzz-admin-token-0123456789";

/// A directory for this process's scratch files, removed never (the fuzzer is killed, not
/// stopped); under the system temporary directory.
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("a temporary directory"))
        .path()
}

/// Writes `data` to the scratch file `name` and returns its path.
pub fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    let path = scratch().join(name);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).expect("create a scratch directory");
    }
    std::fs::write(&path, data).expect("write a scratch file");
    path
}

/// The router and the runtime that drives it.
pub struct Server {
    runtime: tokio::runtime::Runtime,
    router: Mutex<axum::Router>,
    /// What every request sends as `Authorization: Bearer ..`.
    bearer: &'static str,
}

/// The cluster key of [`leaf`].
pub const CLUSTER_KEY: &str = "fuzz-cluster-key-0123456789";

/// The server, built at the first call: 40 linked documents about six topics, link scores,
/// judgments for six queries, the admin API on.
pub fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| build("data", None, TOKEN))
}

/// The same index served as a leaf (`/cluster/v1/*`), every request with the cluster key.
pub fn leaf() -> &'static Server {
    static LEAF: OnceLock<Server> = OnceLock::new();
    LEAF.get_or_init(|| {
        let key = rankd::secret::ClusterKey::new(CLUSTER_KEY).expect("a valid key");
        build("leaf", Some(rankd::secret::Trust::Key(key)), CLUSTER_KEY)
    })
}

fn build(dir: &str, leaf: Option<rankd::secret::Trust>, bearer: &'static str) -> Server {
    let data = scratch().join(dir);
    let index = TextIndex::open_or_create(&data, None).expect("create the index");
    let topics = ["vector", "iterator", "thread", "socket", "parser", "matrix"];
    let docs = (0..40).map(|i| {
        let (t, o) = (topics[i % 6], topics[(i + 1) % 6]);
        let json = serde_json::json!({
            "id": format!("d{i}"), "url": format!("https://x.org/{t}/{i}"),
            "title": format!("{t} guide {i}"), "body": format!("{t} {o} basics about {o}"),
            "links": [format!("https://x.org/{o}/{}", (i + 1) % 40)],
        });
        let serde_json::Value::Object(object) = json else {
            unreachable!()
        };
        rankd::corpus::jsonl::document_from_object(object).expect("a valid document")
    });
    index.upsert(docs).expect("index the documents");
    rankd::links::compute_and_store(
        &index,
        &rankd::graph::LinkScoreOptions::default(),
        None,
        &mut |_| {},
    )
    .expect("link scores");
    let links = rankd::links::load_for_serving(&index)
        .expect("load the link scores")
        .map(|(l, _)| l);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let url = format!(
        "sqlite://{}?mode=rwc",
        scratch().join(format!("{dir}.db")).display()
    );
    let state = runtime.block_on(async {
        let db = rankd::db::Db::open(&url).await.expect("open the database");
        let limits = rankd::config::Limits::default();
        let events = rankd::events::EventStore::start(db.clone(), Default::default());
        let state = AppState::new(
            rankd::search::Engine::new(index).with_links(links),
            rankd::admin::Ops::new(db, Some(TOKEN), limits),
            events,
            leaf,
            None,
        );
        state.ready.store(true, std::sync::atomic::Ordering::SeqCst);
        Arc::new(state)
    });
    let server = Server {
        runtime,
        router: Mutex::new(rankd::api::router(state).expect("search threads")),
        bearer: TOKEN,
    };
    let judgments: Vec<_> = (0..6)
        .flat_map(|q| {
            (0..40).map(move |i| {
                serde_json::json!({"query_id": format!("q{q}"), "query": format!("{} basics", topics[q]),
                                   "doc_id": format!("d{i}"), "grade": i32::from(i % 6 == q)})
            })
        })
        .collect();
    let body = serde_json::to_vec(&judgments).expect("judgments serialise");
    let (status, answer) = server.send("POST", "/admin/judgments", "application/json", body);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    Server { bearer, ..server }
}

impl Server {
    /// Sends one request (with the server's bearer: the admin token, or a leaf's cluster key)
    /// and returns the status and body; panics, so the fuzzer reports it, on a 5xx or an
    /// error answer that is not the documented JSON.
    pub fn send(
        &self,
        method: &str,
        uri: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> (u16, Vec<u8>) {
        let Ok(request) = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {}", self.bearer))
            .header("content-type", content_type)
            .body(Body::from(body))
        else {
            // Not a request a client could send (an invalid URI).
            return (0, Vec::new());
        };
        let router = self
            .router
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let (status, bytes) = self.runtime.block_on(async {
            let response = router
                .oneshot(request)
                .await
                .expect("the router is infallible");
            let status = response.status().as_u16();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("read the answer");
            (status, bytes.to_vec())
        });
        assert!(
            status < 500,
            "{method} {uri}: {status} {}",
            String::from_utf8_lossy(&bytes)
        );
        if status >= 400 {
            let error: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                panic!("{method} {uri}: {status} with a body that is not JSON ({e})")
            });
            assert!(
                error["error"]["code"].is_string() && error["error"]["message"].is_string(),
                "{method} {uri}: {status} {error}"
            );
        }
        (status, bytes)
    }
}
