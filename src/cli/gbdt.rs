//! `rankd eval-letor`'s tree-only options: scoring the test file with a model another
//! library trained (`--import`), and writing a trained tree model as XGBoost JSON
//! (`--export-xgboost`). Training trees is `--model gbdt` of the common learning options
//! (`learn.rs`, `crate::training::TrainSettings`), like every other model.

use std::path::{Path, PathBuf};

use crate::error::Invalid;
use crate::rerank::gbdt::import::Library;
use crate::rerank::{evaluate_scores, MetricConvention, RankMetrics, RankSet, Reranker};

#[derive(clap::Args, Debug, Clone)]
pub struct TreeFileArgs {
    /// Score the test file with this model, trained by XGBoost (JSON), LightGBM (text v4)
    /// or RankLib (LambdaMART XML), instead of training; bound to the LETOR features
    /// f1..fN by name, or by position.
    #[arg(long, conflicts_with = "train")]
    pub import: Option<PathBuf>,
    /// The format of `--import` (default: detected from the file).
    #[arg(long, value_enum, requires = "import")]
    pub import_format: Option<Library>,
    /// With `--model gbdt`: also write the trees as an XGBoost JSON model.
    #[arg(long)]
    pub export_xgboost: Option<PathBuf>,
}

/// Reads a model file of another library, in `format` or the detected one.
pub(crate) fn import_model(
    path: &Path,
    format: Option<Library>,
) -> anyhow::Result<crate::rerank::gbdt::import::Imported> {
    let bytes =
        std::fs::read(path).map_err(|e| Invalid(format!("cannot read {}: {e}", path.display())))?;
    let library = match format.or_else(|| Library::detect(&bytes)) {
        Some(l) => l,
        None => {
            return Err(Invalid(format!(
                "{}: not an XGBoost JSON, LightGBM text or RankLib XML model; give \
                 --import-format",
                path.display()
            ))
            .into())
        }
    };
    Ok(library
        .parse(&bytes)
        .map_err(|e| Invalid(format!("{}: {e}", path.display())))?)
}

/// What `eval-letor --import FILE --json` reports of the imported model.
#[derive(serde::Serialize)]
pub(crate) struct ImportedReport {
    /// Always `gbdt`.
    pub model: &'static str,
    pub imported: PathBuf,
    pub library: &'static str,
    pub objective: Option<String>,
    pub trees: usize,
    pub features_read: Vec<String>,
    pub id: String,
}

/// `eval-letor --import FILE`: the imported model bound to the test file's features
/// `f1..fN` (N the wider of the file and the model), and what the report says of it.
pub(crate) fn eval_imported(
    args: &TreeFileArgs,
    test: &crate::corpus::letor::LetorSet,
) -> anyhow::Result<(Reranker, RankSet, ImportedReport)> {
    let path = args.import.as_ref().expect("--import given");
    let imported = import_model(path, args.import_format)?;
    let width = test.num_features.max(imported.forest.num_features);
    let test = RankSet::from_letor_width(test, width)?;
    let model = Reranker::from_imported(&imported, &test.feature_names, path.display().to_string())
        .map_err(|e| Invalid(format!("{}: {e}", path.display())))?;
    let report = ImportedReport {
        model: "gbdt",
        imported: path.clone(),
        library: imported.library.name(),
        objective: imported.objective.clone(),
        trees: imported.forest.trees.len(),
        features_read: model.feature_names().to_vec(),
        id: model.id().to_string(),
    };
    Ok((model, test, report))
}

/// The model's scores of a LETOR set whose features are `f1..fN` (mapped by name) and
/// their metrics.
pub(crate) fn score_set(
    model: &Reranker,
    set: &RankSet,
) -> anyhow::Result<(Vec<f32>, RankMetrics)> {
    let rows = crate::rerank::map_features(&set.feature_names, &set.x, model.feature_names())?;
    let scores = model.score(&rows, set.num_rows())?;
    let metrics = evaluate_scores(set, &scores, MetricConvention::Letor)?;
    Ok((scores, metrics))
}

/// `--export-xgboost`: the tree model as XGBoost JSON.
pub(crate) fn export_xgboost(model: &Reranker, path: &Path) -> anyhow::Result<()> {
    let Some(gbdt) = &model.gbdt else {
        return Err(Invalid(format!(
            "--export-xgboost writes tree models; this one is {}",
            model.kind()
        ))
        .into());
    };
    let json = crate::rerank::gbdt::export::to_xgboost_json(
        &gbdt.forest,
        model.feature_names(),
        &model.training.objective,
    )
    .map_err(Invalid)?;
    crate::text::index::write_atomic(path, &serde_json::to_vec(&json)?)
        .map_err(|e| Invalid(format!("cannot write {}: {e:#}", path.display())))?;
    Ok(())
}
