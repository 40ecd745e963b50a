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

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use crate::error::Invalid;
use crate::rerank::gbdt::train::GbdtParams;
use crate::rerank::objective::{LambdaParams, Soprc, StableAp};
use crate::rerank::{
    MetricConvention, NetworkParams, Objective, ObjectiveKind, RerankError, TrainConfig,
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

/// Objective, model and optimiser settings (SPEC §3.2–3.3 names). The network's and the
/// trees' own settings are sections the trainer takes as they are ([`NetworkParams`],
/// [`GbdtParams`]); serialised, every setting is one flat field under the name of its
/// `rankd train` flag, as `POST /admin/train` takes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainSettings {
    pub objective: ObjectiveKind,
    pub model: ModelChoice,
    /// Initialisation, shuffles, the validation split, bagging.
    pub seed: u64,
    /// Share of the training queries held out for early stopping.
    pub valid_fraction: f64,
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
    /// LambdaMART (`lambda-ndcg`, `lambda-ap`): pairs need one row among the first this many
    /// (NDCG; LightGBM's `lambdarank_truncation_level`). Its σ is `sigma`.
    pub truncation: usize,
    /// LambdaMART: LightGBM's `lambdarank_norm`.
    pub lambda_norm: bool,
    /// `model: linear` or `mlp` (a linear model ignores `hidden`).
    #[serde(flatten)]
    pub network: NetworkParams,
    /// `model: gbdt`. Its `early_stopping_rounds` of 0 means no early stopping, and
    /// `eval-letor` then trains on every training query.
    #[serde(flatten)]
    pub gbdt: GbdtParams,
}

/// Whether trees can be trained with `objective` (SPEC §3.6).
fn trains_trees(objective: ObjectiveKind) -> bool {
    matches!(
        objective,
        ObjectiveKind::StableAp | ObjectiveKind::LambdaNdcg | ObjectiveKind::LambdaAp
    )
}

/// The knob that sets an objective's parameter (the objectives name them by their papers).
fn knob(param: &'static str) -> &'static str {
    match param {
        "a" => "weight_a",
        "t" => "weight_t",
        "tau1" => "tau",
        "tau2" => "soprc_tau2",
        "beta" => "soprc_beta",
        "quantiles" => "soprc_quantiles",
        "lambda_pos" => "soprc_var_pos",
        "lambda_neg" => "soprc_var_neg",
        same => same,
    }
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
        let base = TrainSettings::letor_network();
        TrainSettings {
            model: ModelChoice::Gbdt,
            graded: true,
            weight_a: 10.0,
            gbdt: GbdtParams {
                min_data_in_leaf: 50,
                min_sum_hessian: 5.0,
                row_fraction: 0.9,
                ..base.gbdt.clone()
            },
            ..base
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
            seed: 1,
            valid_fraction: 0.2,
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
            truncation: 30,
            lambda_norm: true,
            network: NetworkParams::default(),
            gbdt: GbdtParams::default(),
        }
    }

    /// For judgments on the index (`rankd train` on queries and qrels, `rankd cv`,
    /// `POST /admin/train`, the demo): a linear model, stable AP without its rank weighting
    /// (t = 0: +0.05 MRR over the paper's weighting in cross-validation on the demo's
    /// training queries), a small rate and a long patience (validation MAP swings from epoch to
    /// epoch on known-item judgments, and a short patience locks in an early peak).
    pub fn on_index() -> Self {
        let base = TrainSettings::letor_network();
        TrainSettings {
            model: ModelChoice::Linear,
            weight_t: 0.0,
            network: NetworkParams {
                lr: 0.002,
                epochs: 300,
                patience: 60,
                ..base.network.clone()
            },
            ..base
        }
    }

    /// Checks every value, naming the first one out of range: the objective's here, the
    /// network's and the trees' in their own sections ([`NetworkParams::validate`],
    /// [`GbdtParams::validate`]).
    pub fn validate(&self) -> Result<(), Invalid> {
        let section = |e: RerankError| Invalid(e.to_string());
        self.network().validate().map_err(section)?;
        if self.model == ModelChoice::Mlp && self.network.hidden.is_empty() {
            return Err(Invalid(
                "hidden must be one or two positive layer widths, got []".into(),
            ));
        }
        // Every objective's knobs, whichever objective trains: a knob out of range is an
        // error even where this run does not read it. The domains are the objectives' own.
        for &kind in ObjectiveKind::value_variants() {
            if let Some(e) = self.objective_of(kind).out_of_range() {
                return Err(Invalid(format!(
                    "{} must be {}, got {}",
                    knob(e.param),
                    e.domain,
                    e.value
                )));
            }
        }
        if !(self.valid_fraction > 0.0 && self.valid_fraction < 1.0) {
            return Err(Invalid(format!(
                "valid_fraction must be in (0, 1), got {}",
                self.valid_fraction
            )));
        }
        if self.model == ModelChoice::Gbdt {
            if !trains_trees(self.objective) {
                return Err(Invalid(format!(
                    "objective {} does not train trees (model gbdt takes stable-ap, lambda-ndcg \
                     or lambda-ap)",
                    Objective::with_defaults(self.objective, self.tau, self.threshold)
                        .kind()
                        .as_str()
                )));
            }
            self.gbdt.validate().map_err(section)?;
        }
        Ok(())
    }

    /// The settings for training from clicks debiased by `debias` into `labels`: unbiased
    /// LambdaMART ([`crate::user_clicks::ips::Debias::Pairwise`]) trains LambdaMART trees, so
    /// its objective becomes lambda-ndcg unless `objective_chosen` (and `labels` does not
    /// apply); another chosen objective, or a network, is an error naming the choice. Graded
    /// click labels ([`crate::user_clicks::ips::ClickLabels::Graded`], click rates in
    /// thousandths) train only the objectives that read nothing of a label but its order —
    /// the AP objectives, made graded (the mean over every level), and RankNet; LambdaMART's
    /// gains `2^y − 1`, a relevance threshold and the hinges would read them as grades, and
    /// are an error naming the objective.
    pub fn for_clicks(
        mut self,
        debias: crate::user_clicks::ips::Debias,
        labels: crate::user_clicks::ips::ClickLabels,
        objective_chosen: bool,
    ) -> Result<Self, Invalid> {
        if debias != crate::user_clicks::ips::Debias::Pairwise {
            if labels == crate::user_clicks::ips::ClickLabels::Graded {
                match self.objective {
                    ObjectiveKind::StableAp | ObjectiveKind::SmoothAp | ObjectiveKind::Soprc => {
                        self.graded = true
                    }
                    ObjectiveKind::Ranknet => {}
                    other => {
                        return Err(Invalid(format!(
                            "click labels graded (click rates) train objectives that read only \
                             the order of the labels (stable-ap, smooth-ap, soprc, ranknet), \
                             not {}: train with click labels binary",
                            crate::rerank::objective::ObjectiveName::Kind(other).as_str()
                        )))
                    }
                }
            }
            return Ok(self);
        }
        if self.model != ModelChoice::Gbdt {
            return Err(Invalid(format!(
                "debias pairwise (unbiased LambdaMART) trains trees, not model {}: train with \
                 model gbdt, or debias ips",
                self.model
            )));
        }
        if objective_chosen && self.objective != ObjectiveKind::LambdaNdcg {
            return Err(Invalid(format!(
                "debias pairwise (unbiased LambdaMART) trains objective lambda-ndcg, not {}",
                crate::rerank::objective::ObjectiveName::Kind(self.objective).as_str()
            )));
        }
        self.objective = ObjectiveKind::LambdaNdcg;
        Ok(self)
    }

    /// Whether training holds out validation queries: networks always early-stop; trees
    /// only with `early_stopping_rounds`.
    pub fn holds_out_validation(&self) -> bool {
        self.model != ModelChoice::Gbdt || self.gbdt.early_stopping_rounds > 0
    }

    /// The network that trains: the `network` section, without hidden layers for a linear
    /// model.
    fn network(&self) -> NetworkParams {
        match self.model {
            ModelChoice::Mlp => self.network.clone(),
            ModelChoice::Linear | ModelChoice::Gbdt => NetworkParams {
                hidden: Vec::new(),
                ..self.network.clone()
            },
        }
    }

    /// The objective that trains, with its knobs.
    pub fn objective(&self) -> Objective {
        self.objective_of(self.objective)
    }

    fn objective_of(&self, kind: ObjectiveKind) -> Objective {
        match kind {
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
    pub fn config(&self, source: String, convention: MetricConvention) -> TrainConfig {
        TrainConfig {
            objective: self.objective(),
            network: self.network(),
            gbdt: (self.model == ModelChoice::Gbdt).then(|| self.gbdt.clone()),
            seed: self.seed,
            convention,
            source,
            parent: None,
            click_lists: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Unbiased LambdaMART trains lambda-ndcg trees: the objective follows unless one was
    /// chosen, and a network or another chosen objective is refused naming it.
    #[test]
    fn pairwise_debias_trains_lambda_ndcg_trees_or_says_why_not() {
        use crate::user_clicks::ips::{ClickLabels, Debias};
        let trees = TrainSettings {
            model: ModelChoice::Gbdt,
            ..TrainSettings::on_index()
        };
        let s = trees
            .clone()
            .for_clicks(Debias::Pairwise, ClickLabels::Graded, false)
            .unwrap();
        assert_eq!(s.objective, ObjectiveKind::LambdaNdcg);
        let e = trees
            .clone()
            .for_clicks(Debias::Pairwise, ClickLabels::Binary, true)
            .unwrap_err();
        assert!(e.0.contains("lambda-ndcg, not stable-ap"), "{}", e.0);
        let e = TrainSettings::on_index()
            .for_clicks(Debias::Pairwise, ClickLabels::Graded, false)
            .unwrap_err();
        assert!(e.0.contains("trains trees, not model linear"), "{}", e.0);
        // IPS and naive with binary labels leave the settings as they are.
        for debias in [Debias::Ips, Debias::None] {
            let s = TrainSettings::on_index().for_clicks(debias, ClickLabels::Binary, false);
            assert_eq!(s.unwrap(), TrainSettings::on_index());
        }
    }

    /// Graded click labels make the AP objectives graded, leave RankNet as it is, and refuse
    /// the objectives that read labels as gains or against a threshold, naming them.
    #[test]
    fn graded_click_labels_train_order_only_objectives() {
        use crate::user_clicks::ips::{ClickLabels, Debias};
        let index = TrainSettings::on_index();
        assert!(!index.graded);
        let s = index
            .clone()
            .for_clicks(Debias::Ips, ClickLabels::Graded, false)
            .unwrap();
        assert_eq!(
            s,
            TrainSettings {
                graded: true,
                ..TrainSettings::on_index()
            }
        );
        for objective in [ObjectiveKind::SmoothAp, ObjectiveKind::Soprc] {
            let s = TrainSettings {
                objective,
                ..TrainSettings::on_index()
            };
            assert!(
                s.for_clicks(Debias::None, ClickLabels::Graded, true)
                    .unwrap()
                    .graded
            );
        }
        let ranknet = TrainSettings {
            objective: ObjectiveKind::Ranknet,
            ..TrainSettings::on_index()
        };
        assert_eq!(
            ranknet
                .clone()
                .for_clicks(Debias::Ips, ClickLabels::Graded, true)
                .unwrap(),
            ranknet
        );
        for (objective, name) in [
            (ObjectiveKind::LambdaNdcg, "lambda-ndcg"),
            (ObjectiveKind::LambdaAp, "lambda-ap"),
            (ObjectiveKind::ApHingeQs, "ap-hinge-qs"),
            (ObjectiveKind::NdcgHingeQs, "ndcg-hinge-qs"),
        ] {
            let s = TrainSettings {
                objective,
                ..TrainSettings::letor()
            };
            let e = s
                .clone()
                .for_clicks(Debias::Ips, ClickLabels::Graded, true)
                .unwrap_err();
            assert!(
                e.0.contains(&format!("not {name}: train with click labels binary")),
                "{}",
                e.0
            );
            assert_eq!(
                s.clone()
                    .for_clicks(Debias::Ips, ClickLabels::Binary, true)
                    .unwrap(),
                s
            );
        }
    }

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
                    network: NetworkParams {
                        lr: f64::NAN,
                        ..NetworkParams::default()
                    },
                    ..Default::default()
                },
                "lr",
            ),
            (
                TrainSettings {
                    network: NetworkParams {
                        epochs: 0,
                        ..NetworkParams::default()
                    },
                    ..Default::default()
                },
                "epochs",
            ),
            (
                TrainSettings {
                    network: NetworkParams {
                        hidden: vec![],
                        ..NetworkParams::default()
                    },
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
                    network: NetworkParams {
                        sample_rows: Some(1),
                        ..NetworkParams::default()
                    },
                    ..Default::default()
                },
                "sample_rows",
            ),
        ] {
            let e = settings.validate().unwrap_err();
            assert!(e.0.starts_with(name), "{name}: {e}");
        }
        // The objectives' knobs are checked by the objectives' own domains, named by their
        // knobs, whichever objective trains.
        type Spoil = fn(&mut TrainSettings);
        let knobs: [(Spoil, &str); 8] = [
            (|s| s.tau = 0.0, "tau must be a positive number"),
            (
                |s| s.weight_t = -1.0,
                "weight_t must be a finite number ≥ 0",
            ),
            (|s| s.lambda = 0.0, "lambda must be in (0, 1]"),
            (|s| s.soprc_beta = 0.0, "soprc_beta must be in (0, 1]"),
            (
                |s| s.soprc_quantiles = 2000,
                "soprc_quantiles must be at least 1 and at most 1024",
            ),
            (
                |s| s.soprc_var_neg = f64::NAN,
                "soprc_var_neg must be a finite number ≥ 0",
            ),
            (|s| s.truncation = 0, "truncation must be at least 1"),
            (|s| s.threshold = 0, "threshold must be at least 1"),
        ];
        for (spoil, message) in knobs {
            let mut settings = TrainSettings::default();
            spoil(&mut settings);
            let e = settings.validate().unwrap_err();
            assert!(e.0.starts_with(message), "{message}: {e}");
            // The trainer, given the same objective, refuses it too.
            let objectives = ObjectiveKind::value_variants()
                .iter()
                .filter(|&&k| settings.objective_of(k).validate().is_err());
            assert!(objectives.count() > 0, "{message}");
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
        let trees = config.gbdt.as_ref().unwrap();
        assert_eq!((trees.trees, trees.leaves), (7, 5));
        assert_eq!(trees.tree_lr, 0.3);
        assert_eq!(config.epochs(), 7, "progress counts rounds");
        assert_eq!(
            config.objective,
            Objective::LambdaNdcg(LambdaParams {
                sigma: 2.0,
                truncation: 10,
                norm: true,
                threshold: 1
            })
        );
        assert!(config.network.hidden.is_empty());
        // Networks get no trees; trees refuse network-only objectives, naming them.
        assert!(TrainSettings::letor_network()
            .config("x".into(), MetricConvention::Letor)
            .gbdt
            .is_none());
        assert!(TrainSettings::letor()
            .config("x".into(), MetricConvention::Letor)
            .gbdt
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
                    gbdt: GbdtParams {
                        trees: 0,
                        ..s.gbdt.clone()
                    },
                    ..s.clone()
                },
                "trees",
            ),
            (
                TrainSettings {
                    gbdt: GbdtParams {
                        max_bins: 256,
                        ..s.gbdt.clone()
                    },
                    ..s.clone()
                },
                "max_bins",
            ),
            (
                TrainSettings {
                    gbdt: GbdtParams {
                        row_fraction: 0.0,
                        ..s.gbdt.clone()
                    },
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
            gbdt: GbdtParams {
                early_stopping_rounds: 5,
                ..s.gbdt.clone()
            },
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

    /// Serialised, the sections are flat: every field under its flag's name, as
    /// `POST /admin/train` takes them.
    #[test]
    fn sections_serialise_flat() {
        let v = serde_json::to_value(TrainSettings::letor()).unwrap();
        let fields = v.as_object().unwrap();
        for name in [
            "lr", "batch", "norm", "hidden", "trees", "leaves", "tree_lr", "seed",
        ] {
            assert!(fields.contains_key(name), "{name}: {v}");
        }
        assert!(!fields.contains_key("network") && !fields.contains_key("gbdt"));
        let back: TrainSettings = serde_json::from_value(v).unwrap();
        assert_eq!(back, TrainSettings::letor());
        let s: TrainSettings =
            serde_json::from_str(r#"{"batch": 4, "leaves": 9, "seed": 3}"#).unwrap();
        assert_eq!((s.network.batch, s.gbdt.leaves, s.seed), (4, 9, 3));
        assert_eq!(s.network.lr, TrainSettings::default().network.lr);
    }

    #[test]
    fn serde_fills_defaults_and_refuses_unknown_fields() {
        let s: TrainSettings = serde_json::from_str(r#"{"lr": 0.5, "model": "linear"}"#).unwrap();
        assert_eq!(s.network.lr, 0.5);
        assert_eq!(s.network.epochs, TrainSettings::default().network.epochs);
        assert!(serde_json::from_str::<TrainSettings>(r#"{"learning_rate": 1}"#).is_err());
        assert!(serde_json::from_str::<TrainSettings>(r#"{"colour": 1}"#).is_err());
    }
}
