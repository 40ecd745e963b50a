//! The reranker a server loads, and its file (SPEC §3.2): one JSON document with format name
//! and version, id, parent id, creation time, feature names, normalisation, networks, and how
//! it was trained (objective and every hyperparameter, seed, metrics).
//!
//! Version 2 holds a list of networks whose scores are averaged (an ensemble over
//! initialisation seeds; one network without one). Version 1 files, with a single `network`,
//! still load: they are the one-network case. Version 3 holds gradient-boosted trees
//! (`gbdt`: the forest and how it was made, [`GbdtModel`]) instead of networks and
//! normalisation; networks are still written as version 2, byte for byte as before, so
//! older rankd versions keep reading them.
//!
//! For trees, `training` keeps its meaning with boosting rounds for epochs: `epochs` is the
//! round limit, `best_epoch` the kept round, `epochs_run` the rounds run, `patience` the
//! early-stopping rounds (0: none), `batch_queries` the training queries (every round sees
//! them all), no `optimizer`; an imported model has the objective `external` and no
//! metrics.
//!
//! `load` trusts nothing: it names the file and the field for truncated JSON, another format
//! version, non-finite numbers, or shapes that do not fit the feature list. The id is a hash
//! of everything except the creation time, so training twice with the same seed gives the
//! same id (and the same file up to `created_at`).

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::gbdt::import::Imported;
use super::gbdt::model::GbdtModel;
use super::net::ensemble_score;
use super::{Net, Normalizer, Objective, RankMetrics, RerankError, UnifiedMomentum};
use crate::pairwise::first_non_finite;

pub const FORMAT_NAME: &str = "rankd-reranker";
/// The layout of network models.
pub const FORMAT_VERSION: u32 = 2;
/// The layout of tree models.
pub const FORMAT_VERSION_GBDT: u32 = 3;
/// The older layout `load` still reads (one `network` instead of `networks`).
const FORMAT_VERSION_SINGLE_NETWORK: u32 = 1;

/// Metrics stored with a model (training and validation sets at the kept epoch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelMetrics {
    pub train: Option<RankMetrics>,
    pub valid: Option<RankMetrics>,
}

/// How the model was trained: enough to train it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainingInfo {
    pub objective: Objective,
    /// Networks' optimiser (absent for trees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer: Option<UnifiedMomentum>,
    pub epochs: usize,
    pub batch_queries: usize,
    pub patience: usize,
    pub seed: u64,
    /// The epoch whose parameters were kept (best validation MAP), 1-based; of the first
    /// ensemble member.
    pub best_epoch: usize,
    /// Epochs run by the first ensemble member.
    pub epochs_run: usize,
    /// Networks trained from different initialisation seeds, scores averaged (version 1
    /// files: 1).
    #[serde(default = "one")]
    pub ensemble: usize,
    /// Early stopping and the kept parameters use the mean of the parameters at the end of
    /// this many last epochs (1: the parameters themselves; version 1 files: 1).
    #[serde(default = "one")]
    pub average_epochs: usize,
    /// The learning rate was halved after every run of this many epochs without a better
    /// validation MAP (0: constant; version 1 files: 0).
    #[serde(default)]
    pub lr_halve_after: usize,
    /// Rows sampled per query and visit (absent: every row; older files never sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_rows: Option<usize>,
    /// Input-feature mixup weight u (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mixup: Option<f32>,
    /// The kept epoch of every ensemble member (version 1 files: empty).
    #[serde(default)]
    pub member_best_epochs: Vec<usize>,
    pub metrics: ModelMetrics,
    /// Where the training data came from (e.g. the LETOR file), for people.
    pub source: String,
    /// For a model that reads `dense.similarity`: the fingerprint of the embedder whose
    /// vectors gave that feature in its training rows (`crate::dense::fingerprint`). Another
    /// embedder's similarities have another distribution, so serving computes the feature
    /// only from vectors of this one (absent: not recorded, any vectors serve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder: Option<String>,
}

fn one() -> usize {
    1
}

/// A trained reranker: normalisation + networks + metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reranker {
    pub format: String,
    pub format_version: u32,
    pub id: String,
    pub parent: Option<String>,
    pub created_at: String,
    pub feature_names: Vec<String>,
    /// Networks' input normalisation (absent for trees, which read raw values).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalization: Option<Normalizer>,
    /// One network, or an ensemble whose score is the mean of the members' scores. All
    /// members have the same layer widths. Empty for trees.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<Net>,
    /// Gradient-boosted trees (format version 3) instead of networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbdt: Option<GbdtModel>,
    pub training: TrainingInfo,
}

impl Reranker {
    /// Assembles a model, stamping the creation time and computing the id.
    pub fn new(
        feature_names: Vec<String>,
        normalization: Normalizer,
        networks: Vec<Net>,
        training: TrainingInfo,
        parent: Option<String>,
    ) -> Result<Self, RerankError> {
        Self::assemble(Reranker {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION,
            id: String::new(),
            parent,
            created_at: String::new(),
            feature_names,
            normalization: Some(normalization),
            networks,
            gbdt: None,
            training,
        })
    }

    /// Assembles a tree model (format version 3), stamping the time and computing the id.
    pub fn new_gbdt(
        feature_names: Vec<String>,
        gbdt: GbdtModel,
        training: TrainingInfo,
        parent: Option<String>,
    ) -> Result<Self, RerankError> {
        Self::assemble(Reranker {
            format: FORMAT_NAME.into(),
            format_version: FORMAT_VERSION_GBDT,
            id: String::new(),
            parent,
            created_at: String::new(),
            feature_names,
            normalization: None,
            networks: Vec::new(),
            gbdt: Some(gbdt),
            training,
        })
    }

    /// A model trained by another library ([`super::gbdt::import`]), bound to
    /// `feature_set` by name or position; `source` says where it came from (its file).
    pub fn from_imported(
        imported: &Imported,
        feature_set: &[String],
        source: String,
    ) -> Result<Self, RerankError> {
        let (names, forest) = imported.bind(feature_set).map_err(RerankError::Invalid)?;
        let trees = forest.trees.len();
        let training = TrainingInfo {
            objective: Objective::External {
                library: imported.library.name().into(),
                objective: imported.objective.clone(),
            },
            optimizer: None,
            epochs: trees,
            batch_queries: 0,
            patience: 0,
            seed: 0,
            best_epoch: trees,
            epochs_run: trees,
            ensemble: 1,
            average_epochs: 1,
            lr_halve_after: 0,
            sample_rows: None,
            mixup: None,
            member_best_epochs: Vec::new(),
            metrics: ModelMetrics {
                train: None,
                valid: None,
            },
            source,
            embedder: None,
        };
        let gbdt = GbdtModel::new(forest, None, Some(imported.library));
        Self::new_gbdt(names, gbdt, training, None)
    }

    fn assemble(mut model: Reranker) -> Result<Self, RerankError> {
        model.created_at = tantivy::time::OffsetDateTime::now_utc()
            .format(&tantivy::time::format_description::well_known::Rfc3339)
            .map_err(|e| RerankError::invalid(format!("cannot format the current time: {e}")))?;
        model.validate().map_err(RerankError::Invalid)?;
        model.id = model.content_id();
        Ok(model)
    }

    /// `sha256` of the JSON of every field but `id` and `created_at`, first 16 hex digits.
    fn content_id(&self) -> String {
        let mut copy = self.clone();
        copy.id.clear();
        copy.created_at.clear();
        let bytes = serde_json::to_vec(&copy).expect("a model always serialises");
        let digest = Sha256::digest(&bytes);
        digest[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The model with [`TrainingInfo::embedder`] set to `fingerprint`, and its id computed
    /// again (the id covers it: the same weights over another embedder's similarities are
    /// another model).
    pub fn with_embedder(mut self, fingerprint: String) -> Self {
        self.training.embedder = Some(fingerprint);
        self.id = self.content_id();
        self
    }

    pub fn feature_names(&self) -> &[String] {
        &self.feature_names
    }

    pub fn num_features(&self) -> usize {
        self.feature_names.len()
    }

    /// A linear model (an ensemble of linear models is stored folded into one).
    pub fn is_linear(&self) -> bool {
        self.networks.first().is_some_and(Net::is_linear)
    }

    /// `"linear"`, `"mlp"` or `"gbdt"`, as reports and the admin API name the model type.
    pub fn kind(&self) -> &'static str {
        if self.gbdt.is_some() {
            "gbdt"
        } else if self.is_linear() {
            "linear"
        } else {
            "mlp"
        }
    }

    /// Hidden-layer widths (empty for the linear model and for trees); the same for every
    /// member.
    pub fn hidden(&self) -> &[usize] {
        self.networks.first().map_or(&[], Net::hidden)
    }

    /// The linear model's bias; `None` for an MLP or an ensemble of them.
    pub fn linear_bias(&self) -> Option<f32> {
        match &self.networks[..] {
            [one] => one.linear_bias(),
            _ => None,
        }
    }

    /// Scores `n_rows` rows, row-major, each in this model's feature order (see
    /// [`map_features`] for rows in another order). Networks refuse non-finite values; trees
    /// read NaN as a missing value (each node sends it to its missing side) and compare
    /// infinities like any value.
    pub fn score(&self, x: &[f32], n_rows: usize) -> Result<Vec<f32>, RerankError> {
        let d = self.num_features();
        if x.len() != n_rows * d {
            return Err(RerankError::invalid(format!(
                "{} feature values for {n_rows} rows of {d} features",
                x.len()
            )));
        }
        if let Some(gbdt) = &self.gbdt {
            return gbdt
                .compiled()
                .score(x, n_rows)
                .map_err(RerankError::Invalid);
        }
        if let Some(i) = first_non_finite(x) {
            return Err(RerankError::invalid(format!(
                "feature `{}` of row {} is {}",
                self.feature_names[i % d],
                i / d,
                x[i]
            )));
        }
        let normalized = self.normalizer().apply(x);
        ensemble_score(&self.networks, &normalized, n_rows)
    }

    /// A network model's normalisation (validated to exist for every network model).
    fn normalizer(&self) -> &Normalizer {
        self.normalization
            .as_ref()
            .expect("a network model has a normalisation")
    }

    /// Per-feature contributions of one row: `w_i · norm(x_i)` for a linear model (their sum
    /// plus the bias is the score), path-dependent TreeSHAP values for trees with covers
    /// (their sum plus [`Reranker::base_score`] is the score); `None` for an MLP, trees
    /// without covers, or a row of the wrong length.
    pub fn contributions(&self, row: &[f32]) -> Option<Vec<f32>> {
        if let Some(gbdt) = &self.gbdt {
            if row.len() != gbdt.forest.num_features {
                return None;
            }
            return super::gbdt::shap::contributions(&gbdt.forest, row)
                .map(|phi| phi.into_iter().map(|p| p as f32).collect());
        }
        let [network] = &self.networks[..] else {
            return None;
        };
        if row.len() != self.num_features() {
            return None;
        }
        network.contributions(&self.normalizer().apply(row))
    }

    /// The part of every score no feature explains, to which [`Reranker::contributions`]
    /// add: a linear model's bias, a tree model's expected score.
    pub fn base_score(&self) -> Option<f32> {
        if let Some(gbdt) = &self.gbdt {
            return super::gbdt::shap::expected_value(&gbdt.forest).map(|v| v as f32);
        }
        self.linear_bias()
    }

    /// The size of the file [`Self::save`] writes, in bytes, counted without writing it.
    pub fn file_len(&self) -> usize {
        struct Count(usize);
        impl std::io::Write for Count {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        serde_json::to_writer_pretty(&mut count, self).expect("a model always serialises");
        count.0
    }

    /// The model file's bytes, as [`Self::save`] writes them.
    pub fn to_file_bytes(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a model always serialises")
    }

    /// Writes the model atomically (temp file + fsync + rename).
    pub fn save(&self, path: &Path) -> Result<(), RerankError> {
        crate::text::index::write_atomic(path, &self.to_file_bytes()).map_err(|e| {
            RerankError::Write {
                path: path.to_path_buf(),
                message: format!("{e:#}"),
            }
        })
    }

    /// Reads and validates a model file.
    pub fn load(path: &Path) -> Result<Self, RerankError> {
        let fail = |message: String| RerankError::ModelFile {
            path: path.to_path_buf(),
            message,
        };
        let bytes = std::fs::read(path).map_err(|e| fail(format!("cannot read: {e}")))?;
        Self::from_json(&bytes).map_err(fail)
    }

    /// Parses and validates model JSON; the error says what is wrong (no file name).
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        // Check the format first, so a file from another version says so rather than
        // failing on whichever field changed.
        let mut value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
            if e.is_eof() {
                format!("truncated JSON ({e})")
            } else {
                format!("not valid JSON ({e})")
            }
        })?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT_NAME) => {}
            other => {
                return Err(format!(
                    "`format` is {other:?}, expected \"{FORMAT_NAME}\": not a rankd model file"
                ))
            }
        }
        let version = value.get("format_version").and_then(|v| v.as_u64());
        match version {
            Some(v) if v == u64::from(FORMAT_VERSION) || v == u64::from(FORMAT_VERSION_GBDT) => {}
            Some(v) if v == u64::from(FORMAT_VERSION_SINGLE_NETWORK) => {
                value = single_network_to_list(value)?;
            }
            other => {
                return Err(format!(
                    "format version {other:?} is not supported (this rankd reads versions \
                     {FORMAT_VERSION_SINGLE_NETWORK} to {FORMAT_VERSION_GBDT})"
                ))
            }
        }
        let model: Reranker = serde_json::from_value(value).map_err(|e| {
            format!(
                "does not match the version {} layout: {e}",
                version.unwrap_or_default()
            )
        })?;
        model.validate()?;
        Ok(model)
    }

    /// Shapes and numbers: features, normalisation and network (or trees) must agree and be
    /// finite; a tree model is compiled here, so every limit is checked at load.
    fn validate(&self) -> Result<(), String> {
        let d = self.feature_names.len();
        if d == 0 {
            return Err("the model has no features".into());
        }
        let mut seen = std::collections::HashSet::new();
        if let Some(dup) = self.feature_names.iter().find(|n| !seen.insert(n.as_str())) {
            return Err(format!("feature `{dup}` is listed twice"));
        }
        if let Some(gbdt) = &self.gbdt {
            if self.format_version != FORMAT_VERSION_GBDT {
                return Err(format!(
                    "`gbdt` trees in a format version {} file (trees are version {})",
                    self.format_version, FORMAT_VERSION_GBDT
                ));
            }
            if !self.networks.is_empty() || self.normalization.is_some() {
                return Err(
                    "the model has both trees and networks (or a normalisation); a model is one \
                     or the other"
                        .into(),
                );
            }
            return gbdt.prepare(d).map_err(|e| format!("gbdt: {e}"));
        }
        if self.format_version == FORMAT_VERSION_GBDT {
            return Err("a format version 3 model has no `gbdt` trees".into());
        }
        let normalization = self
            .normalization
            .as_ref()
            .ok_or("the model has networks but no normalisation")?;
        normalization.validate(d)?;
        if self.networks.is_empty() {
            return Err("the model has no network (`networks` is missing or empty)".into());
        }
        for (k, network) in self.networks.iter().enumerate() {
            network
                .validate()
                .map_err(|e| format!("network {k}: {e}"))?;
            if network.inputs() != d {
                return Err(format!(
                    "network {k} takes {} inputs but the model lists {d} features",
                    network.inputs()
                ));
            }
            if network.layers != self.networks[0].layers
                || network.activation != self.networks[0].activation
            {
                return Err(format!(
                    "network {k} has layers {:?} ({:?}) but network 0 has {:?} ({:?}): \
                     ensemble members must have the same shape",
                    network.layers,
                    network.activation,
                    self.networks[0].layers,
                    self.networks[0].activation
                ));
            }
        }
        Ok(())
    }
}

/// A version 1 document (one `network`) as a version 2 one (`networks: [network]`); the
/// training fields added in version 2 take their defaults when read.
fn single_network_to_list(mut value: serde_json::Value) -> Result<serde_json::Value, String> {
    let object = value
        .as_object_mut()
        .ok_or("a version 1 model is not a JSON object")?;
    let network = object
        .remove("network")
        .ok_or("a version 1 model has no `network`")?;
    object.insert("networks".into(), serde_json::Value::Array(vec![network]));
    object.insert("format_version".into(), FORMAT_VERSION.into());
    Ok(value)
}

/// Maps rows given in `from` feature order (row-major, `from.len()` values each) into the
/// order of `to` (a model's [`Reranker::feature_names`]). A feature of `to` absent from
/// `from` is an error naming every missing feature, so a server can say which features a
/// model needs that it does not compute; extra features in `from` are dropped.
pub fn map_features(from: &[String], x: &[f32], to: &[String]) -> Result<Vec<f32>, RerankError> {
    let d = from.len();
    if d == 0 || !x.len().is_multiple_of(d) {
        return Err(RerankError::invalid(format!(
            "{} feature values do not make rows of {d} features",
            x.len()
        )));
    }
    let index: std::collections::HashMap<&str, usize> = from
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut positions = Vec::with_capacity(to.len());
    let mut missing = Vec::new();
    for name in to {
        match index.get(name.as_str()) {
            Some(&i) => positions.push(i),
            None => missing.push(name.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(RerankError::MissingFeatures { missing });
    }
    Ok(x.chunks_exact(d)
        .flat_map(|row| positions.iter().map(move |&i| row[i]))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rerank::{Activation, NormKind};

    pub(crate) fn tiny_model(hidden: &[usize]) -> Reranker {
        let x = [1.0f32, 10.0, 3.0, 30.0, 2.0, 20.0];
        let norm = Normalizer::fit(NormKind::ZScore, &x, 2).unwrap();
        let mut net = Net::new(2, hidden, Activation::Tanh, 1).unwrap();
        if hidden.is_empty() {
            net.params = vec![0.5, -1.0, 0.25];
        }
        let training = crate::rerank::testutil::training_info();
        Reranker::new(
            vec!["bm25".into(), "pagerank".into()],
            norm,
            vec![net],
            training,
            None,
        )
        .unwrap()
    }

    /// Two tanh MLP members with different initialisations.
    fn tiny_ensemble() -> Reranker {
        let one = tiny_model(&[3]);
        let mut networks = one.networks.clone();
        networks.push(Net::new(2, &[3], Activation::Tanh, 2).unwrap());
        let mut training = one.training.clone();
        training.ensemble = 2;
        training.member_best_epochs = vec![1, 1];
        Reranker::new(
            one.feature_names.clone(),
            one.normalization.clone().unwrap(),
            networks,
            training,
            None,
        )
        .unwrap()
    }

    /// A NaN or infinite feature value is refused with its feature name and row.
    #[test]
    fn non_finite_features_are_named() {
        let m = tiny_model(&[3]);
        let names = m.feature_names().to_vec();
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let rows = [1.0f32, 2.0, 3.0, bad];
            let err = m.score(&rows, 2).unwrap_err().to_string();
            let want = format!("feature `{}` of row 1 is {bad}", names[1]);
            assert!(err.contains(&want), "{err}");
        }
    }

    #[test]
    fn save_load_round_trip_and_scores() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        for hidden in [&[][..], &[3][..]] {
            let m = tiny_model(hidden);
            m.save(&path).unwrap();
            let back = Reranker::load(&path).unwrap();
            assert_eq!(back, m);
            assert_eq!(back.id().len(), 16);
            let rows = [2.0f32, 20.0, 1.0, 10.0];
            assert_eq!(back.score(&rows, 2).unwrap(), m.score(&rows, 2).unwrap());
        }
        // Linear: mean (2, 20), std (sqrt(2/3), 10·sqrt(2/3)); row (3, 30) normalises to
        // (1.2247, 1.2247): contributions 0.5·1.2247 and −1.2247.
        let m = tiny_model(&[]);
        let c = m.contributions(&[3.0, 30.0]).unwrap();
        let z = (1.5f32).sqrt();
        assert!(
            (c[0] - 0.5 * z).abs() < 1e-5 && (c[1] + z).abs() < 1e-5,
            "{c:?}"
        );
        let s = m.score(&[3.0, 30.0], 1).unwrap()[0];
        assert!((s - (c[0] + c[1] + 0.25)).abs() < 1e-6);
        assert!(tiny_model(&[3]).contributions(&[3.0, 30.0]).is_none());
    }

    fn load_error(json: &str) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.json");
        std::fs::write(&path, json).unwrap();
        let err = Reranker::load(&path).unwrap_err().to_string();
        assert!(err.contains("bad.json"), "{err}");
        err
    }

    #[test]
    fn corrupt_files_are_clear_errors() {
        let good = serde_json::to_string_pretty(&tiny_model(&[3])).unwrap();
        assert!(load_error(&good[..good.len() / 2]).contains("truncated JSON"));
        assert!(load_error("{ nope").contains("not valid JSON"));
        let v4 = good.replace("\"format_version\": 2", "\"format_version\": 4");
        assert!(load_error(&v4).contains("format version Some(4) is not supported"));
        // Version 3 is the tree layout: a network file claiming it has no trees.
        let v3 = good.replace("\"format_version\": 2", "\"format_version\": 3");
        assert!(load_error(&v3).contains("has no `gbdt` trees"));
        assert!(load_error("{\"format\":\"other\"}").contains("not a rankd model file"));
        // NaN cannot be written in JSON; a weight too large for f32 becomes inf.
        let mut value: serde_json::Value = serde_json::from_str(&good).unwrap();
        value["networks"][0]["params"][0] = serde_json::json!(1e300);
        let err = load_error(&value.to_string());
        assert!(err.contains("network 0: parameter 0 is inf"), "{err}");
        value["networks"][0]["params"][0] = serde_json::Value::Null;
        assert!(load_error(&value.to_string()).contains("does not match"));
        // Wrong shapes: one parameter short; a feature dropped from the list.
        let mut short: serde_json::Value = serde_json::from_str(&good).unwrap();
        short["networks"][0]["params"].as_array_mut().unwrap().pop();
        assert!(load_error(&short.to_string()).contains("parameters for layers [2, 3, 1]"));
        let mut fewer: serde_json::Value = serde_json::from_str(&good).unwrap();
        fewer["feature_names"].as_array_mut().unwrap().pop();
        assert!(load_error(&fewer.to_string()).contains("normalisation has 2 shifts"));
        let mut dup: serde_json::Value = serde_json::from_str(&good).unwrap();
        dup["feature_names"][1] = serde_json::json!("bm25");
        assert!(load_error(&dup.to_string()).contains("listed twice"));
        // A version 2 file with no network, or with members of different shapes.
        let mut none: serde_json::Value = serde_json::from_str(&good).unwrap();
        none["networks"] = serde_json::json!([]);
        assert!(load_error(&none.to_string()).contains("has no network"));
        let mut mixed: serde_json::Value = serde_json::to_value(tiny_ensemble()).unwrap();
        mixed["networks"][1] = serde_json::to_value(&tiny_model(&[4]).networks[0]).unwrap();
        let err = load_error(&mixed.to_string());
        assert!(err.contains("network 1 has layers [2, 4, 1]"), "{err}");
        // A version 1 layout with a version 2 field name, and the reverse.
        let mut v1_list: serde_json::Value = serde_json::from_str(&good).unwrap();
        v1_list["format_version"] = serde_json::json!(1);
        assert!(load_error(&v1_list.to_string()).contains("has no `network`"));
        let mut v2_single = v1_json(&tiny_model(&[3]));
        v2_single["format_version"] = serde_json::json!(2);
        let err = load_error(&v2_single.to_string());
        assert!(err.contains("`networks` is missing or empty"), "{err}");
        assert!(Reranker::load(Path::new("/nonexistent/m.json"))
            .unwrap_err()
            .to_string()
            .contains("cannot read"));
    }

    /// A model as a version 1 file had it: one `network`, none of the version 2 training
    /// fields (written by hand from the version 1 layout, not by this code's serialiser).
    fn v1_json(model: &Reranker) -> serde_json::Value {
        let mut value = serde_json::to_value(model).unwrap();
        let object = value.as_object_mut().unwrap();
        let network = object.remove("networks").unwrap()[0].clone();
        object.insert("network".into(), network);
        object.insert("format_version".into(), serde_json::json!(1));
        let training = object["training"].as_object_mut().unwrap();
        for field in [
            "ensemble",
            "average_epochs",
            "lr_halve_after",
            "member_best_epochs",
        ] {
            training.remove(field).unwrap();
        }
        value
    }

    #[test]
    fn version_1_files_load_as_one_network() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.json");
        for hidden in [&[][..], &[3][..]] {
            let m = tiny_model(hidden);
            std::fs::write(&path, v1_json(&m).to_string()).unwrap();
            let back = Reranker::load(&path).unwrap();
            assert_eq!(back.networks, m.networks);
            assert_eq!(back.id(), m.id(), "the stored id is kept");
            assert_eq!(back.training.ensemble, 1);
            assert_eq!(back.training.average_epochs, 1);
            assert_eq!(back.training.lr_halve_after, 0);
            assert!(back.training.member_best_epochs.is_empty());
            let rows = [2.0f32, 20.0, 1.0, 10.0];
            assert_eq!(back.score(&rows, 2).unwrap(), m.score(&rows, 2).unwrap());
            // Saved again, it is a version 2 file.
            back.save(&path).unwrap();
            assert_eq!(Reranker::load(&path).unwrap().format_version, 2);
        }
    }

    /// An ensemble scores the mean of its members' scores (oracle: each member alone, over
    /// the same normalised rows), survives a save/load, and explains nothing per feature.
    #[test]
    fn ensemble_scores_are_the_members_mean() {
        let m = tiny_ensemble();
        let rows = [2.0f32, 20.0, 1.0, 10.0, 3.0, 35.0];
        let got = m.score(&rows, 3).unwrap();
        let normalized = m.normalization.as_ref().unwrap().apply(&rows);
        let a = m.networks[0].score(&normalized, 3).unwrap();
        let b = m.networks[1].score(&normalized, 3).unwrap();
        assert_ne!(a, b);
        for r in 0..3 {
            let want = (f64::from(a[r]) + f64::from(b[r])) / 2.0;
            assert!((f64::from(got[r]) - want).abs() < 1e-6, "{got:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.json");
        m.save(&path).unwrap();
        let back = Reranker::load(&path).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.score(&rows, 3).unwrap(), got);
        assert!(m.contributions(&[3.0, 30.0]).is_none());
        assert!(m.linear_bias().is_none() && !m.is_linear() && m.hidden() == [3]);
        assert_ne!(m.id(), tiny_model(&[3]).id());
    }

    /// A tree model over (bm25, pagerank): x0 ≤ 0.5 ? (x1 ≤ −1 ? 1 : 2) : 3, plus 0.25.
    pub(crate) fn tiny_gbdt() -> Reranker {
        use crate::rerank::gbdt::{Forest, GbdtModel, Tree};
        let tree = Tree {
            cover: Vec::new(),
            ..crate::rerank::testutil::small_tree()
        };
        let forest = Forest {
            num_features: 2,
            base_score: 0.0,
            trees: vec![tree, Tree::leaf(0.25)],
        };
        let mut training = tiny_model(&[]).training;
        training.objective = Objective::LambdaNdcg(Default::default());
        training.optimizer = None;
        Reranker::new_gbdt(
            vec!["bm25".into(), "pagerank".into()],
            GbdtModel::new(forest, Some(Default::default()), None),
            training,
            None,
        )
        .unwrap()
    }

    #[test]
    fn gbdt_round_trip_scores_and_layout() {
        let m = tiny_gbdt();
        assert_eq!((m.kind(), m.format_version), ("gbdt", 3));
        assert!(m.hidden().is_empty() && !m.is_linear() && m.linear_bias().is_none());
        assert!(m.contributions(&[0.0, 0.0]).is_none());
        // NaN is a missing value for trees: x0 NaN goes right (3), x1 NaN left (1).
        let rows = [0.5, -1.0, 0.7, 0.0, f32::NAN, 0.0, 0.0, f32::NAN];
        assert_eq!(m.score(&rows, 4).unwrap(), [1.25, 3.25, 3.25, 1.25]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.json");
        m.save(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        for absent in ["\"networks\"", "\"normalization\"", "\"optimizer\""] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        let back = Reranker::load(&path).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.score(&rows, 4).unwrap(), m.score(&rows, 4).unwrap());
        assert_eq!(
            serde_json::to_value(back.training.objective.kind()).unwrap(),
            "lambda-ndcg"
        );
        // Network files keep the version 2 layout, without a `gbdt` key.
        let net = serde_json::to_string(&tiny_model(&[3])).unwrap();
        assert!(net.contains("\"format_version\":2") && !net.contains("gbdt"));
        assert!(net.contains("\"optimizer\"") && net.contains("\"normalization\""));
        // A tree model for another feature set says which features it lacks.
        let theirs: Vec<String> = ["bm25", "clicks"].map(String::from).to_vec();
        let err = map_features(&theirs, &[1.0, 2.0], m.feature_names()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "model needs feature pagerank which the input does not have"
        );
    }

    #[test]
    fn corrupt_gbdt_files_are_clear_errors() {
        let good: serde_json::Value = serde_json::to_value(tiny_gbdt()).unwrap();
        let with = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut v = good.clone();
            edit(&mut v);
            load_error(&v.to_string())
        };
        let e = with(&|v| v["gbdt"]["forest"]["trees"][0]["feature"][1] = 2.into());
        assert!(
            e.contains("gbdt: tree 0: node 1 splits on feature index 2, but the model has 2"),
            "{e}"
        );
        let e = with(&|v| v["gbdt"]["forest"]["trees"][0]["left"][1] = 0.into());
        assert!(e.contains("tree 0: node 1 has the root as a child"), "{e}");
        let e = with(&|v| v["gbdt"]["forest"]["trees"][0]["right"][0] = 1.into());
        assert!(
            e.contains("node 1 is a child of both node 0 and node 0"),
            "{e}"
        );
        let e = with(&|v| v["gbdt"]["forest"]["num_features"] = 3.into());
        assert!(
            e.contains("the forest reads 3 features but the model lists 2"),
            "{e}"
        );
        let e = with(&|v| v["format_version"] = 4.into());
        assert!(e.contains("format version Some(4) is not supported"), "{e}");
        let e = with(&|v| v["format_version"] = 2.into());
        assert!(e.contains("trees in a format version 2 file"), "{e}");
        let e = with(&|v| {
            v.as_object_mut().unwrap().remove("gbdt");
        });
        assert!(e.contains("has no `gbdt` trees"), "{e}");
        let e = with(&|v| v["networks"] = serde_json::to_value(&tiny_model(&[]).networks).unwrap());
        assert!(e.contains("both trees and networks"), "{e}");
        let e = with(&|v| {
            v["gbdt"]["forest"]["trees"][0]["value"]
                .as_array_mut()
                .unwrap()
                .pop()
                .map(|_| ())
                .unwrap()
        });
        assert!(e.contains("`value` 4"), "{e}");
        // A leaf value too large for f64 is not a number JSON can give rankd.
        let text = good.to_string().replacen("3.0", "1e999", 1);
        assert!(load_error(&text).contains("not valid JSON"), "{text}");
        let text = good.to_string();
        assert!(load_error(&text[..text.len() / 2]).contains("truncated JSON"));
    }

    #[test]
    fn features_map_by_name() {
        let from: Vec<String> = ["pagerank", "extra", "bm25"].map(String::from).to_vec();
        let to: Vec<String> = ["bm25", "pagerank"].map(String::from).to_vec();
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(map_features(&from, &x, &to).unwrap(), [3.0, 1.0, 6.0, 4.0]);
        let need: Vec<String> = ["bm25", "trustrank", "salsa"].map(String::from).to_vec();
        let err = map_features(&from, &x, &need).unwrap_err().to_string();
        assert_eq!(
            err,
            "model needs features trustrank, salsa which the input does not have"
        );
        // A reordered feature list must not be scored as if it were in the model's order.
        let m = tiny_model(&[]);
        let swapped: Vec<String> = ["pagerank", "bm25"].map(String::from).to_vec();
        let rows = map_features(&swapped, &[30.0, 3.0], m.feature_names()).unwrap();
        assert_eq!(rows, [3.0, 30.0]);
    }
}
