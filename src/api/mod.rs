//! The HTTP API (INTERFACE.md): routes, shared state, limits and graceful shutdown. Handlers
//! stay thin; the ranking lives in the library modules. What protects the server (one
//! concurrency limit, the time limit, JSON for every error, security headers) is in
//! `guard.rs`; the accept loop with its header-read timeout and connection shares in
//! `listen.rs`; the threads searches run on, shared between clients, in `search_pool.rs`.

pub mod admin;
pub mod cluster;
mod cluster_jobs;
mod cluster_models;
mod error;
mod events;
mod guard;
mod listen;
mod pages;
mod params;
mod root_state;
mod search;
mod search_pool;
mod shares;
mod strict;
mod telemetry;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Json, Router};
use tower::ServiceBuilder;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::ApiError;

/// What every handler can reach.
pub struct AppState {
    /// The index, its link scores and the active reranker (SPEC §3), the last two swapped
    /// atomically by the graph job and model activation: a request keeps the versions it
    /// started with, so a swap never drops or mixes requests.
    pub engine: crate::search::Engine,
    /// False until everything is loaded, and again while draining on shutdown.
    pub ready: AtomicBool,
    /// Database, job runner, admin token and limits.
    pub ops: crate::admin::Ops,
    /// Why the registry's active model is not the one served, when its file could not be
    /// loaded (at start-up): the server then ranks by the first phase alone and reports this
    /// in `GET /admin/models` until a model is activated or rolled back to.
    pub reranker_error: Mutex<Option<String>>,
    /// Wrong admin tokens per client address (429 after `limits.admin_auth_failures_per_minute`).
    pub auth_failures: crate::admin::auth::FailureThrottle,
    /// Serves the index as one shard of a collection too (`/cluster/v1/*`, `cluster.rs`),
    /// to callers holding the cluster key.
    pub leaf: Option<crate::secret::Trust>,
    /// The impression log and `POST /events`' store (`crate::events`).
    pub events: crate::events::EventStore,
    /// The running interleaving experiment (`admin::experiments`), read by every search.
    pub experiment: arc_swap::ArcSwapOption<admin::experiments::Running>,
    /// A leaf's place in its collection: which shard of how many it serves, when known
    /// (a shard directory of `rankd ingest --shards`, or a store's generation). Its writes
    /// refuse documents whose ids route to another shard.
    pub shard: Option<(u32, u32)>,
    /// The shard's primary: every committed write is published to the store before it is
    /// acknowledged (`crate::cluster::primary`). Set at start (`--primary`) or by the
    /// election while this leaf holds the lease (`crate::cluster::election`).
    pub primary: Arc<arc_swap::ArcSwapOption<crate::cluster::primary::Primary>>,
    /// The index follows a store's generations (a replica): it takes writes only while it is
    /// the primary.
    pub follows_store: bool,
}

impl AppState {
    /// The state of a server that is not ready yet (`ready` false), with no experiment
    /// running and the admin-token throttle its limits set; `reranker_error` says why the
    /// registry's active model is not served, if it is not.
    pub fn new(
        engine: crate::search::Engine,
        ops: crate::admin::Ops,
        events: crate::events::EventStore,
        leaf: Option<crate::secret::Trust>,
        reranker_error: Option<String>,
    ) -> AppState {
        let auth_failures =
            crate::admin::auth::FailureThrottle::new(ops.limits.admin_auth_failures_per_minute);
        AppState {
            engine,
            ready: AtomicBool::new(false),
            ops,
            reranker_error: Mutex::new(reranker_error),
            auth_failures,
            leaf,
            events,
            experiment: arc_swap::ArcSwapOption::empty(),
            shard: None,
            primary: Arc::new(arc_swap::ArcSwapOption::empty()),
            follows_store: false,
        }
    }

    /// A leaf serving shard `shard` of `shards`, its writes published by `primary` when it is
    /// the shard's primary, following a store when `follows_store` (it then takes writes only
    /// while the election makes it the primary).
    pub fn with_shard(
        mut self,
        shard: Option<(u32, u32)>,
        primary: Option<Arc<crate::cluster::primary::Primary>>,
        follows_store: bool,
    ) -> AppState {
        self.shard = shard;
        self.primary.store(primary);
        self.follows_store = follows_store;
        self
    }

    /// Whether this node takes writes: its admin API is on, and it is no replica following
    /// a store (or a primary another one fenced, or whose lease ran out).
    pub fn takes_writes(&self) -> Result<(), String> {
        if self.ops.token.is_none() {
            return Err(
                "its admin API is off (set RANKD_ADMIN_TOKEN; a leaf following a \
                        store is written through the shard's primary)"
                    .into(),
            );
        }
        match self.primary.load_full() {
            Some(p) => p.fenced().map_or(Ok(()), Err),
            None if self.follows_store => {
                Err("it follows the store, and the shard's primary takes its writes".into())
            }
            None => Ok(()),
        }
    }
}

impl AsRef<crate::search::Engine> for AppState {
    fn as_ref(&self) -> &crate::search::Engine {
        &self.engine
    }
}

/// The index's write lock, for the primary election (`crate::cluster::election`).
impl crate::cluster::election::Writes for AppState {
    fn writes(&self) -> &tokio::sync::Mutex<()> {
        &self.ops.index_writes
    }
}

/// What a leaf announces to its cluster (`crate::cluster::node::LeafGossip`).
impl crate::cluster::node::LeafStatus for AppState {
    fn ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    fn store_generation(&self) -> Option<u64> {
        self.engine.store_generation()
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "rankd",
        description = "Search-engine ranking server: public search API and bearer-token admin API"
    ),
    modifiers(&BearerAuth),
    // Named by a query parameter of `POST /admin/models`, which utoipa does not collect.
    components(schemas(crate::admin::models::UploadFormat)),
    tags(
        (name = "search", description = "Public ranking API"),
        (name = "operations", description = "Health, metrics and this document"),
        (name = "admin", description = "Operator API: `Authorization: Bearer TOKEN`"),
    )
)]
struct ApiDoc;

/// Declares the `bearer` security scheme the admin routes refer to.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
            );
    }
}

/// The routes and the OpenAPI document describing them, built together so that neither can
/// list a route the other lacks.
pub fn routes(state: Arc<AppState>) -> (Router<Arc<AppState>>, utoipa::openapi::OpenApi) {
    let (router, mut openapi) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(index_page))
        .routes(routes!(search::search))
        .routes(routes!(search::similar))
        .routes(routes!(events::post_events))
        .routes(routes!(livez))
        .routes(routes!(readyz))
        .routes(routes!(telemetry::metrics))
        .routes(routes!(openapi_json))
        .nest("/admin", admin::router(state))
        .split_for_parts();
    // `/doc/{*id}` takes ids with `/` in them, which utoipa's router cannot name: the route is
    // added to axum directly and its documentation (as `/doc/{id}`) merged in.
    #[derive(OpenApi)]
    #[openapi(paths(search::doc))]
    struct DocRoute;
    openapi.merge(DocRoute::openapi());
    error::document_errors(&mut openapi);
    (router.route("/doc/{*id}", get(search::doc)), openapi)
}

/// Every route with its middleware; an error when the search threads cannot be started.
pub fn router(state: Arc<AppState>) -> std::io::Result<Router> {
    let limits = state.ops.limits.clone();
    let (routes, openapi) = routes(state.clone());
    let declared = Arc::new(strict::Declared::from_openapi(&openapi));
    // `Router::layer` wraps every route on its own: the slots are one set shared by all of
    // them, so the limit is global (a per-route tower layer would not be).
    let slots = guard::Slots(shares::Shares::new(limits.max_concurrent_requests));
    Ok(routes
        // Undocumented query parameters are refused on every documented route.
        .layer(axum::middleware::from_fn(move |request, next| {
            strict::refuse_unknown(declared.clone(), request, next)
        }))
        // The web UI's admin page and assets: pages, not API, so outside the OpenAPI document
        // (`/admin` itself is public; only `/admin/...` needs the token).
        .route("/admin", get(pages::admin_page))
        .route("/static/{file}", get(pages::asset))
        .fallback(|| async { ApiError::not_found("no such route") })
        .merge(match state.leaf {
            Some(_) => cluster::leaf_routes(state.clone()),
            None => Router::new(),
        })
        .layer(Extension(Arc::new(openapi)))
        .layer(Extension(search_pool::SearchPool::new(&limits)?))
        .layer(
            // Outermost first.
            ServiceBuilder::new()
                .layer(axum::middleware::from_fn(guard::security_headers))
                .layer(axum::middleware::from_fn(guard::json_errors))
                .layer(axum::middleware::from_fn(guard::request_head_limits))
                .layer(axum::middleware::from_fn(guard::identity_bodies))
                .layer(axum::middleware::from_fn_with_state(
                    slots,
                    guard::shed_load,
                ))
                .layer(axum::middleware::from_fn_with_state(
                    Duration::from_secs(limits.request_timeout_secs),
                    guard::time_limit,
                ))
                // Enforced by the body extractors, so the admin routes can answer an
                // oversized body with a JSON 413 like every other error.
                .layer(axum::extract::DefaultBodyLimit::max(limits.max_body_bytes)),
        )
        .layer(axum::middleware::from_fn(telemetry::track))
        .with_state(state))
}

/// The search page, compiled into the binary so rankd serves it from anywhere. Its
/// parameters make a search shareable as a link; the page reads them in the browser.
#[utoipa::path(get, path = "/", tag = "search",
    params(
        ("q" = Option<String>, Query, description = "search at once for this text"),
        ("model" = Option<String>, Query, description = "first-phase model to select"),
        ("boost" = Option<String>, Query, description = "`pagerank` ticks the PageRank boost"),
        ("rerank" = Option<bool>, Query, description = "`false` unticks reranking"),
    ),
    responses((status = 200, description = "the search page", content_type = "text/html")))]
pub(crate) async fn index_page() -> axum::response::Html<&'static str> {
    axum::response::Html(include_str!("../../static/index.html"))
}

/// The OpenAPI 3.1 document of every route, generated from the code.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI document", content_type = "application/json")))]
async fn openapi_json(
    Extension(doc): Extension<Arc<utoipa::openapi::OpenApi>>,
) -> Json<Arc<utoipa::openapi::OpenApi>> {
    Json(doc)
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/livez", tag = "operations",
    responses((status = 200, description = "alive", content_type = "text/plain")))]
async fn livez() -> &'static str {
    "ok"
}

/// Readiness: 503 while starting or draining.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "ready; `ready (text models; document vectors being computed)` while dense search waits for its vectors"), (status = 503, description = "starting or draining")))]
async fn readyz(
    axum::extract::State(state): axum::extract::State<Arc<AppState>>,
) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::SeqCst) {
        // Text models serve while the document vectors are computed; the body says so.
        match state.engine.dense_status.get() {
            crate::dense::Progress::Embedding { .. } | crate::dense::Progress::Loading => (
                StatusCode::OK,
                "ready (text models; document vectors being computed)",
            ),
            _ => (StatusCode::OK, "ready"),
        }
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

/// Serves until SIGTERM or Ctrl-C, then stops accepting, reports not-ready and lets running
/// requests finish; over TLS when `tls` is given. `on_bound` receives the bound address
/// (port 0 picks a free one).
pub async fn serve(
    state: Arc<AppState>,
    addr: SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
    on_bound: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))?;
    // The signal handlers are installed before the address is announced: a SIGTERM that
    // arrives as soon as the server answers must drain it, not kill it.
    let shutdown = shutdown_signal()?;
    on_bound(listener.local_addr()?);
    state.ready.store(true, Ordering::SeqCst);
    let draining = state.clone();
    let limits = state.ops.limits.clone();
    let router =
        router(state).map_err(|e| anyhow::anyhow!("cannot start the search threads: {e}"))?;
    listen::run(listener, router, &limits, tls, async move {
        shutdown.await;
        draining.ready.store(false, Ordering::SeqCst);
        tracing::info!("shutting down: draining requests");
    })
    .await;
    Ok(())
}

/// A future that completes on SIGTERM or Ctrl-C; the handlers are registered when this is
/// called, not when the future is first polled.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        Ok(async move {
            tokio::select! {
                _ = term.recv() => {},
                _ = interrupt.recv() => {},
            }
        })
    }
    #[cfg(not(unix))]
    {
        Ok(async {
            let _ = tokio::signal::ctrl_c().await;
        })
    }
}
