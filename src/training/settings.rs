//! [`TrainSettings`]: every training option with its default, in one place. The command line
//! (`rankd train`, `cv`, `eval-letor`, `active-replay`), `POST /admin/train` and the demo
//! start from a preset and change what their user asked for; none of them keeps defaults of
//! its own (STYLE.md: the library never sees a flag).
//!
//! Two presets, each the best measured configuration for its data (docs/EVALUATION.md):
//! [`TrainSettings::letor`] for LETOR/SVMlight files (gradient-boosted trees with stable AP,
//! graded, tuned on the LightGBM example's training queries: NDCG@10 0.752 against the MLP's
//! 0.690 and LightGBM's 0.733) and [`TrainSettings::on_index`] for judgments on the index (a
//! linear model with stable AP without its rank weighting, chosen by 5-fold cross-validation on
//! the demo's training queries; on Cranfield's 5-fold cross-validation it beats the trees,
//! +0.018 against +0.006 MAP over BM25F, and it explains itself as trees do).
//! [`TrainSettings::letor_network`] is the network preset both start from, and what active
//! replay trains (its strategies score with a network).

use serde::{Deserialize, Serialize};

use crate::error::Invalid;
use crate::rerank::gbdt::train::GbdtParams;
use crate::rerank::objective::{LambdaParams, Soprc, StableAp, StableApHessian};
use crate::rerank::{
    Activation, MetricConvention, NormKind, Objective, ObjectiveKind, TrainConfig, UnifiedMomentum,
};

/// The model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum ModelChoice {
    Linear,
    Mlp,
    /// Gradient-boosted trees (the tree options; SPEC §3.6).
    Gbdt,
}

impl std::fmt::Display for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ModelChoice::Linear => "linear",
            ModelChoice::Mlp => "mlp",
            ModelChoice::Gbdt => "gbdt",
        })
    }
}

/// Objective, model and optimiser settings (SPEC §3.2–3.3 names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainSettings {
    pub objective: ObjectiveKind,
    pub model: ModelChoice,
    /// Hidden layer widths of the MLP (one or two layers).
    pub hidden: Vec<usize>,
    pub activation: Activation,
    pub norm: NormKind,
    pub seed: u64,
    pub epochs: usize,
    /// Learning rate α.
    pub lr: f64,
    /// Queries per batch.
    pub batch: usize,
    /// Early stopping: epochs without a better validation MAP.
    pub patience: usize,
    /// Networks trained from different initialisation seeds and averaged.
    pub ensemble: usize,
    /// Tail averaging over the last this-many epochs (1: off).
    pub average_epochs: usize,
    /// Halve the learning rate after this many epochs without improvement (0: never).
    pub lr_halve_after: usize,
    /// Train on a fresh sample of at most this many rows of a query per visit.
    pub sample_rows: Option<usize>,
    /// Seed 000's deep feature mixup weight u.
    pub mixup: Option<f32>,
    /// Huber margin τ (stable AP, smoothed AP, SOPRC's τ₁), on sigmoid scores.
    pub tau: f32,
    /// ε of stable AP's outer function h.
    pub epsilon: f64,
    /// a and t of stable AP's weighting ((1 + a)/(r + a))^t.
    pub weight_a: f64,
    pub weight_t: f64,
    /// λ of stable AP's μ̂ moving average.
    pub lambda: f64,
    /// SOPRC (seed 003): τ₂, β, K and the semi-variance weights λ₁, λ₂.
    pub soprc_tau2: f64,
    pub soprc_beta: f64,
    pub soprc_quantiles: usize,
    pub soprc_var_pos: f64,
    pub soprc_var_neg: f64,
    /// RankNet's σ.
    pub sigma: f32,
    /// Grades at or above this are relevant (binary objectives).
    pub threshold: i32,
    /// AP objectives: average over every relevance level (graded AP).
    pub graded: bool,
    /// Momentum β and s (1 Nesterov, 0 heavy ball) of the unified momentum optimiser.
    pub beta: f64,
    pub momentum_s: f64,
    pub weight_decay: f64,
    /// Share of the training queries held out for early stopping.
    pub valid_fraction: f64,
    /// LambdaMART (`lambda-ndcg`, `lambda-ap`): pairs need one row among the first this many
    /// (NDCG; LightGBM's `lambdarank_truncation_level`). Its σ is `sigma`.
    pub truncation: usize,
    /// LambdaMART: LightGBM's `lambdarank_norm`.
    pub lambda_norm: bool,
    // Trees (`model: gbdt`; LightGBM's meanings). The networks' options above that shape a
    // network or its optimiser (hidden … weight_decay, epochs, lr, patience) do not apply.
    /// Boosting rounds (trees) at most.
    pub trees: usize,
    /// Leaves per tree (leaf-wise growth).
    pub leaves: usize,
    /// Shrinkage η of every tree.
    pub tree_lr: f64,
    /// Depth limit (0: none).
    pub max_depth: usize,
    /// Quantile bins per feature (at most 255; missing values get one more).
    pub max_bins: usize,
    /// Rows a bin holds at least when it closes (LightGBM's `min_data_in_bin`).
    pub min_data_in_bin: usize,
    pub min_data_in_leaf: usize,
    /// Check `min_data_in_leaf` against LightGBM's hessian-based estimate of a leaf's rows
    /// (for parity runs against LightGBM).
    pub count_from_hessian: bool,
    pub min_sum_hessian: f64,
    /// L2 penalty λ on leaf values.
    pub lambda_l2: f64,
    pub min_split_gain: f64,
    /// Fraction of rows each tree is grown on (a new sample every round).
    pub row_fraction: f64,
    /// Fraction of features each tree may split on.
    pub feature_fraction: f64,
    /// Stop after this many rounds without a better validation MAP and keep the best (0: no
    /// early stopping; `eval-letor` then trains on every training query).
    pub early_stopping_rounds: usize,
    /// Stable AP trees: the Newton step's curvature (SPEC §3.6).
    pub stable_ap_hessian: StableApHessian,
}

/// Whether trees can be trained with `objective` (SPEC §3.6).
fn trains_trees(objective: ObjectiveKind) -> bool {
    matches!(
        objective,
        ObjectiveKind::StableAp | ObjectiveKind::LambdaNdcg | ObjectiveKind::LambdaAp
    )
}

impl Default for TrainSettings {
    /// [`TrainSettings::letor_network`].
    fn default() -> Self {
        TrainSettings::letor_network()
    }
}

impl TrainSettings {
    /// For LETOR/SVMlight files: gradient-boosted trees (LightGBM's lambdarank example
    /// structure: 100 trees of 31 leaves, rate 0.1, at least 50 rows and hessian 5 per leaf,
    /// 90% of rows per tree) with stable AP on graded labels, a = 10 (EVALUATION.md,
    /// "Gradient-boosted trees": the best measured on the LETOR example).
    pub fn letor() -> Self {
        TrainSettings {
            model: ModelChoice::Gbdt,
            graded: true,
            weight_a: 10.0,
            min_data_in_leaf: 50,
            min_sum_hessian: 5.0,
            row_fraction: 0.9,
            ..TrainSettings::letor_network()
        }
    }

    /// The LETOR preset for what the user asked for: [`TrainSettings::letor`] (trees) unless
    /// they asked for a linear model or an MLP, or for an objective only networks train
    /// (RankNet, SOPRC, ...), which start from [`TrainSettings::letor_network`] (the trees'
    /// objective settings were tuned for trees).
    pub fn letor_for(model: Option<ModelChoice>, objective: Option<ObjectiveKind>) -> Self {
        match (model, objective) {
            (Some(ModelChoice::Gbdt), _) => TrainSettings::letor(),
            (Some(_), _) => TrainSettings::letor_network(),
            (None, Some(o)) if !trains_trees(o) => TrainSettings::letor_network(),
            (None, _) => TrainSettings::letor(),
        }
    }

    /// The MLP with stable AP at the rate tuned for both AP objectives on the LETOR example
    /// (EVALUATION.md, "LETOR"): what `--model mlp` starts from on LETOR files before the
    /// trees became the default, and what active replay trains.
    pub fn letor_network() -> Self {
        TrainSettings {
            objective: ObjectiveKind::StableAp,
            model: ModelChoice::Mlp,
            hidden: vec![32],
            activation: Activation::Relu,
            norm: NormKind::ZScore,
            seed: 1,
            epochs: 100,
            lr: 0.01,
            batch: 16,
            patience: 15,
            ensemble: 1,
            average_epochs: 1,
            lr_halve_after: 0,
            sample_rows: None,
            mixup: None,
            tau: 0.1,
            epsilon: 0.01,
            weight_a: 0.1,
            weight_t: 2.0,
            lambda: 0.01,
            soprc_tau2: 0.001,
            soprc_beta: 0.1,
            soprc_quantiles: 100,
            soprc_var_pos: 1.0,
            soprc_var_neg: 5.0,
            sigma: 1.0,
            threshold: 1,
            graded: false,
            beta: 0.9,
            momentum_s: 1.0,
            weight_decay: 4e-5,
            valid_fraction: 0.2,
            truncation: 30,
            lambda_norm: true,
            trees: 100,
            leaves: 31,
            tree_lr: 0.1,
            max_depth: 0,
            max_bins: 255,
            min_data_in_bin: 3,
            min_data_in_leaf: 20,
            count_from_hessian: false,
            min_sum_hessian: 1e-3,
            lambda_l2: 0.0,
            min_split_gain: 0.0,
            row_fraction: 1.0,
            feature_fraction: 1.0,
            early_stopping_rounds: 0,
            stable_ap_hessian: StableApHessian::Bound,
        }
    }

    /// For judgments on the index (`rankd train` on queries and qrels, `rankd cv`,
    /// `POST /admin/train`, the demo): a linear model, stable AP without its rank weighting
    /// (t = 0: +0.05 MRR over the paper's weighting in cross-validation on the demo's
    /// training queries), a small rate and a long patience (validation MAP swings from epoch to
    /// epoch on known-item judgments, and a short patience locks in an early peak).
    pub fn on_index() -> Self {
        TrainSettings {
            model: ModelChoice::Linear,
            lr: 0.002,
            epochs: 300,
            patience: 60,
            weight_t: 0.0,
            ..TrainSettings::letor_network()
        }
    }

    /// Checks every value, naming the first one out of range.
    pub fn validate(&self) -> Result<(), Invalid> {
        let positive = |name: &str, v: f64| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(Invalid(format!(
                    "{name} must be a positive number, got {v}"
                )))
            }
        };
        let non_negative = |name: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(Invalid(format!(
                    "{name} must be a finite number ≥ 0, got {v}"
                )))
            }
        };
        let at_least_one = |name: &str, v: usize| {
            if v >= 1 {
                Ok(())
            } else {
                Err(Invalid(format!("{name} must be at least 1, got {v}")))
            }
        };
        positive("lr", self.lr)?;
        positive("tau", f64::from(self.tau))?;
        positive("epsilon", self.epsilon)?;
        positive("weight_a", self.weight_a)?;
        non_negative("weight_t", self.weight_t)?;
        positive("sigma", f64::from(self.sigma))?;
        positive("soprc_tau2", self.soprc_tau2)?;
        non_negative("weight_decay", self.weight_decay)?;
        non_negative("soprc_var_pos", self.soprc_var_pos)?;
        non_negative("soprc_var_neg", self.soprc_var_neg)?;
        for (name, v) in [
            ("lambda", self.lambda),
            ("soprc_beta", self.soprc_beta),
            ("beta", self.beta),
            ("momentum_s", self.momentum_s),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(Invalid(format!("{name} must be in [0, 1], got {v}")));
            }
        }
        if !(self.valid_fraction > 0.0 && self.valid_fraction < 1.0) {
            return Err(Invalid(format!(
                "valid_fraction must be in (0, 1), got {}",
                self.valid_fraction
            )));
        }
        if self.epochs == 0 || self.epochs > 10_000 {
            return Err(Invalid(format!(
                "epochs must be in 1..=10000, got {}",
                self.epochs
            )));
        }
        at_least_one("batch", self.batch)?;
        at_least_one("patience", self.patience)?;
        at_least_one("ensemble", self.ensemble)?;
        at_least_one("average_epochs", self.average_epochs)?;
        at_least_one("soprc_quantiles", self.soprc_quantiles)?;
        if self.model == ModelChoice::Mlp
            && (self.hidden.is_empty() || self.hidden.len() > 2 || self.hidden.contains(&0))
        {
            return Err(Invalid(format!(
                "hidden must be one or two positive layer widths, got {:?}",
                self.hidden
            )));
        }
        if let Some(n) = self.sample_rows {
            if n < 2 {
                return Err(Invalid(format!(
                    "sample_rows must be at least 2 (a sample needs a positive and a negative), got {n}"
                )));
            }
        }
        if let Some(u) = self.mixup {
            if !(0.0..=1.0).contains(&u) {
                return Err(Invalid(format!("mixup must be in [0, 1], got {u}")));
            }
        }
        at_least_one("truncation", self.truncation)?;
        if self.model == ModelChoice::Gbdt {
            self.validate_trees()?;
        }
        Ok(())
    }

    fn validate_trees(&self) -> Result<(), Invalid> {
        if !trains_trees(self.objective) {
            return Err(Invalid(format!(
                "objective {} does not train trees (model gbdt takes stable-ap, lambda-ndcg or \
                 lambda-ap)",
                Objective::with_defaults(self.objective, self.tau, self.threshold)
                    .kind()
                    .as_str()
            )));
        }
        if self.trees == 0 || self.trees > 10_000 {
            return Err(Invalid(format!(
                "trees must be in 1..=10000, got {}",
                self.trees
            )));
        }
        if !(2..=131_072).contains(&self.leaves) {
            return Err(Invalid(format!(
                "leaves must be in 2..=131072, got {}",
                self.leaves
            )));
        }
        if !(2..=255).contains(&self.max_bins) {
            return Err(Invalid(format!(
                "max_bins must be in 2..=255, got {}",
                self.max_bins
            )));
        }
        if self.min_data_in_bin == 0 {
            return Err(Invalid(
                "min_data_in_bin must be at least 1, got 0".to_string(),
            ));
        }
        if !(self.tree_lr.is_finite() && self.tree_lr > 0.0) {
            return Err(Invalid(format!(
                "tree_lr must be a positive number, got {}",
                self.tree_lr
            )));
        }
        for (name, v) in [
            ("min_sum_hessian", self.min_sum_hessian),
            ("lambda_l2", self.lambda_l2),
            ("min_split_gain", self.min_split_gain),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Invalid(format!(
                    "{name} must be a finite number ≥ 0, got {v}"
                )));
            }
        }
        for (name, v) in [
            ("row_fraction", self.row_fraction),
            ("feature_fraction", self.feature_fraction),
        ] {
            if !(v > 0.0 && v <= 1.0) {
                return Err(Invalid(format!("{name} must be in (0, 1], got {v}")));
            }
        }
        Ok(())
    }

    /// Whether training holds out validation queries: networks always early-stop; trees
    /// only with `early_stopping_rounds`.
    pub fn holds_out_validation(&self) -> bool {
        self.model != ModelChoice::Gbdt || self.early_stopping_rounds > 0
    }

    /// The tree parameters (`model: gbdt`).
    pub fn tree_params(&self) -> GbdtParams {
        GbdtParams {
            rounds: self.trees,
            learning_rate: self.tree_lr,
            num_leaves: self.leaves,
            max_depth: self.max_depth,
            max_bins: self.max_bins,
            min_data_in_bin: self.min_data_in_bin,
            min_data_in_leaf: self.min_data_in_leaf,
            count_from_hessian: self.count_from_hessian,
            min_sum_hessian: self.min_sum_hessian,
            lambda_l2: self.lambda_l2,
            min_split_gain: self.min_split_gain,
            row_fraction: self.row_fraction,
            feature_fraction: self.feature_fraction,
            early_stopping_rounds: self.early_stopping_rounds,
            stable_ap_hessian: self.stable_ap_hessian,
            seed: self.seed,
        }
    }

    pub fn objective(&self) -> Objective {
        match self.objective {
            ObjectiveKind::StableAp => Objective::StableAp(StableAp {
                tau: self.tau,
                epsilon: self.epsilon,
                a: self.weight_a,
                t: self.weight_t,
                lambda: self.lambda,
                threshold: self.threshold,
                graded: self.graded,
            }),
            ObjectiveKind::Ranknet => Objective::Ranknet { sigma: self.sigma },
            ObjectiveKind::ApHingeQs => Objective::ApHingeQs {
                threshold: self.threshold,
            },
            ObjectiveKind::NdcgHingeQs => Objective::NdcgHingeQs {
                threshold: self.threshold,
            },
            ObjectiveKind::SmoothAp => Objective::SmoothAp {
                tau: self.tau,
                threshold: self.threshold,
                graded: self.graded,
            },
            ObjectiveKind::Soprc => Objective::Soprc(Soprc {
                tau1: self.tau,
                tau2: self.soprc_tau2,
                beta: self.soprc_beta,
                quantiles: self.soprc_quantiles,
                lambda_pos: self.soprc_var_pos,
                lambda_neg: self.soprc_var_neg,
                threshold: self.threshold,
                graded: self.graded,
            }),
            ObjectiveKind::LambdaNdcg => Objective::LambdaNdcg(self.lambda_params()),
            ObjectiveKind::LambdaAp => Objective::LambdaAp(self.lambda_params()),
        }
    }

    fn lambda_params(&self) -> LambdaParams {
        LambdaParams {
            sigma: f64::from(self.sigma),
            truncation: self.truncation,
            norm: self.lambda_norm,
            threshold: self.threshold,
        }
    }

    /// The trainer's configuration; `source` names the training data in the model file.
    /// With trees, `epochs` is the number of rounds (what progress counts).
    pub fn config(&self, source: String, convention: MetricConvention) -> TrainConfig {
        let trees = (self.model == ModelChoice::Gbdt).then(|| self.tree_params());
        TrainConfig {
            objective: self.objective(),
            hidden: match self.model {
                ModelChoice::Linear | ModelChoice::Gbdt => Vec::new(),
                ModelChoice::Mlp => self.hidden.clone(),
            },
            activation: self.activation,
            normalization: self.norm,
            optimizer: UnifiedMomentum::new(self.lr, self.beta, self.momentum_s, self.weight_decay),
            epochs: trees.as_ref().map_or(self.epochs, |t| t.rounds),
            batch_queries: self.batch,
            patience: self.patience,
            seed: self.seed,
            ensemble: self.ensemble,
            average_epochs: self.average_epochs,
            lr_halve_after: self.lr_halve_after,
            sample_rows: self.sample_rows,
            mixup: self.mixup,
            convention,
            source,
            parent: None,
            trees,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_validate_and_differ_where_measured() {
        TrainSettings::letor().validate().unwrap();
        TrainSettings::on_index().validate().unwrap();
        let index = TrainSettings::on_index();
        assert_eq!(index.model, ModelChoice::Linear);
        assert_eq!(index.weight_t, 0.0);
        assert_eq!(index.objective, ObjectiveKind::StableAp);
        assert_eq!(TrainSettings::default(), TrainSettings::letor_network());
        let letor = TrainSettings::letor();
        assert_eq!(letor.model, ModelChoice::Gbdt);
        assert!(letor.graded && letor.weight_a == 10.0);
    }

    #[test]
    fn bad_values_are_named() {
        for (settings, name) in [
            (
                TrainSettings {
                    lr: f64::NAN,
                    ..Default::default()
                },
                "lr",
            ),
            (
                TrainSettings {
                    epochs: 0,
                    ..Default::default()
                },
                "epochs",
            ),
            (
                TrainSettings {
                    hidden: vec![],
                    ..Default::default()
                },
                "hidden",
            ),
            (
                TrainSettings {
                    valid_fraction: 1.0,
                    ..Default::default()
                },
                "valid_fraction",
            ),
            (
                TrainSettings {
                    sample_rows: Some(1),
                    ..Default::default()
                },
                "sample_rows",
            ),
        ] {
            let e = settings.validate().unwrap_err();
            assert!(e.0.starts_with(name), "{name}: {e}");
        }
    }

    #[test]
    fn trees_take_their_own_options_and_tree_objectives_only() {
        let s: TrainSettings = serde_json::from_str(
            r#"{"model": "gbdt", "objective": "lambda-ndcg", "trees": 7, "leaves": 5,
                "tree_lr": 0.3, "sigma": 2.0, "truncation": 10}"#,
        )
        .unwrap();
        s.validate().unwrap();
        let config = s.config("x".into(), MetricConvention::Letor);
        let trees = config.trees.as_ref().unwrap();
        assert_eq!((trees.rounds, trees.num_leaves), (7, 5));
        assert_eq!(trees.learning_rate, 0.3);
        assert_eq!(config.epochs, 7, "progress counts rounds");
        assert_eq!(
            config.objective,
            Objective::LambdaNdcg(LambdaParams {
                sigma: 2.0,
                truncation: 10,
                norm: true,
                threshold: 1
            })
        );
        assert!(config.hidden.is_empty());
        // Networks get no trees; trees refuse network-only objectives, naming them.
        assert!(TrainSettings::letor_network()
            .config("x".into(), MetricConvention::Letor)
            .trees
            .is_none());
        assert!(TrainSettings::letor()
            .config("x".into(), MetricConvention::Letor)
            .trees
            .is_some());
        for (objective, ok) in [
            (ObjectiveKind::StableAp, true),
            (ObjectiveKind::LambdaAp, true),
            (ObjectiveKind::Ranknet, false),
            (ObjectiveKind::Soprc, false),
        ] {
            let r = TrainSettings {
                objective,
                ..s.clone()
            }
            .validate();
            assert_eq!(r.is_ok(), ok, "{objective:?}: {r:?}");
            if let Err(e) = r {
                assert!(e.0.contains("does not train trees"), "{e}");
            }
        }
        for (bad, name) in [
            (
                TrainSettings {
                    trees: 0,
                    ..s.clone()
                },
                "trees",
            ),
            (
                TrainSettings {
                    max_bins: 256,
                    ..s.clone()
                },
                "max_bins",
            ),
            (
                TrainSettings {
                    row_fraction: 0.0,
                    ..s.clone()
                },
                "row_fraction",
            ),
        ] {
            let e = bad.validate().unwrap_err();
            assert!(e.0.starts_with(name), "{name}: {e}");
        }
        // Without early stopping, trees hold out no validation queries; networks always do.
        assert!(!s.holds_out_validation());
        assert!(TrainSettings {
            early_stopping_rounds: 5,
            ..s
        }
        .holds_out_validation());
        assert!(TrainSettings::letor_network().holds_out_validation());
        assert!(!TrainSettings::letor().holds_out_validation());
    }

    #[test]
    fn letor_preset_follows_the_requested_model_and_objective() {
        use ObjectiveKind::*;
        assert_eq!(TrainSettings::letor_for(None, None), TrainSettings::letor());
        assert_eq!(
            TrainSettings::letor_for(None, Some(LambdaNdcg)),
            TrainSettings::letor()
        );
        for (model, objective) in [
            (Some(ModelChoice::Mlp), None),
            (Some(ModelChoice::Linear), Some(StableAp)),
            (None, Some(Ranknet)),
            (None, Some(Soprc)),
        ] {
            assert_eq!(
                TrainSettings::letor_for(model, objective),
                TrainSettings::letor_network(),
                "{model:?} {objective:?}"
            );
        }
        assert_eq!(
            TrainSettings::letor_for(Some(ModelChoice::Gbdt), Some(Ranknet)).model,
            ModelChoice::Gbdt,
            "an explicit gbdt stays (and validation names the objective)"
        );
    }

    #[test]
    fn serde_fills_defaults_and_refuses_unknown_fields() {
        let s: TrainSettings = serde_json::from_str(r#"{"lr": 0.5, "model": "linear"}"#).unwrap();
        assert_eq!(s.lr, 0.5);
        assert_eq!(s.epochs, TrainSettings::default().epochs);
        assert!(serde_json::from_str::<TrainSettings>(r#"{"learning_rate": 1}"#).is_err());
    }
}
