//! Interleaving experiments over HTTP (`crate::interleave`): start one comparing a candidate
//! reranker with the active one on a share of the searches, follow its counts, p-value and
//! verdict, stop it. At most one runs at a time.
//!
//! With `promote_on_win`, a candidate that wins (the always-valid p-value below `alpha` after
//! `min_impressions`: it is checked again and again, where the fixed-horizon sign test would
//! err far more often than alpha) is activated through the same path as `POST /admin/models/{id}/
//! activate` without the guard (the experiment is the evidence), the experiment ends as
//! `promoted`, and the promotion is logged (tracing and the experiment's `note`). The check
//! runs on every `GET` of the experiment and every [`WATCH_INTERVAL`] ([`watch`]).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};

use super::body;
use crate::api::guard::{begin_write, Commitment};
use crate::api::{ApiError, AppState};
use crate::db::experiments::{Experiment, ExperimentStatus, NewExperiment};
use crate::db::Db;
use crate::interleave::{Decision, Tally};
use crate::search::model::ActiveModel;
use crate::search::Engine;

/// The running experiment, as `/search` needs it: one atomic load per search finds it.
pub struct Running {
    pub id: i64,
    /// The candidate reranker, loaded (team B).
    pub candidate: Arc<ActiveModel>,
    /// The share of searches interleaved.
    pub share: f64,
}

impl Running {
    /// Whether the search with id `query_id` is interleaved: it falls in the share, and the
    /// candidate is not the served reranker itself (activated meanwhile by hand).
    pub fn applies(&self, engine: &Engine, query_id: &str) -> bool {
        crate::interleave::sampled(query_id, self.share)
            && engine
                .model()
                .is_some_and(|active| active.id() != self.candidate.id())
    }
}

/// `min_impressions` when the request does not say.
pub const DEFAULT_MIN_IMPRESSIONS: u64 = 100;
/// `alpha` when the request does not say.
pub const DEFAULT_ALPHA: f64 = 0.05;
/// How often [`watch`] looks for a promotion.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(10);
/// How often [`watch`] counts an experiment that cannot be promoted, for the metrics.
pub const METRICS_INTERVAL: Duration = Duration::from_secs(60);

/// `POST /admin/experiments`' body.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateExperiment {
    /// the candidate reranker: a registered model id
    candidate: String,
    /// the share of `/search` traffic interleaved, in (0, 1]
    share: f64,
    /// impressions logged before a verdict (default 100)
    min_impressions: Option<u64>,
    /// the sign test's significance level, in (0, 1) (default 0.05)
    alpha: Option<f64>,
    /// activate the candidate when it wins (default false)
    #[serde(default)]
    promote_on_win: bool,
}

/// An experiment with its counts and verdict.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ExperimentView {
    pub id: i64,
    pub status: ExperimentStatus,
    /// the candidate reranker (team B)
    pub candidate: String,
    /// the reranker active when the experiment started (team A)
    pub active: Option<String>,
    pub share: f64,
    pub min_impressions: u64,
    pub alpha: f64,
    pub promote_on_win: bool,
    /// RFC 3339
    pub created_at: String,
    pub stopped_at: Option<String>,
    /// what ended the experiment
    pub note: Option<String>,
    /// interleaved impressions logged
    pub impressions: u64,
    /// impressions with at least one click on a shown document
    pub clicked_impressions: u64,
    /// impressions whose active-ranker documents got more clicks
    pub wins_a: u64,
    /// impressions whose candidate documents got more clicks
    pub wins_b: u64,
    /// clicked impressions with as many clicks on each side
    pub ties: u64,
    /// two-sided exact sign test over `wins_a` and `wins_b`: valid read once, at a sample
    /// size fixed in advance (`min_impressions`)
    pub p_value: f64,
    /// the fixed-horizon verdict: `p_value` against `alpha` once `min_impressions` are logged
    pub decision: Decision,
    /// always-valid p-value (mixture sequential test), valid however often it is read
    pub sequential_p_value: f64,
    /// its verdict, which `promote_on_win` acts on
    pub sequential_decision: Decision,
}

impl ExperimentView {
    fn new(e: &Experiment, tally: &Tally) -> ExperimentView {
        let s = &e.settings;
        ExperimentView {
            id: e.id,
            status: e.status,
            candidate: s.candidate.clone(),
            active: s.active.clone(),
            share: s.share,
            min_impressions: s.min_impressions,
            alpha: s.alpha,
            promote_on_win: s.promote_on_win,
            created_at: crate::db::rfc3339(e.created_at),
            stopped_at: e.stopped_at.map(crate::db::rfc3339),
            note: e.note.clone(),
            impressions: tally.impressions,
            clicked_impressions: tally.clicked,
            wins_a: tally.wins_a,
            wins_b: tally.wins_b,
            ties: tally.ties,
            p_value: tally.p_value(),
            decision: tally.decision(s.alpha, s.min_impressions),
            sequential_p_value: tally.sequential_p_value(),
            sequential_decision: tally.sequential_decision(s.alpha, s.min_impressions),
        }
    }
}

/// Every experiment.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ExperimentList {
    /// the running experiment's id, if one runs
    pub running: Option<i64>,
    /// newest first
    pub experiments: Vec<ExperimentView>,
}

/// Starts an experiment: `share` of the searches that the active reranker ranks (first pages,
/// not collapsed) are answered with its ranking and the candidate's interleaved by team
/// draft, and the clicks `POST /events` reports on them credit the two.
#[utoipa::path(
    post, path = "/experiments", tag = "admin",
    request_body(content = CreateExperiment, content_type = "application/json"),
    responses(
        (status = 201, description = "the experiment, running", body = ExperimentView),
        (status = 400, description = "bad field (named in `error.field`): an unknown or unservable `candidate`, the active model as candidate, `share` outside (0, 1], `alpha` outside (0, 1), a wrong type or unknown key"),
        (status = 409, description = "an experiment is running already, no reranker is active, or impressions are not logged (`events.log_impressions`)"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn create(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    raw: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<ExperimentView>), ApiError> {
    let raw = body::bytes(raw)?;
    let request: CreateExperiment = body::json(&raw)?;
    let candidate = body::id("candidate", &request.candidate)?;
    if !(request.share.is_finite() && request.share > 0.0 && request.share <= 1.0) {
        return Err(ApiError::bad_request(
            "share",
            format!("share must be in (0, 1], got {}", request.share),
        ));
    }
    let alpha = request.alpha.unwrap_or(DEFAULT_ALPHA);
    if !(alpha.is_finite() && alpha > 0.0 && alpha < 1.0) {
        return Err(ApiError::bad_request(
            "alpha",
            format!("alpha must be in (0, 1), got {alpha}"),
        ));
    }
    if !state.events.settings.log_impressions {
        return Err(ApiError::conflict(
            "impressions are not logged (events.log_impressions = false): no click could \
             credit an interleaved answer",
        ));
    }
    let Some(active) = state.engine.model() else {
        return Err(ApiError::conflict(
            "no reranker is active: an experiment interleaves the active reranker's ranking \
             with the candidate's; activate a model first",
        ));
    };
    if active.id() == candidate {
        return Err(ApiError::bad_request(
            "candidate",
            format!("model {candidate} is the active reranker; name another model"),
        ));
    }
    let loaded = load_candidate(&state, &candidate)
        .await?
        .map_err(|message| ApiError::bad_request("candidate", message))?;
    begin_write(commitment)?;
    let new = NewExperiment {
        candidate: candidate.clone(),
        active: Some(active.id().to_string()),
        share: request.share,
        min_impressions: request.min_impressions.unwrap_or(DEFAULT_MIN_IMPRESSIONS),
        alpha,
        promote_on_win: request.promote_on_win,
    };
    let created = match state
        .ops
        .db
        .create_experiment(&new)
        .await
        .map_err(ApiError::internal)?
    {
        Ok(e) => e,
        Err(running) => {
            return Err(ApiError::conflict(format!(
                "experiment {running} is running; stop it first (POST /admin/experiments/{running}/stop)"
            )))
        }
    };
    state.experiment.store(Some(Arc::new(Running {
        id: created.id,
        candidate: Arc::new(loaded),
        share: new.share,
    })));
    tracing::info!(
        "experiment {} started: candidate {candidate} against {} on {} of the searches",
        created.id,
        active.id(),
        new.share
    );
    Ok((
        StatusCode::CREATED,
        Json(ExperimentView::new(&created, &Tally::default())),
    ))
}

/// The registered model `id` loaded for serving; `Ok(Err(why))` when it is not registered
/// or cannot be served.
async fn load_candidate(
    state: &AppState,
    id: &str,
) -> Result<Result<ActiveModel, String>, ApiError> {
    let Some(record) = state
        .ops
        .db
        .registry()
        .model(id)
        .await
        .map_err(ApiError::internal)?
    else {
        return Ok(Err(format!("no model with id {id:?} is registered")));
    };
    let path = std::path::PathBuf::from(&record.file_path);
    let loaded = tokio::task::spawn_blocking(move || ActiveModel::load(&path))
        .await
        .map_err(ApiError::internal)?;
    Ok(loaded.map_err(|e| format!("model {id} cannot be served: {e}")))
}

/// Every experiment, newest first, with its counts.
#[utoipa::path(
    get, path = "/experiments", tag = "admin",
    responses(
        (status = 200, description = "every experiment with its counts and verdict", body = ExperimentList),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list(
    State(state): State<Arc<AppState>>,
) -> Result<Json<ExperimentList>, ApiError> {
    let db = &state.ops.db;
    let mut experiments = Vec::new();
    for e in db.experiments().await.map_err(ApiError::internal)? {
        let tally = tally(db, e.id).await.map_err(ApiError::internal)?;
        experiments.push(ExperimentView::new(&e, &tally));
    }
    let running = experiments
        .iter()
        .find(|e| e.status == ExperimentStatus::Running)
        .map(|e| e.id);
    Ok(Json(ExperimentList {
        running,
        experiments,
    }))
}

/// One experiment: impressions, wins of each side, ties, p-value and verdict. A running
/// experiment with `promote_on_win` whose candidate has won is promoted first.
#[utoipa::path(
    get, path = "/experiments/{id}", tag = "admin",
    params(("id" = i64, Path, description = "experiment id")),
    responses(
        (status = 200, description = "the experiment with its counts and verdict", body = ExperimentView),
        (status = 400, description = "the id is not a positive integer"),
        (status = 404, description = "no such experiment"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get(
    State(state): State<Arc<AppState>>,
    Path(raw): Path<String>,
) -> Result<Json<ExperimentView>, ApiError> {
    let id = experiment_id(&raw)?;
    let db = &state.ops.db;
    let e = stored(db, id).await?;
    let tally = tally(db, id).await.map_err(ApiError::internal)?;
    let e = match promote_if_won(&state, &e, &tally).await {
        true => reread(db, e).await?,
        false => e,
    };
    Ok(Json(ExperimentView::new(&e, &tally)))
}

/// Stops a running experiment: searches are no longer interleaved; its counts stay.
#[utoipa::path(
    post, path = "/experiments/{id}/stop", tag = "admin",
    params(("id" = i64, Path, description = "experiment id")),
    responses(
        (status = 200, description = "the experiment, stopped", body = ExperimentView),
        (status = 400, description = "the id is not a positive integer"),
        (status = 404, description = "no such experiment"),
        (status = 409, description = "the experiment is not running"),
        (status = 401, description = "missing or wrong admin token"),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn stop(
    State(state): State<Arc<AppState>>,
    commitment: Option<Extension<Commitment>>,
    Path(raw): Path<String>,
) -> Result<Json<ExperimentView>, ApiError> {
    let id = experiment_id(&raw)?;
    let db = &state.ops.db;
    let e = stored(db, id).await?;
    begin_write(commitment)?;
    if !db
        .end_experiment(id, ExperimentStatus::Stopped, "stopped by the admin API")
        .await
        .map_err(ApiError::internal)?
    {
        return Err(ApiError::conflict(format!(
            "experiment {id} is not running ({})",
            serde_json::to_value(e.status).map_err(ApiError::internal)?
        )));
    }
    stop_serving(&state, id);
    tracing::info!("experiment {id} stopped");
    let e = reread(db, e).await?;
    let tally = tally(db, id).await.map_err(ApiError::internal)?;
    Ok(Json(ExperimentView::new(&e, &tally)))
}

/// The stored experiment `id`, else a 404.
async fn stored(db: &Db, id: i64) -> Result<Experiment, ApiError> {
    db.experiment(id)
        .await
        .map_err(ApiError::internal)?
        .ok_or_else(|| ApiError::not_found(format!("no experiment with id {id}")))
}

/// `e` as stored now (after a change of its status), or as it was if it is gone meanwhile.
async fn reread(db: &Db, e: Experiment) -> Result<Experiment, ApiError> {
    Ok(db
        .experiment(e.id)
        .await
        .map_err(ApiError::internal)?
        .unwrap_or(e))
}

/// An experiment id of the path: a positive integer, else a 400 naming `id`.
fn experiment_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>().ok().filter(|&id| id > 0).ok_or_else(|| {
        ApiError::bad_request(
            "id",
            format!("experiment id {raw:?} is not a positive integer"),
        )
    })
}

/// Searches stop interleaving for experiment `id` (if it is the one served).
fn stop_serving(state: &AppState, id: i64) {
    state.experiment.rcu(|running| match running {
        Some(r) if r.id == id => None,
        other => other.clone(),
    });
}

/// Promotes `e`'s candidate if `e` runs with `promote_on_win` and `tally` says the candidate
/// won; whether it did.
async fn promote_if_won(state: &AppState, e: &Experiment, tally: &Tally) -> bool {
    let s = &e.settings;
    if e.status != ExperimentStatus::Running
        || !s.promote_on_win
        || tally.sequential_decision(s.alpha, s.min_impressions) != Decision::CandidateWins
    {
        return false;
    }
    let note = format!(
        "promoted: the candidate won {} of {} decided impressions ({} ties, {} impressions), \
         always-valid p = {:.3e} < alpha {} (sign test p = {:.3e})",
        tally.wins_b,
        tally.wins_a + tally.wins_b,
        tally.ties,
        tally.impressions,
        tally.sequential_p_value(),
        s.alpha,
        tally.p_value()
    );
    if let Err(err) = super::models::activate_id(state, &s.candidate, None).await {
        tracing::warn!(
            "experiment {}: the candidate {} won but cannot be activated: {}",
            e.id,
            s.candidate,
            err.message
        );
        return false;
    }
    match state
        .ops
        .db
        .end_experiment(e.id, ExperimentStatus::Promoted, &note)
        .await
    {
        Ok(_) => {}
        Err(err) => tracing::error!("experiment {}: cannot record the promotion: {err}", e.id),
    }
    stop_serving(state, e.id);
    tracing::info!(
        "experiment {}: model {} activated; {note}",
        e.id,
        s.candidate
    );
    true
}

/// Restores the running experiment at start-up: its candidate is loaded and searches are
/// interleaved again. A candidate that cannot be loaded any more ends the experiment.
pub async fn resume(state: &AppState) -> anyhow::Result<()> {
    let Some(e) = state.ops.db.running_experiment().await? else {
        return Ok(());
    };
    match load_candidate(state, &e.settings.candidate).await {
        Ok(Ok(model)) => {
            tracing::info!(
                "experiment {} resumed: candidate {} on {} of the searches",
                e.id,
                e.settings.candidate,
                e.settings.share
            );
            state.experiment.store(Some(Arc::new(Running {
                id: e.id,
                candidate: Arc::new(model),
                share: e.settings.share,
            })));
        }
        Ok(Err(why)) | Err(ApiError { message: why, .. }) => {
            tracing::error!("experiment {} stopped at start-up: {why}", e.id);
            state
                .ops
                .db
                .end_experiment(e.id, ExperimentStatus::Stopped, &why)
                .await?;
        }
    }
    Ok(())
}

/// Checks the running experiment for a promotion every [`WATCH_INTERVAL`] (when it may be
/// promoted), and counts it for the metrics every [`METRICS_INTERVAL`] otherwise: a count
/// reads every impression of the experiment, too much to do every few seconds for nothing.
pub async fn watch(state: Arc<AppState>) {
    let mut tick = tokio::time::interval(WATCH_INTERVAL);
    let mut counted: Option<(i64, tokio::time::Instant)> = None;
    loop {
        tick.tick().await;
        let Some(id) = state.experiment.load().as_ref().map(|r| r.id) else {
            continue;
        };
        let db = &state.ops.db;
        let due = counted.is_none_or(|(last, at)| last != id || at.elapsed() >= METRICS_INTERVAL);
        let found = match db.experiment(id).await {
            Ok(Some(e)) if e.settings.promote_on_win || due => {
                tally(db, id).await.map(|t| Some((e, t)))
            }
            Ok(_) => Ok(None),
            Err(err) => Err(err),
        };
        match found {
            Ok(Some((e, tally))) => {
                counted = Some((id, tokio::time::Instant::now()));
                promote_if_won(&state, &e, &tally).await;
            }
            Ok(None) => {}
            Err(err) => tracing::warn!("experiment {id}: cannot read its counts: {err}"),
        }
    }
}

/// Experiment `id`'s counts from the stored impressions and clicks, also set as its metrics
/// (`rankd_experiment_impressions`, `rankd_experiment_p_value`).
async fn tally(db: &Db, id: i64) -> Result<Tally, sqlx::Error> {
    let tally = db.experiment_tally(id).await?;
    crate::metrics::observe_experiment(id, &tally);
    Ok(tally)
}
