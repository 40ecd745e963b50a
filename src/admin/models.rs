//! Which reranker the server runs: the database's model registry is the truth. Model files
//! written by the command line (`rankd train --activate`, `rankd demo`) are registered at
//! start-up, and the activation the command line asked for (`models/ACTIVE`) is carried
//! into the registry once, then the request file is removed.
//!
//! An active model whose file cannot be loaded (corrupt, deleted, from an incompatible rankd)
//! does not stop the server: it serves first-phase results and says why
//! ([`Loaded::error`], shown by `GET /admin/models`), so the operator can roll back or
//! activate another model through the running server.

use std::path::Path;

use serde_json::json;

use crate::db::models::ModelRecord;
use crate::db::Db;
use crate::rerank::Reranker;
use crate::search::model::{self, ActiveModel};

/// What start-up found for the reranker.
pub struct Loaded {
    /// The active model, when there is one and its file loads.
    pub model: Option<ActiveModel>,
    /// Why the registry's active model is not served.
    pub error: Option<String>,
}

/// Registers the model files of `data_dir/models/`, applies a pending command-line
/// activation, and loads the active model. Only database failures are errors; an active
/// model that cannot be loaded is reported in [`Loaded::error`].
pub async fn sync_and_load(db: &Db, data_dir: &Path) -> anyhow::Result<Loaded> {
    for path in model::model_files(data_dir)? {
        match Reranker::load(&path) {
            Ok(model) => {
                db.register_model(&record(&model, &path, Vec::new()))
                    .await?
            }
            Err(e) => tracing::warn!("skipping {}: {e}", path.display()),
        }
    }
    if let Some(id) = model::take_activation_request(data_dir)? {
        db.activate_model(&id, "command line").await?;
    }
    let Some(m) = db.active_model().await? else {
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

/// The registry row of a model file.
pub fn record(model: &Reranker, path: &Path, log: Vec<crate::rerank::EpochLog>) -> ModelRecord {
    ModelRecord {
        id: model.id().to_string(),
        file_path: path.display().to_string(),
        objective: objective_name(model),
        model_kind: model.kind().into(),
        metrics: json!({"metrics": model.training.metrics, "log": log}),
        created_at: crate::db::now_ms(),
        parent: model.parent.clone(),
        status: "inactive".into(),
    }
}

fn objective_name(model: &Reranker) -> String {
    serde_json::to_value(model.training.objective.kind())
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}
