//! The training job (SPEC §3.5): the stored judgments become first-phase windows with
//! features, a reranker is trained on them with early stopping on a validation split of the
//! queries, its file is written to the models directory and it is registered, inactive, in
//! the database. Progress is the fraction of epochs run; every epoch is one JSON log line.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Value};

use super::JobContext;
use crate::cli::learn::{LearnArgs, ModelArg};
use crate::db::Db;
use crate::judgments::{judged_windows, train_on_windows, JudgedQuery};
use crate::links::LinkData;
use crate::rerank::{MetricConvention, ObjectiveKind, TrainConfig};
use crate::text::{ModelKind, TextIndex};

/// What `POST /admin/train` accepts; absent fields take `rankd train`'s defaults.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TrainParams {
    #[serde(default)]
    pub objective: Option<ObjectiveKind>,
    /// `linear` or `mlp`.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub lr: Option<f64>,
    #[serde(default)]
    pub epochs: Option<usize>,
    #[serde(default)]
    pub batch: Option<usize>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub tau: Option<f32>,
    /// First-phase model whose window is reranked (default bm25f).
    #[serde(default)]
    pub first_phase: Option<String>,
}

impl TrainParams {
    /// The trainer's configuration, or what is wrong with a parameter.
    pub fn config(&self) -> Result<(TrainConfig, ModelKind), (String, String)> {
        let mut learn = LearnArgs {
            model: ModelArg::Linear,
            lr: 0.005,
            epochs: 100,
            patience: 50,
            ..LearnArgs::defaults()
        };
        if let Some(o) = self.objective {
            learn.objective = o;
        }
        match self.model.as_deref() {
            None | Some("linear") => learn.model = ModelArg::Linear,
            Some("mlp") => learn.model = ModelArg::Mlp,
            Some(other) => {
                return Err((
                    "model".into(),
                    format!("unknown model `{other}` (known: linear, mlp)"),
                ))
            }
        }
        let positive = |name: &str, v: f64| -> Result<(), (String, String)> {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err((
                    name.to_string(),
                    format!("{name} must be a positive number, got {v}"),
                ))
            }
        };
        if let Some(lr) = self.lr {
            positive("lr", lr)?;
            learn.lr = lr;
        }
        if let Some(e) = self.epochs {
            if e == 0 || e > 10_000 {
                return Err((
                    "epochs".into(),
                    format!("epochs must be in 1..=10000, got {e}"),
                ));
            }
            learn.epochs = e;
        }
        if let Some(b) = self.batch {
            if b == 0 {
                return Err(("batch".into(), "batch must be at least 1".into()));
            }
            learn.batch = b;
        }
        if let Some(s) = self.seed {
            learn.seed = s;
        }
        if let Some(t) = self.tau {
            positive("tau", f64::from(t))?;
            learn.tau = t;
        }
        let first_phase: ModelKind = self
            .first_phase
            .as_deref()
            .unwrap_or("bm25f")
            .parse()
            .map_err(|e| ("first_phase".to_string(), e))?;
        let config = TrainConfig {
            convention: MetricConvention::Trec,
            ..learn.config("stored judgments".into())
        };
        Ok((config, first_phase))
    }
}

/// Judged queries from stored judgments: those with a stored query text.
pub fn judged_queries(stored: &[crate::db::judgments::StoredJudgment]) -> Vec<JudgedQuery> {
    let mut by_query: HashMap<String, JudgedQuery> = HashMap::new();
    for s in stored {
        let Some(text) = &s.query else { continue };
        let q = by_query
            .entry(s.judgment.query_id.clone())
            .or_insert_with(|| JudgedQuery {
                qid: s.judgment.query_id.clone(),
                text: text.clone(),
                grades: HashMap::new(),
            });
        q.grades.insert(s.judgment.doc_id.clone(), s.judgment.grade);
    }
    let mut queries: Vec<JudgedQuery> = by_query.into_values().collect();
    queries.sort_by(|a, b| a.qid.cmp(&b.qid));
    queries
}

/// Runs inside a job: trains, writes the model file, registers it (inactive).
pub fn run(
    index: &TextIndex,
    links: Option<&LinkData>,
    db: &Db,
    queries: Vec<JudgedQuery>,
    config: TrainConfig,
    first_phase: ModelKind,
    ctx: &JobContext,
) -> anyhow::Result<Value> {
    ctx.check_cancelled()?;
    ctx.log(&format!(
        "computing the {first_phase} windows of {} judged queries",
        queries.len()
    ));
    let window = crate::second_phase::DEFAULT_WINDOW;
    // The model trains on the default columns, which leave RM3 out: no need to compute it.
    let (windows, stats) = judged_windows(
        index,
        links,
        &queries,
        first_phase,
        window,
        crate::features::Prf::Skip,
        &|| {},
    )?;
    ctx.log(&serde_json::to_string(&stats)?);
    ctx.check_cancelled()?;
    let epochs = config.epochs.max(1) as f64;
    let outcome = train_on_windows(
        &windows,
        &config,
        0.2,
        &mut |e| {
            ctx.progress(e.epoch as f64 / epochs, &format!("epoch {}", e.epoch));
            if let Ok(line) = serde_json::to_string(e) {
                ctx.log(&line);
            }
            crate::metrics::observe_training_epoch("map", e.valid_map);
            crate::metrics::observe_training_epoch("ndcg@10", e.valid_ndcg10);
        },
        ctx.cancel_flag(),
    )?;
    if outcome.cancelled {
        ctx.check_cancelled()?;
    }
    let model = &outcome.model;
    let path = crate::second_phase::store(&index.dir, model)?;
    let record = super::models::record(model, &path, outcome.log.clone());
    tokio::runtime::Handle::current().block_on(db.register_model(&record))?;
    ctx.progress(1.0, "done");
    Ok(json!({
        "model": model.id(),
        "file": path,
        "best_epoch": model.training.best_epoch,
        "epochs_run": model.training.epochs_run,
        "metrics": model.training.metrics,
    }))
}
