//! The training job (SPEC §3.5): the stored judgments, the logged clicks, or both
//! (`crate::training::index_sets`) become first-phase windows with features, a reranker is
//! trained on them with early stopping on a validation split of the queries, its file is
//! written to the models directory and it is registered, inactive, in the database. Progress
//! is the fraction of epochs run; every epoch is one JSON log line.
//!
//! A fifth of the queries of each class (judged queries; click queries, labelled by their
//! clicks) is held out of training for the activation guard when that fifth reaches
//! `guard::MIN_QUERIES`, the least that can refuse a model (`crate::training::guard`): the
//! model is compared on them with the first phase and the active model, and the comparison
//! and the held-out query ids are registered with it, so
//! `POST /admin/models/{id}/activate` later judges it on the same queries.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use super::JobContext;
use crate::db::Db;
use crate::rerank::MetricConvention;
use crate::search::Engine;
use crate::text::ModelKind;
use crate::training::clicks::{ClickOptions, ClickQuery};
use crate::training::{guard, index_sets, JudgedQuery, SetOptions, Sources, TrainSettings};

/// `value` as one of `T`'s values (those of the `rankd train` flag of the same name), or a
/// 400's field and message listing them: `debias must be "ips", "pairwise" or "none"`.
fn choice<T: clap::ValueEnum>(field: &str, value: &Value) -> Result<T, (String, String)> {
    if let Some(t) = value.as_str().and_then(|s| T::from_str(s, false).ok()) {
        return Ok(t);
    }
    let names: Vec<String> = T::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|p| format!("\"{}\"", p.get_name()))
        .collect();
    let list = match names.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => names.concat(),
    };
    Err((field.to_string(), format!("{field} must be {list}")))
}

/// What `POST /admin/train` accepts: a JSON object of [`TrainSettings`] fields (absent ones
/// take the defaults of training on the index, [`TrainSettings::on_index`], as `rankd train`
/// on judgments; `model: "gbdt"` trains trees), `first_phase`, the first-phase model whose
/// window is reranked (default bm25f), `activate` (activate the model when the guard lets
/// it), `force` (activate it even when the guard refuses; logged), `source` (what to learn
/// from: `"judgments"`, the default, `"clicks"`, or both as `["judgments", "clicks"]`), and
/// with clicks `debias` (`"ips"`, the default, `"pairwise"`, unbiased LambdaMART, which trains
/// `model: "gbdt"` on the logged lists, or `"none"`), `click_labels` (`"graded"`: one group
/// per query, click rates as labels, or `"binary"`: one group per clicked document; with ips
/// or none), `noise_floor` (`"estimate"` or `"none"`, with ips and binary labels) and
/// `propensity_clip`.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(transparent)]
pub struct TrainParams(pub serde_json::Map<String, Value>);

impl TrainParams {
    /// The training request, or the parameter at fault and what is wrong with it.
    pub fn request(&self) -> Result<TrainRequest, (String, String)> {
        let Ok(Value::Object(preset)) = serde_json::to_value(TrainSettings::on_index()) else {
            unreachable!("settings serialise as an object")
        };
        let mut merged = preset.clone();
        let mut first_phase = crate::training::DEFAULT_FIRST_PHASE;
        let (mut activate, mut force) = (false, false);
        let mut source = TrainSource {
            judgments: true,
            clicks: None,
        };
        let mut clicks = ClickOptions::default();
        let mut click_fields = Vec::new();
        for (field, value) in &self.0 {
            match field.as_str() {
                "source" => {
                    source = TrainSource::parse(value).map_err(|m| (field.clone(), m))?;
                    continue;
                }
                "debias" | "click_labels" | "noise_floor" => {
                    match field.as_str() {
                        "debias" => clicks.debias = choice(field, value)?,
                        "click_labels" => clicks.labels = choice(field, value)?,
                        _ => clicks.noise_floor = choice(field, value)?,
                    }
                    click_fields.push(field.clone());
                    continue;
                }
                "propensity_clip" => {
                    clicks.propensity_clip = value
                        .as_f64()
                        .filter(|c| *c > 0.0 && *c <= 1.0)
                        .ok_or_else(|| {
                            (
                                field.clone(),
                                "propensity_clip must be in (0, 1]".to_string(),
                            )
                        })?;
                    click_fields.push(field.clone());
                    continue;
                }
                _ => {}
            }
            if field == "activate" || field == "force" {
                let flag = value
                    .as_bool()
                    .ok_or_else(|| (field.clone(), format!("{field} must be true or false")))?;
                if field == "activate" {
                    activate = flag;
                } else {
                    force = flag;
                }
                continue;
            }
            if field == "first_phase" {
                first_phase = value
                    .as_str()
                    .ok_or_else(|| "first_phase must be a model name".to_string())
                    .and_then(str::parse)
                    .map_err(|e| (field.clone(), e))?;
                continue;
            }
            if !preset.contains_key(field) {
                return Err((field.clone(), format!("unknown field `{field}`")));
            }
            // Each field alone over the preset, so an error names it.
            let mut one = preset.clone();
            one.insert(field.clone(), value.clone());
            if let Err(e) = serde_json::from_value::<TrainSettings>(Value::Object(one)) {
                return Err((
                    field.clone(),
                    if field == "model" {
                        format!("unknown model {value} (known: linear, mlp, gbdt)")
                    } else {
                        format!("{field}: {e}")
                    },
                ));
            }
            merged.insert(field.clone(), value.clone());
        }
        let mut settings: TrainSettings = serde_json::from_value(Value::Object(merged))
            .map_err(|e| ("body".to_string(), e.to_string()))?;
        settings.validate().map_err(|crate::error::Invalid(m)| {
            let field = m.split_whitespace().next().unwrap_or("").to_string();
            (field, m)
        })?;
        if force && !activate {
            return Err(("force".into(), "force needs activate: true".into()));
        }
        match (&mut source.clicks, click_fields.first()) {
            (Some(options), _) => *options = clicks,
            (None, Some(field)) => {
                return Err((
                    field.clone(),
                    format!("{field} applies to training on clicks (source \"clicks\")"),
                ))
            }
            (None, None) => {}
        }
        if let Some(options) = &source.clicks {
            use crate::user_clicks::ips::{ClickLabels, Debias, NoiseFloor};
            // Refused here rather than when the job builds the groups (`click_set`).
            if options.debias == Debias::Ips
                && options.labels == ClickLabels::Graded
                && options.noise_floor == NoiseFloor::Estimate
            {
                return Err((
                    "noise_floor".into(),
                    "noise_floor estimate applies to click_labels \"binary\": graded labels \
                     are ordered by their click rates, which a floor does not reorder"
                        .into(),
                ));
            }
            // Unbiased LambdaMART trains lambda-ndcg trees, graded click labels objectives
            // that read only their order; anything else is refused here, naming the field that
            // chose it.
            let field = if options.debias == crate::user_clicks::ips::Debias::Pairwise {
                "debias"
            } else {
                "click_labels"
            };
            settings = settings
                .for_clicks(
                    options.debias,
                    options.labels,
                    self.0.contains_key("objective"),
                )
                .map_err(|crate::error::Invalid(m)| (field.to_string(), m))?;
        }
        Ok(TrainRequest {
            settings,
            first_phase,
            activate,
            force,
            source,
        })
    }
}

/// What a training job learns from.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainSource {
    /// The stored judgments.
    pub judgments: bool,
    /// The logged clicks, weighted so.
    pub clicks: Option<ClickOptions>,
}

impl TrainSource {
    /// `"judgments"`, `"clicks"`, or an array of them, each once.
    fn parse(value: &Value) -> Result<TrainSource, String> {
        let names: Vec<&Value> = match value {
            Value::Array(names) => names.iter().collect(),
            one => vec![one],
        };
        let mut source = TrainSource {
            judgments: false,
            clicks: None,
        };
        for name in &names {
            match name.as_str() {
                Some("judgments") if !source.judgments => source.judgments = true,
                Some("clicks") if source.clicks.is_none() => {
                    source.clicks = Some(ClickOptions::default())
                }
                _ => {
                    return Err(format!(
                        "source must be \"judgments\", \"clicks\" or both as an array, each \
                         once; got {value}"
                    ))
                }
            }
        }
        if names.is_empty() {
            return Err("source names nothing to learn from".into());
        }
        Ok(source)
    }
}

/// A checked `POST /admin/train` body.
#[derive(Debug, Clone)]
pub struct TrainRequest {
    pub settings: TrainSettings,
    pub first_phase: ModelKind,
    /// Activate the model if the guard lets it.
    pub activate: bool,
    /// Activate it even if the guard refuses.
    pub force: bool,
    pub source: TrainSource,
}

/// What a training job did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Trained {
    pub model: String,
    pub file: std::path::PathBuf,
    pub best_epoch: usize,
    pub epochs_run: usize,
    pub metrics: Value,
    /// The guard's comparison on the held-out queries.
    pub guard: guard::Comparison,
    /// What the training sets were built from.
    pub data: crate::training::SetsReport,
    /// With debias pairwise: the position biases of clicks and non-clicks learned with the
    /// trees, by rank, relative to rank 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position_bias: Option<crate::rerank::gbdt::train::unbiased::PositionBias>,
}

/// Judged queries from stored judgments: those with a stored query text.
pub(crate) fn judged_queries(stored: &[crate::db::judgments::StoredJudgment]) -> Vec<JudgedQuery> {
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

/// Runs inside a job: holds out the guard's queries, trains on the rest (judged queries
/// and click queries, [`index_sets`]), writes the model file, compares the model on the
/// held-out queries ([`guard`]) and registers it, inactive, with the comparison. Activating is
/// the caller's (it owns what is served).
pub fn run(
    engine: &Engine,
    db: &Db,
    judged: Vec<JudgedQuery>,
    clicks: Option<(Vec<ClickQuery>, ClickOptions)>,
    settings: TrainSettings,
    first_phase: ModelKind,
    ctx: &JobContext,
) -> anyhow::Result<Trained> {
    let name = match (judged.is_empty(), clicks.is_some()) {
        (false, true) => "stored judgments and logged clicks",
        (true, true) => "logged clicks",
        _ => "stored judgments",
    };
    let mut config = settings.config(name.into(), MetricConvention::Trec);
    ctx.log(&format!(
        "computing the {first_phase} windows of {} judged and {} click queries (a fifth of \
         each held out for the activation guard when enough)",
        judged.len(),
        clicks.as_ref().map_or(0, |(logged, _)| logged.len()),
    ));
    // The model trains on the default columns, which leave RM3 out: no need to compute it.
    let columns =
        crate::features::FeatureSet::current().default_training_columns(engine.dense().is_some());
    let sets = index_sets(
        engine,
        Sources { judged, clicks },
        &SetOptions {
            first_phase,
            window: crate::search::model::DEFAULT_WINDOW,
            columns: &columns,
            hold_out: true,
            valid_fraction: settings.valid_fraction,
            seed: config.seed,
        },
        &|| {},
    )?;
    ctx.log(&serde_json::to_string(&sets.report)?);
    // With debias pairwise the click groups learn from their logged lists.
    config.click_lists = sets.click_lists.clone().map(std::sync::Arc::new);
    if let Some(warning) = sets.report.clicks.as_ref().and_then(|c| c.warning()) {
        ctx.log(&format!("warning: {warning}"));
    }
    ctx.check_cancelled()?;
    let epochs = config.epochs().max(1) as f64;
    let outcome = crate::rerank::train(
        &sets.train,
        sets.valid.as_ref(),
        &config,
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
    let model = &crate::training::record_embedder(
        outcome.model,
        crate::training::embedder_of(engine).as_deref(),
    );
    let path = crate::search::model::store(&engine.index.dir, model)?;
    let candidate = crate::search::model::ActiveModel::new(model.clone(), path.clone())?;
    let comparison = guard::compare_on_index(
        engine,
        &sets.held_out,
        &candidate,
        engine.model().as_deref(),
    )?;
    ctx.log(&serde_json::to_string(&comparison)?);
    let mut record = crate::db::models::ModelRecord::of(model, &path, outcome.log.clone());
    super::models::attach_guard(&mut record, &comparison, &sets.held_out);
    tokio::runtime::Handle::current().block_on(db.registry().register(&record, None))?;
    ctx.progress(1.0, "done");
    Ok(Trained {
        model: model.id().to_string(),
        file: path,
        best_epoch: model.training.best_epoch,
        epochs_run: model.training.epochs_run,
        metrics: serde_json::to_value(&model.training.metrics)?,
        guard: comparison,
        data: sets.report,
        position_bias: outcome.position_bias,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body: Value) -> (String, String) {
        let Value::Object(fields) = body else {
            unreachable!("test bodies are objects")
        };
        TrainParams(fields).request().unwrap_err()
    }

    #[test]
    fn sources_are_judgments_clicks_or_both_each_once() {
        let source = |body: Value| {
            let Value::Object(fields) = body else {
                unreachable!("test bodies are objects")
            };
            TrainParams(fields).request().map(|r| r.source)
        };
        let clicks = Some(ClickOptions::default());
        let both = serde_json::json!({"source": ["clicks", "judgments"], "propensity_clip": 0.1});
        let with_clip = Some(ClickOptions {
            propensity_clip: 0.1,
            ..ClickOptions::default()
        });
        let floor = |f| {
            Some(ClickOptions {
                noise_floor: f,
                ..ClickOptions::default()
            })
        };
        let labels = |l| {
            Some(ClickOptions {
                labels: l,
                ..ClickOptions::default()
            })
        };
        use crate::user_clicks::ips::{ClickLabels, NoiseFloor};
        for (body, judgments, expected) in [
            (serde_json::json!({}), true, None),
            (serde_json::json!({"source": "clicks"}), false, clicks),
            (serde_json::json!({"source": ["judgments"]}), true, None),
            (both, true, with_clip),
            (
                serde_json::json!({"source": "clicks", "noise_floor": "none"}),
                false,
                floor(NoiseFloor::None),
            ),
            (
                serde_json::json!({"source": "clicks", "noise_floor": "estimate", "click_labels": "binary"}),
                false,
                Some(ClickOptions {
                    noise_floor: NoiseFloor::Estimate,
                    labels: ClickLabels::Binary,
                    ..ClickOptions::default()
                }),
            ),
            (
                serde_json::json!({"source": "clicks", "click_labels": "binary"}),
                false,
                labels(ClickLabels::Binary),
            ),
            (
                serde_json::json!({"source": "clicks", "click_labels": "graded"}),
                false,
                labels(ClickLabels::Graded),
            ),
        ] {
            let got = source(body.clone()).unwrap();
            assert_eq!((got.judgments, got.clicks), (judgments, expected), "{body}");
        }
        for body in [
            serde_json::json!({"source": ["clicks", "clicks"]}),
            serde_json::json!({"source": 1}),
            serde_json::json!({"propensity_clip": 0.5}),
            serde_json::json!({"noise_floor": "estimate"}),
            serde_json::json!({"source": "clicks", "noise_floor": 0.1}),
            serde_json::json!({"click_labels": "graded"}),
            serde_json::json!({"source": "clicks", "click_labels": "linear"}),
            serde_json::json!({"source": "clicks", "objective": "lambda-ndcg", "model": "gbdt"}),
            serde_json::json!({"source": "clicks", "noise_floor": "estimate"}),
        ] {
            assert!(source(body.clone()).is_err(), "{body}");
        }
        // A value out of a choice names the field and every value it takes.
        for (body, field, message) in [
            (
                serde_json::json!({"source": "clicks", "debias": "ipw"}),
                "debias",
                "debias must be \"ips\", \"pairwise\" or \"none\"",
            ),
            (
                serde_json::json!({"source": "clicks", "click_labels": "linear"}),
                "click_labels",
                "click_labels must be \"graded\" or \"binary\"",
            ),
            (
                serde_json::json!({"source": "clicks", "noise_floor": 0.1}),
                "noise_floor",
                "noise_floor must be \"estimate\" or \"none\"",
            ),
        ] {
            let Err(e) = source(body.clone()) else {
                panic!("{body} accepted")
            };
            assert_eq!(e, (field.to_string(), message.to_string()), "{body}");
        }
    }

    /// Issue 30, N3 and N19: a size a job would try to allocate, or a knob out of its
    /// domain, is a 400 naming the field and its bound before any job starts.
    #[test]
    fn sizes_beyond_their_bounds_are_refused_before_the_job() {
        for (body, field, says) in [
            (
                serde_json::json!({"model": "mlp", "hidden": [1_000_000_000]}),
                "hidden",
                "hidden layer widths must be at most 1024, got 1000000000",
            ),
            (
                serde_json::json!({"ensemble": 1_000_000_000}),
                "ensemble",
                "ensemble must be in 1..=64",
            ),
            (
                serde_json::json!({"average_epochs": 1_000_000_000}),
                "average_epochs",
                "average_epochs must be in 1..=100",
            ),
            (
                serde_json::json!({"epochs": 1_000_000_000}),
                "epochs",
                "epochs must be in 1..=10000",
            ),
            (
                serde_json::json!({"model": "gbdt", "trees": 10_000, "leaves": 100_000}),
                "trees",
                "trees × (2·leaves − 1) must be at most 4194304",
            ),
            (
                serde_json::json!({"model": "gbdt", "max_depth": 100_000}),
                "max_depth",
                "max_depth must be in 0..=2048",
            ),
            (
                serde_json::json!({"objective": "soprc", "soprc_quantiles": 100_000}),
                "soprc_quantiles",
                "soprc_quantiles must be at least 1 and at most 1024",
            ),
            (
                serde_json::json!({"soprc_quantiles": 0}),
                "soprc_quantiles",
                "soprc_quantiles must be at least 1",
            ),
        ] {
            let (f, message) = refusal(body.clone());
            assert_eq!(f, field, "{body}: {message}");
            assert!(message.starts_with(says), "{body}: {message}");
        }
    }
}
