//! Which reranker the server runs: the database's model registry is the truth. Model files
//! written by the command line (`rankd train --activate`, `rankd demo`) are registered at
//! start-up, and the activation the command line asked for (`models/ACTIVE`) is carried
//! into the registry once; the request file is removed after the registry has it.
//!
//! An active model whose file cannot be loaded (corrupt, deleted, from an incompatible rankd)
//! does not stop the server: it serves first-phase results and says why
//! ([`Loaded::error`], shown by `GET /admin/models`), so the operator can roll back or
//! activate another model through the running server.
//!
//! Uploaded models (`POST /admin/models`, [`read_upload`]) are checked and bound to the
//! feature set before anything is written, then stored and registered inactive like a
//! trained one.

use std::path::Path;

use serde_json::json;

use crate::db::models::{Activation, ModelRecord};
use crate::db::Db;
use crate::error::Invalid;
use crate::rerank::gbdt::import::Library;
use crate::rerank::Reranker;
use crate::search::model::{self, ActiveModel};
use crate::training::guard::{Classes, Comparison};
use crate::training::JudgedQuery;

/// What start-up found for the reranker.
pub(crate) struct Loaded {
    /// The active model, when there is one and its file loads.
    pub model: Option<ActiveModel>,
    /// Why the registry's active model is not served.
    pub error: Option<String>,
}

/// Registers the model files of `data_dir/models/`, applies a pending command-line
/// activation, and loads the active model. Only database failures are errors; an active
/// model that cannot be loaded is reported in [`Loaded::error`].
pub(crate) async fn sync_and_load(db: &Db, data_dir: &Path) -> anyhow::Result<Loaded> {
    for path in model::model_files(data_dir)? {
        match Reranker::load(&path) {
            Ok(model) => {
                db.registry()
                    .register(&ModelRecord::of(&model, &path, Vec::new()), None)
                    .await?
            }
            Err(e) => tracing::warn!("skipping {}: {e}", path.display()),
        }
    }
    // The request goes only once the registry has it: a start-up that dies in between
    // applies it at the next start.
    if let Some(id) = model::activation_request_id(data_dir)? {
        if let Activation::NotFound = db.registry().activate(&id, "command line").await? {
            tracing::warn!(
                "the command line asked to activate model {id}, which is not registered"
            );
        }
        model::clear_activation_request(data_dir)?;
    }
    let Some(m) = db.registry().active_model().await? else {
        return Ok(Loaded {
            model: None,
            error: None,
        });
    };
    Ok(match ActiveModel::load(Path::new(&m.file_path)) {
        Ok(model) => Loaded {
            model: Some(model),
            error: None,
        },
        Err(e) => Loaded {
            model: None,
            error: Some(format!(
                "the active model {} cannot be loaded from {}: {e}; serving first-phase \
                 results until POST /admin/models/rollback or /admin/models/{{id}}/activate",
                m.id, m.file_path
            )),
        },
    })
}

/// Registers the activation guard's comparison and the queries it held out with a model.
pub(crate) fn attach_guard(record: &mut ModelRecord, comparison: &Comparison, held_out: &Classes) {
    if let Some(m) = record.metrics.as_object_mut() {
        m.insert("guard".into(), json!(comparison));
        let ids: Vec<&str> = held_out
            .values()
            .flatten()
            .map(|q| q.qid.as_str())
            .collect();
        m.insert("held_out".into(), json!(ids));
    }
}

/// Whether the model held out click queries for the activation guard (a model trained on
/// clicks), so that activating it needs the click log.
pub(crate) fn held_out_clicks(record: &ModelRecord) -> bool {
    record
        .metrics
        .get("held_out")
        .and_then(|v| v.as_array())
        .is_some_and(|ids| {
            ids.iter()
                .filter_map(|v| v.as_str())
                .any(|id| id.starts_with(crate::training::clicks::CLICK_QID_PREFIX))
        })
}

/// The queries to judge a registered model on before activating it: the queries its training
/// held out when it recorded them (a model trained by `POST /admin/train`: judged queries, and
/// click queries labelled by their clicks), else every stored judged query (an uploaded or
/// command-line model was not trained on them).
pub(crate) fn guard_queries(
    record: &ModelRecord,
    stored: Vec<JudgedQuery>,
    logged: Vec<crate::training::clicks::ClickQuery>,
) -> Classes {
    let held: Option<std::collections::HashSet<&str>> = record
        .metrics
        .get("held_out")
        .and_then(|v| v.as_array())
        .map(|ids| ids.iter().filter_map(|v| v.as_str()).collect());
    let Some(held) = held else {
        return crate::training::guard::one_class(stored);
    };
    let mut classes = crate::training::guard::one_class(
        stored
            .into_iter()
            .filter(|q| held.contains(q.qid.as_str()))
            .collect(),
    );
    let clicked: Vec<JudgedQuery> = logged
        .iter()
        .filter(|q| held.contains(q.qid.as_str()))
        .map(crate::training::clicks::ClickQuery::judged)
        .collect();
    if !clicked.is_empty() {
        classes.insert(crate::training::clicks::CLICKS.into(), clicked);
    }
    classes
}

/// The formats `POST /admin/models` takes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum UploadFormat {
    /// A rankd model file (`rankd train`'s output).
    Rankd,
    /// XGBoost JSON from `save_model`.
    Xgboost,
    /// LightGBM text, version 4.
    Lightgbm,
    /// RankLib LambdaMART XML.
    Ranklib,
}

impl UploadFormat {
    /// A rankd model file (JSON whose `format` is rankd's), else the library whose format
    /// the bytes have ([`Library::detect`]).
    pub fn detect(bytes: &[u8]) -> Option<UploadFormat> {
        let is_rankd = serde_json::from_slice::<serde_json::Value>(bytes)
            .ok()
            .and_then(|v| v.get("format").and_then(|f| f.as_str()).map(str::to_string))
            .is_some_and(|f| f == crate::rerank::FORMAT_NAME);
        if is_rankd {
            return Some(UploadFormat::Rankd);
        }
        Library::detect(bytes).map(|l| match l {
            Library::Xgboost => UploadFormat::Xgboost,
            Library::Lightgbm => UploadFormat::Lightgbm,
            Library::Ranklib => UploadFormat::Ranklib,
        })
    }
}

/// An uploaded model, checked and bound to the current feature set (SPEC §3.1), ready to
/// store; nothing is written. A rankd model file is validated as at load (format version,
/// feature indices, cycles, finite leaves and weights) and must name only features of the
/// set; another library's model is read with its exact split rules and bound by its feature
/// names (a name the set lacks is refused, naming it) or, for unnamed columns, by position:
/// column i (RankLib id i + 1) is the set's feature i, the order `rankd features --out`
/// writes. The error says what is wrong.
pub fn read_upload(bytes: &[u8], format: Option<UploadFormat>) -> Result<Reranker, Invalid> {
    read_upload_within(bytes, format, MAX_STORED_MODEL_BYTES)
}

/// The largest model file an upload may store. The file is pretty-printed JSON, several
/// times the size of a library's own text (a LightGBM node: ≈ 40 bytes uploaded, ≈ 130
/// stored), and every activation reads it whole.
pub const MAX_STORED_MODEL_BYTES: usize = 128 << 20;

/// [`read_upload`] with the stored file bounded by `max_stored` bytes.
fn read_upload_within(
    bytes: &[u8],
    format: Option<UploadFormat>,
    max_stored: usize,
) -> Result<Reranker, Invalid> {
    let format = format
        .or_else(|| UploadFormat::detect(bytes))
        .ok_or_else(|| {
            Invalid(
                "not a rankd model file, XGBoost JSON, LightGBM text or RankLib XML model; give \
             `format`"
                    .into(),
            )
        })?;
    let set = crate::features::FeatureSet::current();
    let model = match format {
        UploadFormat::Rankd => Reranker::from_json(bytes).map_err(Invalid)?,
        library => {
            let library = match library {
                UploadFormat::Xgboost => Library::Xgboost,
                UploadFormat::Lightgbm => Library::Lightgbm,
                _ => Library::Ranklib,
            };
            let imported = library.parse(bytes).map_err(Invalid)?;
            Reranker::from_imported(&imported, set.names(), "uploaded".into())
                .map_err(|e| Invalid(e.to_string()))?
        }
    };
    // The same check serving makes: every feature the model reads is in the set.
    ActiveModel::new(model.clone(), std::path::PathBuf::new()).map_err(|e| {
        Invalid(format!(
            "{e} (feature set {})",
            crate::features::FEATURE_SET_VERSION
        ))
    })?;
    let stored = model.file_len();
    if stored > max_stored {
        return Err(Invalid(format!(
            "the model would be stored as {stored} bytes; at most {max_stored} are kept"
        )));
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30, N7: the stored file is bounded (400 000 one-leaf trees uploaded as 16 MB
    /// were stored as 130 MB); the bound is checked on the file's own size.
    #[test]
    fn the_stored_file_is_bounded() {
        let path = format!(
            "{}/tests/fixtures/gbdt/lgb_none_unnamed.txt",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(path).unwrap();
        let model = read_upload(&bytes, Some(UploadFormat::Lightgbm)).unwrap();
        let size = model.file_len();
        let dir = tempfile::tempdir().unwrap();
        model.save(&dir.path().join("m.json")).unwrap();
        assert_eq!(
            std::fs::metadata(dir.path().join("m.json")).unwrap().len() as usize,
            size
        );
        // Each read stamps its own `created_at`, whose fraction of a second is written with
        // as many digits as it needs: sizes of two reads differ by a few bytes.
        let slack = 64;
        assert!(read_upload_within(&bytes, Some(UploadFormat::Lightgbm), size + slack).is_ok());
        let Invalid(e) =
            read_upload_within(&bytes, Some(UploadFormat::Lightgbm), size - slack).unwrap_err();
        assert!(
            e.contains(&format!("bytes; at most {}", size - slack)),
            "{e}"
        );
    }

    /// Activating a model reads the click log only when the model held out click queries:
    /// a soak with a judgments-trained model read every logged impression on each activation.
    #[test]
    fn only_a_model_holding_out_click_queries_needs_the_click_log() {
        let record = |metrics: serde_json::Value| ModelRecord {
            id: "m".into(),
            file_path: "m.json".into(),
            objective: "sap".into(),
            model_kind: "linear".into(),
            metrics,
            created_at: 0,
            parent: None,
            status: "inactive".into(),
        };
        assert!(!held_out_clicks(&record(json!({}))));
        assert!(!held_out_clicks(&record(json!({"held_out": ["q1", "q7"]}))));
        assert!(held_out_clicks(&record(
            json!({"held_out": ["q1", "clicks:vec push"]})
        )));
    }
}
