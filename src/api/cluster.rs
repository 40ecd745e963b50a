//! The cluster's HTTP surfaces: a leaf's `/cluster/v1/*` calls (beside its usual API, outside
//! the public OpenAPI document: only a root calls them) and a root's public `/search`.
//! Handlers are thin: the work is `crate::cluster::{leaf, root}`'s.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use super::admin::auth::{require_bearer, Bearer};
use super::error::ApiError;
use super::params::Query;
use super::search::{observe, SearchParams};
use super::AppState;
use crate::cluster::leaf::{self, LeafError, Pins};
use crate::cluster::root::transport::LocalShard;
use crate::cluster::wire::*;
use crate::search::{SearchError, SearchResponse};
use crate::secret::Trust;
use crate::sync::Recover;

impl From<LeafError> for ApiError {
    fn from(e: LeafError) -> Self {
        match e {
            LeafError::Protocol(_) => ApiError::bad_request("protocol", e.to_string()),
            LeafError::NoSuchDoc(_) => ApiError::bad_request("docs", e.to_string()),
            LeafError::Field { field, .. } => ApiError::bad_request(field, e.to_string()),
            LeafError::GenerationGone(_) | LeafError::Changed { .. } => {
                ApiError::conflict(e.to_string())
            }
            // The search's own fault (a parameter this shard cannot take, such as a boost by
            // link scores it lacks): marked, so that the root answers 400 too instead of
            // counting this replica as failed (`crate::cluster::root::http`).
            LeafError::Search(e @ (SearchError::Param { .. } | SearchError::Query(_))) => {
                let mut error = ApiError::from(e);
                error.code = crate::cluster::wire::BAD_SEARCH;
                error
            }
            LeafError::Search(e) => e.into(),
        }
    }
}

/// The leaf calls, for a node serving its index as one shard of a collection: the in-process
/// shard ([`LocalShard`]) the root's algorithm also calls directly, served over HTTP; and the
/// root's writes (the bodies of `/admin/documents` and `/admin/documents/delete`). Every one
/// needs the cluster key ([`require_key`]).
pub(crate) fn leaf_routes<S: Clone + Send + Sync + 'static>(state: Arc<AppState>) -> Router<S> {
    let leaf: Leaf = Arc::new(LocalShard::new(state.clone(), "this leaf"));
    let writes = Router::new()
        .route(
            "/cluster/v1/documents",
            post(super::admin::documents::upsert),
        )
        .route(
            "/cluster/v1/documents/delete",
            post(super::admin::documents::delete),
        )
        .route("/cluster/v1/links", post(store_links))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            writable,
        ))
        .route("/cluster/v1/info", get(info))
        .route("/cluster/v1/link_docs", post(link_docs))
        .with_state(state.clone());
    Router::new()
        .route("/cluster/v1/stats", post(stats))
        .route("/cluster/v1/table", post(table))
        .route("/cluster/v1/query", post(query))
        .route("/cluster/v1/features", post(features))
        .route("/cluster/v1/feedback", post(feedback))
        .route("/cluster/v1/hits", post(hits))
        .with_state(leaf)
        .merge(writes)
        .route_layer(axum::middleware::from_fn_with_state(state, require_key))
}

/// Every leaf call needs the cluster key: they read every document of the shard. Wrong keys
/// count against the caller's address like wrong admin tokens.
async fn require_key(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let Some(Trust::Key(key)) = state.leaf.clone() else {
        // `--insecure-cluster`, on a loopback address (checked where `rankd serve` starts).
        return next.run(request).await;
    };
    let secret = Bearer {
        what: "cluster key",
        shown_as: "KEY",
        realm: "Bearer realm=\"rankd cluster\"",
    };
    require_bearer(&state.auth_failures, request, next, secret, |k| {
        key.matches(k)
    })
    .await
}

/// A leaf takes its root's writes while its own admin API is on and it is no replica
/// following a store (nor a primary another one fenced).
async fn writable(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Err(why) = state.takes_writes() {
        return ApiError::unavailable("no_writes", format!("this leaf takes no writes: {why}"))
            .into_response();
    }
    next.run(request).await
}

type Leaf = Arc<LocalShard>;

/// Runs a leaf call on the request's own worker: like a single node's search, each call
/// takes about a millisecond at most, and a hand-off to the blocking pool (two context
/// switches) cost more than it saved.
async fn inline<R: Send + 'static>(
    leaf: Leaf,
    f: impl FnOnce(&crate::search::Engine, &Pins) -> Result<R, LeafError> + Send + 'static,
) -> Result<Json<R>, ApiError> {
    f(leaf.engine(), leaf.pins())
        .map(Json)
        .map_err(ApiError::from)
}

/// The shard's documents for a root's graph job, from the view of the index that its
/// generation names (both taken under the index's write lock, as a single node's graph job
/// takes them); read on the blocking pool.
async fn link_docs(
    State(state): State<Arc<AppState>>,
    Json(call): Json<LinkDocsCall>,
) -> Result<Json<LinkDocsReply>, ApiError> {
    let (searcher, generation) = {
        let _writing = state.ops.index_writes.lock().await;
        let generation =
            crate::links::generation_key(&state.engine.index).map_err(ApiError::internal)?;
        (state.engine.index.reader.searcher(), generation)
    };
    let engine = state.clone();
    let reply = tokio::task::spawn_blocking(move || {
        leaf::link_docs(&engine.engine, &searcher, generation, &call)
    })
    .await
    .map_err(ApiError::internal)??;
    Ok(Json(reply))
}

/// Stores and serves the shard's part of the collection's link scores from a root's graph
/// job, under the index's write lock (no batch commits between the generation check and the
/// store); a primary publishes them as its next generation before answering.
async fn store_links(
    State(state): State<Arc<AppState>>,
    commitment: Option<axum::Extension<super::guard::Commitment>>,
    Json(call): Json<LinksCall>,
) -> Result<Json<LinksReply>, ApiError> {
    let writing = state.ops.index_writes.lock().await;
    state.takes_writes().map_err(|why| {
        ApiError::unavailable("no_writes", format!("this leaf takes no writes: {why}"))
    })?;
    super::guard::begin_write(commitment)?;
    let engine = state.clone();
    let nodes = tokio::task::spawn_blocking(move || leaf::store_links(&engine.engine, call))
        .await
        .map_err(ApiError::internal)??;
    state.ops.link_freshness.locked().computed();
    let generation = super::admin::documents::publish(&state).await?;
    drop(writing);
    Ok(Json(LinksReply { nodes, generation }))
}

async fn info(State(state): State<Arc<AppState>>) -> Json<InfoResponse> {
    let mut info = leaf::info(&state.engine);
    info.writes = state.takes_writes().is_ok();
    info.primary = info.writes && state.primary.load().is_some();
    Json(info)
}

async fn stats(
    State(leaf): State<Leaf>,
    Json(call): Json<StatsCall>,
) -> Result<Json<StatsReply>, ApiError> {
    inline(leaf, move |e, p| leaf::stats(e, p, &call)).await
}

/// The table is computed once per generation, which takes a second or more on a large
/// shard: on the blocking pool, not a request worker.
async fn table(
    State(leaf): State<Leaf>,
    Json(call): Json<TableCall>,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    let (generation, bytes) =
        tokio::task::spawn_blocking(move || leaf::table(leaf.engine(), leaf.pins(), &call))
            .await
            .map_err(ApiError::internal)??;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/octet-stream")],
        table_reply(generation, &bytes),
    ))
}

async fn query(
    State(leaf): State<Leaf>,
    Json(call): Json<QueryCall>,
) -> Result<Json<QueryReply>, ApiError> {
    inline(leaf, move |e, p| leaf::query(e, p, &call)).await
}

async fn features(
    State(leaf): State<Leaf>,
    Json(call): Json<FeaturesCall>,
) -> Result<Json<FeaturesReply>, ApiError> {
    inline(leaf, move |e, p| leaf::features(e, p, &call)).await
}

async fn feedback(
    State(leaf): State<Leaf>,
    Json(call): Json<FeedbackCall>,
) -> Result<Json<FeedbackReply>, ApiError> {
    inline(leaf, move |e, p| leaf::feedback(e, p, &call)).await
}

async fn hits(
    State(leaf): State<Leaf>,
    Json(call): Json<HitsCall>,
) -> Result<Json<HitsReply>, ApiError> {
    inline(leaf, move |e, p| leaf::hits(e, p, &call)).await
}

pub(crate) use super::root_state::RootState;

/// A root's routes: `/search` with the single node's parameters and answers (and its
/// impressions logged), `POST /events`, `/doc`, `/similar` (501), the admin writes,
/// `/livez`, `/readyz`, `/metrics`, and the search page with its assets, behind the single
/// node's guards: security headers, JSON errors (405 included), request-head and body
/// limits (`limits.max_body_bytes`, a JSON 413), load shedding, the time limit, and on
/// `/admin/` the admin token with its throttle on wrong tokens.
pub(crate) fn root_router(state: Arc<RootState>, limits: &crate::config::Limits) -> Router {
    let slots = super::guard::Slots(super::shares::Shares::new(limits.max_concurrent_requests));
    let admin = Router::new()
        .route("/admin/documents", post(root_documents))
        .route("/admin/documents/delete", post(root_delete))
        .route("/admin/graph", post(super::cluster_jobs::graph))
        .route("/admin/jobs", get(super::cluster_jobs::list))
        .route("/admin/jobs/{id}", get(super::cluster_jobs::get))
        .route("/admin/jobs/{id}/cancel", post(super::cluster_jobs::cancel))
        .route(
            "/admin/models",
            get(super::cluster_models::list).post(super::cluster_models::upload),
        )
        .route(
            "/admin/models/rollback",
            post(super::cluster_models::rollback),
        )
        .route(
            "/admin/models/{id}/activate",
            post(super::cluster_models::activate),
        )
        .route(
            "/admin/models/{id}",
            axum::routing::delete(super::cluster_models::delete),
        )
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            root_require_token,
        ));
    Router::new()
        .route("/", get(super::index_page))
        .route("/static/{file}", get(super::pages::asset))
        .route("/search", get(root_search))
        .route("/events", post(root_events))
        .route("/doc/{*id}", get(root_doc))
        .route("/similar", get(root_similar))
        .merge(admin)
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(root_ready))
        .route("/openapi.json", get(super::openapi_json))
        .route(
            "/metrics",
            get(|| async {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    crate::metrics::render(),
                )
            }),
        )
        .fallback(|| async { ApiError::not_found("no such route") })
        .layer(axum::Extension(Arc::new(root_openapi())))
        .layer(
            // Outermost first, as on a single node (`super::router`). The time limit makes a
            // root's 408 likewise mean nothing was written (a write that began is answered
            // with its result).
            tower::ServiceBuilder::new()
                .layer(axum::middleware::from_fn(super::guard::security_headers))
                .layer(axum::middleware::from_fn(super::guard::json_errors))
                .layer(axum::middleware::from_fn(super::guard::request_head_limits))
                .layer(axum::middleware::from_fn(super::guard::identity_bodies))
                .layer(axum::middleware::from_fn_with_state(
                    slots,
                    super::guard::shed_load,
                ))
                .layer(axum::middleware::from_fn_with_state(
                    Duration::from_secs(limits.request_timeout_secs),
                    super::guard::time_limit,
                ))
                .layer(axum::extract::DefaultBodyLimit::max(limits.max_body_bytes)),
        )
        .with_state(state)
}

/// The OpenAPI document of a root's routes: the single node's public search, events and
/// operations routes and the admin writes a root takes (its own `wait_for` and
/// `missing_ok`), with the same error answers.
pub(crate) fn root_openapi() -> utoipa::openapi::OpenApi {
    use super::BearerAuth;
    use utoipa::OpenApi;
    #[derive(utoipa::OpenApi)]
    #[openapi(
        info(
            title = "rankd root",
            description = "A rankd root: one search over the shards of a collection, and the \
                           writes it routes to them"
        ),
        paths(root_search, root_events, root_doc, root_similar, root_documents, root_delete,
              super::cluster_jobs::graph, super::cluster_jobs::list, super::cluster_jobs::get,
              super::cluster_jobs::cancel,
              super::cluster_models::list, super::cluster_models::upload,
              super::cluster_models::activate, super::cluster_models::rollback,
              super::cluster_models::delete,
              root_ready, super::livez, super::openapi_json, super::telemetry::metrics),
        modifiers(&BearerAuth),
        tags(
            (name = "search", description = "Public ranking API"),
            (name = "operations", description = "Health, metrics and this document"),
            (name = "admin", description = "Operator API: `Authorization: Bearer TOKEN`"),
        )
    )]
    struct RootApiDoc;
    let mut doc = RootApiDoc::openapi();
    super::error::document_errors(&mut doc);
    doc
}

/// A search of the whole collection: the single node's parameters and answer
/// (`partial` and `shards` say which shards answered).
#[utoipa::path(
    get, path = "/search", tag = "search",
    params(SearchParams,
        ("X-Client-Id" = Option<String>, Header, description = "the client, stored with the impression")),
    responses(
        (status = 200, description = "ranked hits of every shard that answered", body = SearchResponse),
        (status = 400, description = "bad parameter, named in `error.field`"),
        (status = 503, description = "a shard without a live replica while partial answers are off, or no answer within the time limit"),
    )
)]
async fn root_search(
    State(state): State<Arc<RootState>>,
    headers: axum::http::HeaderMap,
    Query(p): Query<SearchParams>,
) -> Result<Json<SearchResponse>, ApiError> {
    let mut query = p.into_query(state.root.model().is_some())?;
    query.requester_langs = super::search::requester_langs(&headers);
    let mut response = state.root.search(&query).await?;
    observe(&query, &response);
    let client = super::search::client_id(&headers);
    response.log(&query, &state.events, None, None, client);
    Ok(Json(response))
}

/// `POST /events` on a root: the clicks on the root's answers, stored as a single node
/// stores them.
#[utoipa::path(
    post, path = "/events", tag = "search",
    request_body(content = String, description = "a JSON array of events or NDJSON, as on a single node", content_type = "application/json"),
    responses(
        (status = 200, description = "every event stored", body = super::events::EventsAccepted),
        (status = 400, description = "a bad event: `error.field` names the field"),
        (status = 413, description = "body over events.max_body_bytes"),
    )
)]
async fn root_events(
    State(state): State<Arc<RootState>>,
    request: axum::extract::Request,
) -> Result<Json<super::events::EventsAccepted>, axum::response::Response> {
    super::events::accept(&state.events, request).await
}

/// Every `/admin/` request to a root needs its admin token, checked as a single node checks
/// its own (`super::admin::auth::require_admin`): 503 when none is configured, 401 for a
/// missing or wrong one, 429 once an address has sent too many wrong ones within the minute.
async fn root_require_token(
    State(state): State<Arc<RootState>>,
    request: Request,
    next: Next,
) -> Response {
    super::admin::auth::require_admin(&state.auth_failures, state.token.as_ref(), request, next)
        .await
}

/// The parameters of a write through a root.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct RootWriteParams {
    /// copies of each written shard that must serve the write before the answer (a primary
    /// and its replicas following the store; default 1, the primary)
    wait_for: Option<usize>,
    /// deletion only: ids that are no document count as deleted already (default false)
    missing_ok: Option<bool>,
}

impl super::params::QueryParams for RootWriteParams {
    const NAMES: &'static [&'static str] = &["wait_for", "missing_ok"];
}

impl RootWriteParams {
    fn wait_for(&self) -> Result<usize, ApiError> {
        match self.wait_for {
            Some(0) => Err(ApiError::bad_request("wait_for", "wait_for is at least 1")),
            n => Ok(n.unwrap_or(1)),
        }
    }
}

/// `POST /admin/documents` on a root: the batch checked whole, then each shard's documents
/// sent to its primary (or to every replica of a shard without one); the answer names each
/// shard's part and, through a primary, the generation holding it.
#[utoipa::path(
    post, path = "/admin/documents", tag = "admin",
    params(RootWriteParams),
    request_body(content = String, content_type = "application/x-ndjson",
                 description = "one JSON document per line, as a single node's"),
    responses(
        (status = 200, description = "`{\"indexed\":N,\"shards\":[{shard,documents,written_on,generation,copies}]}`", body = crate::cluster::root::BatchReport),
        (status = 400, description = "a bad record (its line is named), or `wait_for` above a shard's replicas; nothing written"),
        (status = 401, description = "missing or wrong admin token"),
        (status = 503, description = "a shard did not take its documents: the message names what was written where"),
    ),
    security(("bearer" = []))
)]
async fn root_documents(
    State(state): State<Arc<RootState>>,
    commitment: Option<axum::Extension<super::guard::Commitment>>,
    Query(p): Query<RootWriteParams>,
    raw: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Json<crate::cluster::root::BatchReport>, ApiError> {
    let body = super::admin::body::bytes(raw)?;
    if p.missing_ok.is_some() {
        return Err(ApiError::bad_request(
            "missing_ok",
            "missing_ok applies to deletions",
        ));
    }
    let wait_for = p.wait_for()?;
    super::guard::begin_write(commitment)?;
    Ok(Json(state.root.upsert(&body, wait_for).await?))
}

/// `POST /admin/documents/delete` on a root: `{"ids": [..]}`, all or none as on a single
/// node (an id that is no document of the collection is a 404, nothing deleted) unless
/// `missing_ok`, then each shard's ids deleted where its writes go.
#[utoipa::path(
    post, path = "/admin/documents/delete", tag = "admin",
    params(RootWriteParams),
    request_body(content = String, content_type = "application/json",
                 description = "`{\"ids\":[\"doc-1\",\"doc-2\"]}`"),
    responses(
        (status = 200, description = "`{\"deleted\":N,\"shards\":[...]}`"),
        (status = 400, description = "not a list of ids"),
        (status = 401, description = "missing or wrong admin token"),
        (status = 404, description = "an id is not a document (named in `field`) and `missing_ok` is not set; nothing deleted"),
        (status = 503, description = "a shard did not delete its ids: the message names what was deleted where"),
    ),
    security(("bearer" = []))
)]
async fn root_delete(
    State(state): State<Arc<RootState>>,
    commitment: Option<axum::Extension<super::guard::Commitment>>,
    Query(p): Query<RootWriteParams>,
    raw: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let raw = super::admin::body::bytes(raw)?;
    let request: super::admin::documents::DeleteRequest = super::admin::body::json(&raw)?;
    let ids = request.ids()?;
    let wait_for = p.wait_for()?;
    let missing_ok = p.missing_ok.unwrap_or(false);
    if !missing_ok {
        if let Some((i, id)) = state.root.first_missing(&ids).await? {
            let mut e =
                ApiError::not_found(format!("no document with id {id:?}; nothing was deleted"));
            e.field = Some(format!("ids[{i}]"));
            return Err(e);
        }
    }
    super::guard::begin_write(commitment)?;
    let report = state.root.delete(&ids, missing_ok, wait_for).await?;
    Ok(Json(serde_json::json!({
        "deleted": report.indexed,
        "shards": report.shards,
    })))
}

/// `GET /doc/{id}` on a root: the document from the shard its id routes to.
#[utoipa::path(
    get, path = "/doc/{id}", tag = "search",
    params(("id" = String, Path, description = "document id (may contain `/`)")),
    responses(
        (status = 200, description = "stored fields, from the shard the id routes to"),
        (status = 404, description = "no such document"),
        (status = 503, description = "no replica of its shard answered"),
    )
)]
async fn root_doc(
    State(state): State<Arc<RootState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
) -> Result<(StatusCode, Json<serde_json::Value>), ApiError> {
    let (status, body) = state.root.document(&id).await?;
    Ok((
        StatusCode::from_u16(status).unwrap_or(StatusCode::OK),
        Json(body),
    ))
}

/// `GET /similar` on a root: 501. SimRank's single-source scores walk the whole link graph
/// from the document, and each shard holds only its own documents' part of it (their scores
/// and out-links); serving it would mean the graph's walks across every leaf per request, or a
/// copy of the whole graph on the root, which is what sharding the collection avoids. Serve
/// `/similar` from an unsharded copy of the collection (`rankd graph` on it), as a leaf's 503
/// `sharded_link_graph` says too.
#[utoipa::path(
    get, path = "/similar", tag = "search",
    responses((status = 501, description = "not served by a root: SimRank needs the whole link graph"))
)]
async fn root_similar() -> ApiError {
    ApiError {
        status: StatusCode::NOT_IMPLEMENTED,
        code: "sharded_link_graph",
        message: "/similar is not served by a root: SimRank needs the whole link graph, and \
                  each shard holds only its part; serve it from an unsharded copy of the \
                  collection"
            .into(),
        field: None,
    }
}

/// A root's readiness: 503 while starting or draining; 503 naming the shards without a live
/// replica when partial answers are not allowed, 200 saying `degraded` when they are.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "ready (or `degraded` with partial answers allowed)"), (status = 503, description = "starting, draining, or a shard without a live replica while partial answers are off")))]
async fn root_ready(State(state): State<Arc<RootState>>) -> (StatusCode, String) {
    if !state.ready.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready".into());
    }
    let down = state.root.shards_down();
    match (down.is_empty(), state.root.allows_partial()) {
        (true, _) => (StatusCode::OK, "ready".into()),
        (false, true) => (
            StatusCode::OK,
            format!("degraded: no live replica of shards {down:?}"),
        ),
        (false, false) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no live replica of shards {down:?}"),
        ),
    }
}

/// Serves a root until SIGTERM or Ctrl-C, then drains like the single node
/// (`super::serve`). `on_bound` receives the bound address.
pub(crate) async fn serve_root(
    state: Arc<RootState>,
    addr: std::net::SocketAddr,
    limits: &crate::config::Limits,
    tls: Option<Arc<rustls::ServerConfig>>,
    on_bound: impl FnOnce(std::net::SocketAddr),
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    let shutdown = super::shutdown_signal()?;
    on_bound(listener.local_addr()?);
    state.ready.store(true, Ordering::SeqCst);
    let draining = state.clone();
    let log = state.events.log.clone();
    let router = root_router(state, limits);
    super::listen::run(listener, router, limits, tls, async move {
        shutdown.await;
        draining.ready.store(false, Ordering::SeqCst);
        tracing::info!("shutting down: draining requests");
    })
    .await;
    // The impressions of the last answers are still queued: write them before exiting.
    if !log.flush(Duration::from_secs(10)).await {
        tracing::warn!("impressions still queued at exit were not written");
    }
    Ok(())
}
