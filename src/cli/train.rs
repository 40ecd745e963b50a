//! `rankd train`: train a reranker and write its model file (SPEC §3.5, INTERFACE.md).
//!
//! Training data comes from a [`Source`]: LETOR/SVMlight files, or judgments on the index
//! (queries + qrels), whose first-phase windows get the feature set of SPEC §3.1, or the
//! server's logged clicks (`--clicks`, `crate::training::clicks`), alone or beside judgments.
//! A model trained on the index can be activated for serving (`--activate`).

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Context;

use super::learn::{rank_sets, read_letor, run_training, LearnArgs, SelectArgs};
use crate::error::Invalid;
use crate::rerank::RankSet;
use crate::training::JudgedQuery;
use crate::training::TrainSettings;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("source")
    .args(["letor", "queries", "judgments", "from_db"])))]
#[command(group(clap::ArgGroup::new("database").multiple(true).args(["from_db", "clicks"])))]
pub struct TrainArgs {
    /// Training data: a LETOR/SVMlight file (`label [qid:Q] index:value ...`).
    #[arg(long)]
    pub letor: Option<PathBuf>,
    /// Training data: judged queries on the index (`qid text` lines, or Cranfield's
    /// `cran.qry` with `--format cranfield`), with `--qrels`.
    #[arg(long, requires = "qrels")]
    pub queries: Option<PathBuf>,
    #[arg(long, requires = "queries")]
    pub qrels: Option<PathBuf>,
    #[command(flatten)]
    pub formats: super::features::JudgedFormats,
    /// Training data: judgments on the index as JSON lines, one
    /// `{"query_id","query","doc_id","grade"}` object per line (the objects
    /// `POST /admin/judgments` takes; `query` is needed on a query id's first line).
    #[arg(long)]
    pub judgments: Option<PathBuf>,
    /// Training data: the judgments stored in the database (the ones `POST /admin/judgments`
    /// and `/admin/judgments/qrels` store), for queries with a stored text.
    #[arg(long)]
    pub from_db: bool,
    /// Training data: the clicks the server logged (the first pages `/search` answered and
    /// the clicks `POST /events` reported on them), weighted by inverse propensity; alone, or
    /// beside judgments from one of the sources above.
    #[arg(long, conflicts_with = "letor")]
    pub clicks: bool,
    /// With --clicks: `ips` divides each click by its rank's examination probability, which
    /// the position-based model estimates from the logged pages; `none` counts each click
    /// once (biased towards what was ranked high).
    #[arg(long, value_enum, default_value_t = crate::user_clicks::ips::Debias::Ips, requires = "clicks")]
    pub debias: crate::user_clicks::ips::Debias,
    /// With --clicks and --debias ips or none: `graded` trains one group per logged query,
    /// each document its pages showed labelled with its estimated click rate given
    /// examination (objectives that read only the labels' order: stable AP, made graded);
    /// `binary` one group per clicked document, weighted by its clicks over their
    /// propensities.
    #[arg(long, value_enum, default_value_t = crate::user_clicks::ips::DEFAULT_CLICK_LABELS, requires = "clicks")]
    pub click_labels: crate::user_clicks::ips::ClickLabels,
    /// With --clicks: the smallest propensity a click is divided by.
    #[arg(long, default_value_t = crate::user_clicks::ips::DEFAULT_PROPENSITY_CLIP, requires = "clicks")]
    pub propensity_clip: f64,
    /// With --clicks and --debias ips: `estimate` subtracts the click-noise floor, estimated
    /// from the logged pages, from every impression (the affine correction); `none` is plain
    /// IPS.
    #[arg(long, value_enum, default_value_t = crate::user_clicks::ips::DEFAULT_NOISE_FLOOR, requires = "clicks")]
    pub noise_floor: crate::user_clicks::ips::NoiseFloor,
    /// The database for `--from-db` and `--clicks` (default: `RANKD_DATABASE_URL`,
    /// `DATABASE_URL`, else the SQLite file in the data directory).
    #[arg(long, requires = "database")]
    pub database_url: Option<String>,
    /// With judgments on the index: the first-phase model and window to rerank.
    #[arg(long, default_value_t = crate::training::DEFAULT_FIRST_PHASE.to_string())]
    pub first_phase: String,
    #[arg(long, default_value_t = crate::search::model::DEFAULT_WINDOW)]
    pub window: usize,
    /// With judgments on the index: train on these features only (comma-separated names).
    /// Default: the whole feature set but the RM3 features, which serving then computes only
    /// for a model that names them (they cost milliseconds per query).
    #[arg(long, value_delimiter = ',')]
    pub features: Vec<String>,
    /// With judgments on the index: also store the model in the index's model directory
    /// and make it the active reranker, if the activation guard lets it: a fifth of the
    /// judged queries is held out of training, and a model worse than the first phase on them
    /// (MRR@10, beyond the paired 95% interval) is stored inactive.
    #[arg(long, conflicts_with = "letor")]
    pub activate: bool,
    /// With --activate: activate the model even when the activation guard refuses it.
    #[arg(long, requires = "activate")]
    pub force: bool,
    #[command(flatten)]
    pub data: super::DataArgs,
    /// Group-size file for `--letor` (default: `TRAIN.query` if it exists, else `qid:`).
    #[arg(long)]
    pub letor_query: Option<PathBuf>,
    /// Validation data for early stopping (default: hold out `--valid-fraction` of the
    /// training queries).
    #[arg(long)]
    pub valid: Option<PathBuf>,
    #[arg(long)]
    pub valid_query: Option<PathBuf>,
    /// Where to write the model file (default: `DATA/models/<id>.json`, the model directory
    /// the server lists).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub learn: LearnArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Print a JSON summary on stdout instead of the log.
    #[arg(long)]
    pub json: bool,
}

/// Where training data comes from.
pub(crate) enum Source {
    Letor {
        data: PathBuf,
        groups: Option<PathBuf>,
        valid: Option<(PathBuf, Option<PathBuf>)>,
    },
    /// Judged queries' and logged click queries' first-phase windows on the index.
    Index {
        /// At least one of `judged` and `clicks`.
        judged: Option<Judged>,
        /// The server's configuration (its database holds the click log; `[events]
        /// max_training_pages` bounds what is read of it), and how clicks are weighted.
        clicks: Option<(
            Box<crate::config::Config>,
            crate::training::clicks::ClickOptions,
        )>,
        data: super::DataArgs,
        first_phase: crate::text::ModelKind,
        window: usize,
        /// Feature columns to train on (empty: the default training columns).
        features: Vec<usize>,
        /// Hold out the activation guard's queries (`--activate`).
        guard: bool,
    },
}

/// Training data: the training and validation sets (no validation set when only clicks
/// train and the validation queries drew none), the data's name, the windows held out for the
/// activation guard by class (with `--activate`), and what the clicks gave.
pub(crate) struct Loaded {
    pub train: RankSet,
    pub valid: Option<RankSet>,
    pub name: String,
    pub held_out: std::collections::BTreeMap<String, Vec<crate::training::Window>>,
    pub clicks: Option<crate::training::clicks::ClickStats>,
    /// With `--debias pairwise`: the click groups' logged lists (unbiased LambdaMART).
    pub click_lists: Option<crate::rerank::gbdt::train::unbiased::ClickLists>,
    /// The fingerprint of the embedder whose vectors gave the windows' dense similarity
    /// (`crate::training::record_embedder`).
    pub embedder: Option<String>,
}

/// Where judgments on the index come from.
pub(crate) enum Judged {
    /// Query and qrels files.
    Files(super::features::JudgedArgs),
    /// A JSON-lines file of judgment objects.
    JsonLines(PathBuf),
    /// The database's stored judgments.
    Database(String),
}

impl Judged {
    /// The judged queries, and a name for the model's training record.
    fn load(&self) -> anyhow::Result<(Vec<JudgedQuery>, String)> {
        match self {
            Judged::Files(files) => Ok((files.load()?.0, files.qrels.display().to_string())),
            Judged::JsonLines(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read {}", path.display()))?;
                let queries = parse_judgment_lines(&text)
                    .map_err(|e| Invalid(format!("{}: {e}", path.display())))?;
                Ok((queries, path.display().to_string()))
            }
            Judged::Database(url) => {
                let stored =
                    super::on_database(url, |db| async move { Ok(db.all_judgments().await?) })?;
                let queries = crate::admin::train::judged_queries(&stored);
                if queries.is_empty() {
                    return Err(Invalid(format!(
                        "the database ({}) holds no judgments of a query with a stored text",
                        crate::db::redact(url)
                    ))
                    .into());
                }
                Ok((queries, "stored judgments".into()))
            }
        }
    }
}

/// One line of a `--judgments` file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct JudgmentLine {
    query_id: String,
    #[serde(default)]
    query: Option<String>,
    doc_id: String,
    grade: i32,
    /// Accepted for symmetry with `GET /admin/judgments`; not used in training.
    #[serde(default)]
    #[allow(dead_code)]
    source: Option<String>,
}

/// Judged queries from JSON lines (blank lines skipped), in order of first appearance.
/// Errors name the line: bad JSON, unknown fields, an empty id, a query id without a text
/// on its first line, two different texts for one query id, a pair judged twice.
pub(crate) fn parse_judgment_lines(text: &str) -> Result<Vec<JudgedQuery>, String> {
    let mut queries: Vec<JudgedQuery> = Vec::new();
    let mut position: HashMap<String, usize> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let j: JudgmentLine = serde_json::from_str(line).map_err(|e| format!("line {n}: {e}"))?;
        for (name, value) in [("query_id", &j.query_id), ("doc_id", &j.doc_id)] {
            if value.trim().is_empty() {
                return Err(format!("line {n}: `{name}` is empty"));
            }
        }
        if j.grade < 0 {
            return Err(format!(
                "line {n}: grade {} is negative; grades are 0 or more",
                j.grade
            ));
        }
        let text = j.query.as_deref().map(str::trim);
        if text == Some("") {
            return Err(format!("line {n}: `query` is empty"));
        }
        let at = match position.get(&j.query_id) {
            Some(&at) => {
                if let Some(t) = text.filter(|t| *t != queries[at].text) {
                    return Err(format!(
                        "line {n}: query {:?} already has the text {:?}, not {t:?}",
                        j.query_id, queries[at].text
                    ));
                }
                at
            }
            None => {
                let Some(t) = text else {
                    return Err(format!(
                        "line {n}: query {:?} appears for the first time: give its text in `query`",
                        j.query_id
                    ));
                };
                position.insert(j.query_id.clone(), queries.len());
                queries.push(JudgedQuery {
                    qid: j.query_id.clone(),
                    text: t.to_string(),
                    grades: HashMap::new(),
                });
                queries.len() - 1
            }
        };
        if queries[at]
            .grades
            .insert(j.doc_id.clone(), j.grade)
            .is_some()
        {
            return Err(format!(
                "line {n}: query {:?} judges document {:?} a second time",
                j.query_id, j.doc_id
            ));
        }
    }
    if queries.is_empty() {
        return Err("no judgments".into());
    }
    Ok(queries)
}

impl Source {
    /// The training and validation sets; validation is a query split of the training data
    /// when the source has none of its own.
    pub fn load(&self, learn: &TrainSettings) -> anyhow::Result<Loaded> {
        let loaded = |(train, valid, name): (RankSet, RankSet, String)| Loaded {
            train,
            valid: Some(valid),
            name,
            held_out: Default::default(),
            clicks: None,
            click_lists: None,
            embedder: None,
        };
        match self {
            Source::Letor {
                data,
                groups,
                valid,
            } => {
                let train = read_letor(data, groups.as_deref())?;
                match valid {
                    Some((vdata, vgroups)) => {
                        let valid = read_letor(vdata, vgroups.as_deref())?;
                        let mut sets = rank_sets(&[&train, &valid])?.into_iter();
                        let (t, v) = (sets.next().expect("two"), sets.next().expect("two"));
                        Ok(loaded((t, v, data.display().to_string())))
                    }
                    None => {
                        let all = rank_sets(&[&train])?.remove(0);
                        let (t, v) = all.split_validation(learn.valid_fraction, learn.seed)?;
                        Ok(loaded((t, v, data.display().to_string())))
                    }
                }
            }
            Source::Index {
                judged,
                clicks,
                data,
                first_phase,
                window,
                features,
                guard,
            } => {
                crate::search::check_window(*window)?;
                let index = crate::text::TextIndex::open(&data.data_dir, data.config()?)?;
                let links = crate::links::load(&index)?;
                let engine = crate::search::Engine::new(index)
                    .with_links(links)
                    .with_stored_vectors(None)?;
                let (judged, mut name) = match judged {
                    Some(judged) => judged.load()?,
                    None => (Vec::new(), String::new()),
                };
                let clicks = match clicks {
                    Some((config, options)) => {
                        let pages = super::logged_first_pages(config)?;
                        name = if name.is_empty() {
                            "logged clicks".into()
                        } else {
                            format!("{name} and logged clicks")
                        };
                        Some((crate::training::clicks::click_queries(pages), *options))
                    }
                    None => None,
                };
                let queries = judged.len() + clicks.as_ref().map_or(0, |(logged, _)| logged.len());
                let columns = if features.is_empty() {
                    crate::features::FeatureSet::current()
                        .default_training_columns(engine.dense().is_some())
                } else {
                    features.clone()
                };
                let bar = super::progress(queries as u64, "features", false);
                let sets = crate::training::index_sets(
                    &engine,
                    crate::training::Sources { judged, clicks },
                    &crate::training::SetOptions {
                        first_phase: *first_phase,
                        window: *window,
                        columns: &columns,
                        hold_out: *guard,
                        valid_fraction: learn.valid_fraction,
                        seed: learn.seed,
                    },
                    &|| bar.inc(1),
                )?;
                let prf = crate::features::FeatureSet::current().prf_for(&columns);
                let mut held_out = std::collections::BTreeMap::new();
                for (class, queries) in &sets.held_out {
                    let (w, _) = crate::training::judged_windows(
                        &engine,
                        queries,
                        *first_phase,
                        *window,
                        prf,
                        &|| bar.inc(1),
                    )?;
                    held_out.insert(class.clone(), w);
                }
                bar.finish_and_clear();
                Ok(Loaded {
                    train: sets.train,
                    valid: sets.valid,
                    name,
                    held_out,
                    clicks: sets.report.clicks,
                    click_lists: sets.click_lists,
                    embedder: crate::training::embedder_of(&engine),
                })
            }
        }
    }
}

/// The columns of `--features` names, or which is not a feature.
pub(crate) fn feature_columns(flag: &str, names: &[String]) -> anyhow::Result<Vec<usize>> {
    crate::features::FeatureSet::current()
        .columns_of(names)
        .map_err(|name| {
            Invalid(format!(
                "{flag}: `{name}` is not a feature of {}",
                crate::features::FEATURE_SET_VERSION
            ))
            .into()
        })
}

pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let judged = match (&args.queries, &args.qrels, &args.judgments) {
        (Some(queries), Some(qrels), _) => Some(Judged::Files(super::features::JudgedArgs {
            queries: queries.clone(),
            qrels: qrels.clone(),
            formats: args.formats,
        })),
        (_, _, Some(file)) => Some(Judged::JsonLines(file.clone())),
        _ if args.from_db => Some(Judged::Database(
            args.data.database_url(args.database_url.clone())?,
        )),
        _ => None,
    };
    let clicks = if args.clicks {
        let options = crate::training::clicks::ClickOptions {
            debias: args.debias,
            labels: args.click_labels,
            propensity_clip: args.propensity_clip,
            noise_floor: args.noise_floor,
        };
        Some((
            Box::new(args.data.server_config(args.database_url.clone())?),
            options,
        ))
    } else {
        None
    };
    let source = match (&args.letor, judged, clicks) {
        (Some(letor), _, _) => Source::Letor {
            data: letor.clone(),
            groups: args.letor_query.clone(),
            valid: args.valid.clone().map(|v| (v, args.valid_query.clone())),
        },
        (None, judged, clicks) if judged.is_some() || clicks.is_some() => Source::Index {
            judged,
            clicks,
            data: args.data.clone(),
            first_phase: args.first_phase.parse().map_err(Invalid)?,
            window: args.window,
            features: feature_columns("--features", &args.features)?,
            guard: args.activate,
        },
        _ => {
            return Err(Invalid(
                "give --letor FILE, --queries/--qrels, --judgments FILE, --from-db or --clicks"
                    .into(),
            )
            .into())
        }
    };
    // The preset measured best for the kind of data, with the flags applied over it.
    let (preset, convention) = match source {
        Source::Index { .. } => (
            TrainSettings::on_index(),
            crate::rerank::MetricConvention::Trec,
        ),
        Source::Letor { .. } => (
            TrainSettings::letor_for(args.learn.model, args.learn.objective),
            crate::rerank::MetricConvention::Letor,
        ),
    };
    let mut settings = args.learn.apply(preset)?;
    if args.clicks {
        // Unbiased LambdaMART trains lambda-ndcg trees, graded click labels objectives that
        // read only their order: anything else is refused here, before the windows are
        // computed.
        settings = settings.for_clicks(
            args.debias,
            args.click_labels,
            args.learn.objective.is_some(),
        )?;
    }
    let Loaded {
        train,
        valid,
        name,
        held_out,
        clicks,
        click_lists,
        embedder,
    } = source.load(&settings)?;
    if let (Some(stats), false) = (&clicks, args.json) {
        let shown: Vec<String> = stats
            .propensities
            .iter()
            .map(|p| format!("{p:.3}"))
            .collect();
        eprintln!(
            "{} logged pages of {} queries, {} clicks ({} past a document the window no longer \
             holds, {} below the propensity clip) → {} training groups; propensities by rank \
             (relative to rank 1): {}",
            stats.pages,
            stats.queries,
            stats.clicks,
            stats.clicks_outside_window,
            stats.clipped,
            stats.train_groups,
            if shown.is_empty() {
                "not used".into()
            } else {
                shown.join(" ")
            }
        );
    }
    if let Some(warning) = clicks.as_ref().and_then(|c| c.warning()) {
        eprintln!("warning: {warning}");
    }
    let mut config = settings.config(name, convention);
    config.click_lists = click_lists.map(std::sync::Arc::new);
    let (outcome, selection) = match (args.select.grid(&settings)?, &valid) {
        (None, valid) => (
            run_training(&train, valid.as_ref(), &config, args.json)?,
            None,
        ),
        (Some(_), None) => {
            return Err(Invalid(
                "feature selection needs a validation set, and the validation queries drew no \
                 click"
                    .into(),
            )
            .into())
        }
        (Some(grid), Some(valid)) => {
            let (selection, outcome) = crate::rerank::select::select(
                &train,
                valid,
                &config,
                &grid,
                &mut |_| {},
                &std::sync::atomic::AtomicBool::new(false),
            )?;
            if !args.json {
                eprintln!(
                    "selected {} of {} features (weight decay {}, validation MAP {:.4}): {}",
                    selection.features.len(),
                    train.num_features(),
                    selection.weight_decay,
                    selection.valid_map,
                    selection.features.join(",")
                );
            }
            (outcome, Some(selection))
        }
    };
    let outcome = crate::rerank::TrainOutcome {
        model: crate::training::record_embedder(outcome.model, embedder.as_deref()),
        ..outcome
    };
    // Written once each: to --out if given, and to the model directory when activated or
    // when there is no --out.
    if let Some(out) = &args.out {
        outcome.model.save(out)?;
    }
    // The activation guard (`crate::training::guard`) on the held-out queries: a model worse
    // than the first phase is stored but not activated, unless --force.
    let (stored, guard) = if args.activate {
        let data_dir = &args.data.data_dir;
        let path = crate::search::model::store(data_dir, &outcome.model)?;
        let candidate =
            crate::search::model::ActiveModel::new(outcome.model.clone(), path.clone())?;
        let comparison = crate::training::guard::compare(&held_out, &candidate, None)?;
        match &comparison.refused {
            None => {
                crate::search::model::request_activation(data_dir, &outcome.model)?;
                eprintln!(
                    "model {} is now the active reranker ({})",
                    outcome.model.id(),
                    path.display()
                );
            }
            Some(reason) if args.force => {
                crate::search::model::request_activation(data_dir, &outcome.model)?;
                eprintln!(
                    "warning: model {} activated with --force despite the activation guard: \
                     {reason}",
                    outcome.model.id()
                );
            }
            Some(reason) => eprintln!(
                "not activated: {reason}; stored inactive ({}); --force activates it anyway",
                path.display()
            ),
        }
        (Some(path), Some(comparison))
    } else {
        (None, None)
    };
    let out = match (&args.out, &stored) {
        (Some(out), _) => out.clone(),
        (None, Some(path)) => path.clone(),
        (None, None) => crate::search::model::store(&args.data.data_dir, &outcome.model)?,
    };
    let m = &outcome.model;
    if args.json {
        let summary = serde_json::json!({
            "model": out,
            "id": m.id(),
            "objective": m.training.objective,
            "train_queries": train.queries.len(),
            "valid_queries": valid.as_ref().map_or(0, |v| v.queries.len()),
            "clicks": clicks,
            "coverage": outcome.coverage,
            "position_bias": outcome.position_bias,
            "best_epoch": m.training.best_epoch,
            "epochs_run": m.training.epochs_run,
            "metrics": m.training.metrics,
            "selection": selection,
            "guard": guard,
            "log": outcome.log,
        });
        println!("{summary}");
    } else {
        let v = m.training.metrics.valid.as_ref();
        println!(
            "model {} written to {} (best epoch {} of {}; validation MAP {:.4}, NDCG@10 {:.4})",
            m.id(),
            out.display(),
            m.training.best_epoch,
            m.training.epochs_run,
            v.map_or(f64::NAN, |v| v.map),
            v.map_or(f64::NAN, |v| v.ndcg10),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_judgment_lines;

    #[test]
    fn judgment_lines_refuse_negative_grades_naming_the_line() {
        let ok = r#"{"query_id":"q1","query":"vec","doc_id":"a","grade":0}"#;
        let bad = r#"{"query_id":"q1","doc_id":"b","grade":-2}"#;
        assert_eq!(parse_judgment_lines(ok).unwrap()[0].grades["a"], 0);
        let e = parse_judgment_lines(&format!("{ok}\n{bad}")).unwrap_err();
        assert_eq!(e, "line 2: grade -2 is negative; grades are 0 or more");
    }
}
