//! Gradient-boosted trees on the command line, for `rankd eval-letor` (issue 15): the tree
//! options, `--model gbdt`, training and scoring a LETOR test file with trees, and scoring
//! it with a model imported from XGBoost, LightGBM or RankLib.
//!
//! `--model` belongs to the networks' [`LearnArgs`] (`learn.rs`), whose `ModelArg` has no
//! tree variant yet; [`LearnOrTrees`] adds `gbdt` to that flag's accepted values and records
//! the choice, leaving the networks' options untouched (they are ignored with trees). When
//! the learning options move into the library's training settings, `gbdt` becomes one of
//! their model kinds and this wrapper goes away.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{ArgMatches, Args, Command, FromArgMatches};

use super::eval_letor::EvalLetorArgs;
use super::learn::{rank_sets, read_letor, LearnArgs};
use super::progress;
use crate::error::Invalid as BadInput;
use crate::rerank::gbdt::import::{self, Imported};
use crate::rerank::gbdt::train::{self, GbdtParams, RoundLog};
use crate::rerank::objective::{LambdaParams, StableAp, StableApHessian};
use crate::rerank::{evaluate_scores, MetricConvention, Objective, RankMetrics, RankSet, Reranker};
use crate::training::{ModelChoice as ModelArg, TrainSettings};

/// The networks' learning options, with `--model` also accepting `gbdt`.
#[derive(Debug, Clone)]
pub struct LearnOrTrees {
    pub learn: LearnArgs,
    /// `--model gbdt`: train gradient-boosted trees ([`GbdtArgs`]) instead of a network.
    pub trees: bool,
}

impl std::ops::Deref for LearnOrTrees {
    type Target = LearnArgs;
    fn deref(&self) -> &LearnArgs {
        &self.learn
    }
}

/// `--model`'s values: the networks' `linear` and `mlp`, and `gbdt`. `LearnArgs` stores a
/// `ModelArg`, so `gbdt` is stored as `mlp` there and read back from the raw value.
#[derive(Clone)]
struct ModelParser;

impl TypedValueParser for ModelParser {
    type Value = ModelArg;

    fn parse_ref(
        &self,
        cmd: &Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<ModelArg, clap::Error> {
        let name =
            PossibleValuesParser::new(["linear", "mlp", "gbdt"]).parse_ref(cmd, arg, value)?;
        Ok(if name == "linear" {
            ModelArg::Linear
        } else {
            ModelArg::Mlp
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            [
                PossibleValue::new("linear"),
                PossibleValue::new("mlp"),
                PossibleValue::new("gbdt").help("gradient-boosted trees (the --gbdt-* options)"),
            ]
            .into_iter(),
        ))
    }
}

fn trees_chosen(matches: &ArgMatches) -> bool {
    matches
        .get_raw("model")
        .and_then(|mut v| v.next())
        .is_some_and(|v| v == "gbdt")
}

impl FromArgMatches for LearnOrTrees {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(LearnOrTrees {
            trees: trees_chosen(matches),
            learn: LearnArgs::from_arg_matches(matches)?,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.trees = trees_chosen(matches);
        self.learn.update_from_arg_matches(matches)
    }
}

impl Args for LearnOrTrees {
    fn augment_args(cmd: Command) -> Command {
        LearnArgs::augment_args(cmd).mut_arg("model", |a| a.value_parser(ModelParser))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        LearnArgs::augment_args_for_update(cmd).mut_arg("model", |a| a.value_parser(ModelParser))
    }
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TreeObjective {
    /// LambdaMART with LightGBM's lambdarank formulas (SPEC §3.6).
    LambdaNdcg,
    /// LambdaMART weighted by |ΔAP| (XGBoost's rank:map).
    LambdaAp,
    /// The stable AP loss of SPEC §3.3 (its --tau, --epsilon, --weight-a, --weight-t,
    /// --lambda, --threshold and --graded options apply).
    StableAp,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    Xgboost,
    Lightgbm,
    Ranklib,
}

/// Options of `--model gbdt` (LightGBM's names and defaults where it has them).
#[derive(clap::Args, Debug, Clone)]
pub struct GbdtArgs {
    #[arg(long, value_enum, default_value = "lambda-ndcg")]
    pub gbdt_objective: TreeObjective,
    /// Boosting rounds (trees) at most.
    #[arg(long, default_value_t = 100)]
    pub trees: usize,
    #[arg(long, default_value_t = 31)]
    pub leaves: usize,
    /// Shrinkage of every tree.
    #[arg(long, default_value_t = 0.1)]
    pub gbdt_lr: f64,
    /// Depth limit (0: none).
    #[arg(long, default_value_t = 0)]
    pub max_depth: usize,
    /// Quantile bins per feature (at most 255; missing values get one more).
    #[arg(long, default_value_t = 255)]
    pub max_bins: usize,
    #[arg(long, default_value_t = 20)]
    pub min_data_in_leaf: usize,
    /// Check --min-data-in-leaf against LightGBM's hessian-based estimate of a leaf's rows,
    /// as LightGBM does (for parity comparisons).
    #[arg(long)]
    pub count_from_hessian: bool,
    #[arg(long, default_value_t = 1e-3)]
    pub min_sum_hessian: f64,
    /// L2 penalty λ on leaf values.
    #[arg(long, default_value_t = 0.0)]
    pub lambda_l2: f64,
    #[arg(long, default_value_t = 0.0)]
    pub min_split_gain: f64,
    /// Fraction of rows each tree sees (a new sample every round).
    #[arg(long, default_value_t = 1.0)]
    pub row_fraction: f64,
    /// Fraction of features each tree may split on.
    #[arg(long, default_value_t = 1.0)]
    pub feature_fraction: f64,
    /// Stop after this many rounds without a better validation MAP and keep the best
    /// (0: no early stopping, no validation split; every training query trains).
    #[arg(long, default_value_t = 0)]
    pub early_stopping_rounds: usize,
    /// LambdaMART: σ of the pairwise sigmoid.
    #[arg(long, default_value_t = 1.0)]
    pub lambda_sigma: f64,
    /// LambdaMART-NDCG: pairs need one row among the first this many.
    #[arg(long, default_value_t = 30)]
    pub truncation: usize,
    /// LambdaMART: turn off LightGBM's lambdarank_norm.
    #[arg(long)]
    pub no_lambda_norm: bool,
    /// Stable AP: the Newton step's curvature (SPEC §3.6).
    #[arg(long, value_enum, default_value = "bound")]
    pub stable_ap_hessian: StableApHessian,
    /// Also write the trees as an XGBoost JSON model.
    #[arg(long)]
    pub export_xgboost: Option<PathBuf>,
    /// Also write the test scores, one per test row (for per-query comparisons).
    #[arg(long)]
    pub write_scores: Option<PathBuf>,
    /// Score the test file with this model, trained by another library, instead of
    /// training (bound to the LETOR features f1..fN by name, or by position).
    #[arg(long, conflicts_with = "train", requires = "import_format")]
    pub import: Option<PathBuf>,
    #[arg(long, value_enum)]
    pub import_format: Option<ImportFormat>,
}

impl GbdtArgs {
    pub fn params(&self, seed: u64) -> GbdtParams {
        GbdtParams {
            rounds: self.trees,
            learning_rate: self.gbdt_lr,
            num_leaves: self.leaves,
            max_depth: self.max_depth,
            max_bins: self.max_bins,
            min_data_in_leaf: self.min_data_in_leaf,
            count_from_hessian: self.count_from_hessian,
            min_sum_hessian: self.min_sum_hessian,
            lambda_l2: self.lambda_l2,
            min_split_gain: self.min_split_gain,
            row_fraction: self.row_fraction,
            feature_fraction: self.feature_fraction,
            early_stopping_rounds: self.early_stopping_rounds,
            stable_ap_hessian: self.stable_ap_hessian,
            seed,
        }
    }

    pub fn objective(&self, learn: &TrainSettings) -> Objective {
        let lambda = LambdaParams {
            sigma: self.lambda_sigma,
            truncation: self.truncation,
            norm: !self.no_lambda_norm,
            threshold: learn.threshold,
        };
        match self.gbdt_objective {
            TreeObjective::LambdaNdcg => Objective::LambdaNdcg(lambda),
            TreeObjective::LambdaAp => Objective::LambdaAp(lambda),
            TreeObjective::StableAp => Objective::StableAp(StableAp {
                tau: learn.tau,
                epsilon: learn.epsilon,
                a: learn.weight_a,
                t: learn.weight_t,
                lambda: learn.lambda,
                threshold: learn.threshold,
                graded: learn.graded,
            }),
        }
    }
}

/// Reads a model file of another library.
pub fn import_model(path: &Path, format: ImportFormat) -> anyhow::Result<Imported> {
    let bytes = std::fs::read(path)
        .map_err(|e| BadInput(format!("cannot read {}: {e}", path.display())))?;
    let text = || String::from_utf8_lossy(&bytes).into_owned();
    let parsed = match format {
        ImportFormat::Xgboost => import::xgboost::parse(&bytes),
        ImportFormat::Lightgbm => import::lightgbm::parse(&text()),
        ImportFormat::Ranklib => import::ranklib::parse(&text()),
    };
    Ok(parsed.map_err(|e| BadInput(format!("{}: {e}", path.display())))?)
}

/// `eval-letor --import FILE`: the imported model's scores of the test file, whose
/// features are `f1..fN` with N the wider of the file and the model.
pub fn eval_imported(
    args: &EvalLetorArgs,
    test: &crate::corpus::letor::LetorSet,
) -> anyhow::Result<(RankMetrics, serde_json::Value)> {
    let path = args.gbdt.import.as_ref().expect("--import given");
    let format = args
        .gbdt
        .import_format
        .expect("clap requires --import-format");
    let imported = import_model(path, format)?;
    let width = test.num_features.max(imported.forest.num_features);
    let test = RankSet::from_letor_width(test, width).map_err(|e| BadInput(e.to_string()))?;
    let model = Reranker::from_imported(&imported, &test.feature_names, path.display().to_string())
        .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
    let scores = score_set(&model, &test)?;
    let metrics = evaluate_scores(&test, &scores, MetricConvention::Letor)?;
    if let Some(out) = &args.out {
        model.save(out)?;
    }
    Ok((
        metrics,
        serde_json::json!({
            "model": "gbdt",
            "imported": path,
            "library": imported.library.name(),
            "objective": imported.objective,
            "trees": imported.forest.trees.len(),
            "features_read": model.feature_names(),
            "id": model.id(),
        }),
    ))
}

/// The model's scores of a LETOR set whose features are `f1..fN` (mapped by name).
fn score_set(model: &Reranker, set: &RankSet) -> anyhow::Result<Vec<f32>> {
    let rows = crate::rerank::map_features(&set.feature_names, &set.x, model.feature_names())?;
    Ok(model.score(&rows, set.num_rows())?)
}

/// `eval-letor --model gbdt`: trains trees on the training set (with a validation split only
/// when early stopping), scores the test set.
pub fn eval_trees(
    args: &EvalLetorArgs,
    train_path: &Path,
    test: &RankSet,
    all_train: RankSet,
    valid_file: Option<RankSet>,
) -> anyhow::Result<(RankMetrics, serde_json::Value)> {
    let learn = &args.learn.learn.apply(TrainSettings::letor())?;
    let params = args.gbdt.params(learn.seed);
    let (train_set, valid_set) = match (valid_file, params.early_stopping_rounds) {
        (Some(v), _) => (all_train, Some(v)),
        (None, 0) => (all_train, None),
        (None, _) => {
            let (t, v) = all_train
                .split_validation(learn.valid_fraction, learn.seed)
                .map_err(|e| BadInput(e.to_string()))?;
            (t, Some(v))
        }
    };
    let objective = args.gbdt.objective(learn);
    let bar = progress(params.rounds as u64, "trees", args.json);
    let quiet = args.json;
    let started = Instant::now();
    let outcome = train::train(
        &train_set,
        valid_set.as_ref(),
        &objective,
        &params,
        MetricConvention::Letor,
        train_path.display().to_string(),
        None,
        &mut |r: &RoundLog| {
            if !quiet && (r.round.is_multiple_of(10) || r.best) {
                bar.suspend(|| {
                    eprintln!(
                        "tree {:>4}  loss {:.5}  {} MAP {:.4}  NDCG@10 {:.4}  {} leaves{}",
                        r.round,
                        r.train_loss,
                        if valid_set.is_some() {
                            "valid"
                        } else {
                            "train"
                        },
                        r.valid_map,
                        r.valid_ndcg10,
                        r.leaves,
                        if r.best { "  *" } else { "" }
                    )
                });
            }
            bar.inc(1);
        },
        &AtomicBool::new(false),
    )
    .map_err(|e| match e {
        crate::rerank::RerankError::Invalid(m) => anyhow::Error::from(BadInput(m)),
        other => other.into(),
    })?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let model = &outcome.model;
    if let Some(out) = &args.out {
        model.save(out)?;
    }
    if let Some(path) = &args.gbdt.export_xgboost {
        let gbdt = model.gbdt.as_ref().expect("a tree model");
        let json = crate::rerank::gbdt::export::to_xgboost_json(
            &gbdt.forest,
            model.feature_names(),
            &objective,
        )
        .map_err(BadInput)?;
        std::fs::write(path, serde_json::to_vec(&json)?)
            .map_err(|e| BadInput(format!("cannot write {}: {e}", path.display())))?;
    }
    let scores = score_set(model, test)?;
    if let Some(path) = &args.gbdt.write_scores {
        let text: String = scores.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(path, text)
            .map_err(|e| BadInput(format!("cannot write {}: {e}", path.display())))?;
    }
    let metrics = evaluate_scores(test, &scores, MetricConvention::Letor)?;
    Ok((
        metrics,
        serde_json::json!({
            "model": "gbdt",
            "objective": model.training.objective,
            "params": params,
            "seed": learn.seed,
            "id": model.id(),
            "train_queries": train_set.queries.len(),
            "valid_queries": valid_set.as_ref().map(|v| v.queries.len()),
            "best_round": model.training.best_epoch,
            "rounds_run": model.training.epochs_run,
            "train_seconds": seconds,
            "valid": model.training.metrics.valid,
            "log": outcome.log,
        }),
    ))
}

/// Reads `--train`, `--test` and `--valid` as rank sets over one feature list.
pub fn read_sets(
    args: &EvalLetorArgs,
    train_path: &Path,
) -> anyhow::Result<(RankSet, RankSet, Option<RankSet>)> {
    let train = read_letor(train_path, args.train_query.as_deref())?;
    let test = read_letor(&args.test, args.test_query.as_deref())?;
    let valid = args
        .valid
        .as_deref()
        .map(|v| read_letor(v, args.valid_query.as_deref()))
        .transpose()?;
    let mut letor_sets = vec![&train, &test];
    letor_sets.extend(valid.as_ref());
    let mut sets = rank_sets(&letor_sets)?.into_iter();
    let all_train = sets.next().expect("train");
    let test_set = sets.next().expect("test");
    Ok((all_train, test_set, sets.next()))
}
