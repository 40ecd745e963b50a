//! The model registry: every trained reranker (its file stays on disk; the row points at it),
//! which one is active, and the history of activations for rollback.

use serde_json::Value;
use sqlx::Row;

use super::{now_ms, rfc3339, Db};

/// One registered model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRecord {
    pub id: String,
    pub file_path: String,
    pub objective: String,
    pub model_kind: String,
    /// Training and validation metrics and the per-epoch log, as stored in the model file.
    pub metrics: Value,
    pub created_at: i64,
    pub parent: Option<String>,
    pub status: String,
}

/// A model as `GET /admin/models` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, utoipa::ToSchema)]
pub struct ModelView {
    pub id: String,
    /// active, inactive, ...
    pub status: String,
    pub objective: String,
    /// linear, mlp, ensemble, gbdt, ...
    pub model: String,
    /// the model file
    pub file: String,
    /// RFC 3339
    pub created_at: String,
    /// the model it was trained from, if any
    pub parent: Option<String>,
    /// training and validation metrics as stored in the model file
    #[schema(value_type = Object)]
    pub metrics: Value,
    /// the per-epoch training log
    #[schema(value_type = Vec<Object>)]
    pub log: Value,
    /// the activation guard's comparison on the queries its training held out (models
    /// trained by `POST /admin/train`)
    #[schema(value_type = Option<Object>)]
    pub guard: Option<Value>,
}

impl ModelRecord {
    pub fn view(&self) -> ModelView {
        ModelView {
            id: self.id.clone(),
            status: self.status.clone(),
            objective: self.objective.clone(),
            model: self.model_kind.clone(),
            file: self.file_path.clone(),
            created_at: rfc3339(self.created_at),
            parent: self.parent.clone(),
            metrics: self.metrics.get("metrics").cloned().unwrap_or(Value::Null),
            log: self
                .metrics
                .get("log")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
            guard: self.metrics.get("guard").cloned(),
        }
    }
}

/// What an activation did.
#[derive(Debug, Clone, PartialEq)]
pub enum Activation {
    Activated { previous: Option<String> },
    AlreadyActive,
    NotFound,
}

/// What a deletion did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deletion {
    Deleted { file_path: String },
    Active,
    NotFound,
}

fn record(row: &sqlx::any::AnyRow) -> Result<ModelRecord, sqlx::Error> {
    let metrics: String = row.try_get("metrics")?;
    Ok(ModelRecord {
        id: row.try_get("id")?,
        file_path: row.try_get("file_path")?,
        objective: row.try_get("objective")?,
        model_kind: row.try_get("model_kind")?,
        metrics: serde_json::from_str(&metrics).unwrap_or(Value::Null),
        created_at: row.try_get("created_at")?,
        parent: row.try_get("parent")?,
        status: row.try_get("status")?,
    })
}

const COLUMNS: &str = "id, file_path, objective, model_kind, metrics, created_at, parent, status";

impl Db {
    /// Registers a model as inactive; registering the same id again is a no-op (a model's id
    /// is the hash of its content).
    pub async fn register_model(&self, m: &ModelRecord) -> Result<(), sqlx::Error> {
        sqlx::query(
            "INSERT INTO models (id, file_path, objective, model_kind, feature_set_version, \
             metrics, created_at, parent, status) VALUES ($1, $2, $3, $4, 1, $5, $6, $7, 'inactive') \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&m.id)
        .bind(&m.file_path)
        .bind(&m.objective)
        .bind(&m.model_kind)
        .bind(m.metrics.to_string())
        .bind(m.created_at)
        .bind(m.parent.as_deref())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Every model not deleted, newest first.
    pub async fn models(&self) -> Result<Vec<ModelRecord>, sqlx::Error> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM models WHERE status <> 'deleted' ORDER BY created_at DESC, id"
        ))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(record)
        .collect()
    }

    pub async fn model(&self, id: &str) -> Result<Option<ModelRecord>, sqlx::Error> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM models WHERE id = $1 AND status <> 'deleted'"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(record)
        .transpose()
    }

    pub async fn active_model(&self) -> Result<Option<ModelRecord>, sqlx::Error> {
        sqlx::query(&format!(
            "SELECT {COLUMNS} FROM models WHERE status = 'active'"
        ))
        .fetch_optional(&self.pool)
        .await?
        .as_ref()
        .map(record)
        .transpose()
    }

    /// Makes `id` the one active model and records the activation, in one transaction.
    pub async fn activate_model(&self, id: &str, by: &str) -> Result<Activation, sqlx::Error> {
        let mut tx = self.begin_write().await?;
        let status: Option<String> =
            sqlx::query("SELECT status FROM models WHERE id = $1 AND status <> 'deleted'")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?
                .map(|r| r.try_get("status"))
                .transpose()?;
        let outcome = match status.as_deref() {
            None => Activation::NotFound,
            Some("active") => Activation::AlreadyActive,
            Some(_) => {
                let previous: Option<String> =
                    sqlx::query("SELECT id FROM models WHERE status = 'active'")
                        .fetch_optional(&mut *tx)
                        .await?
                        .map(|r| r.try_get("id"))
                        .transpose()?;
                sqlx::query("UPDATE models SET status = 'inactive' WHERE status = 'active'")
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("UPDATE models SET status = 'active' WHERE id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(
                    "INSERT INTO model_activations (model_id, activated_at, activated_by) \
                     VALUES ($1, $2, $3)",
                )
                .bind(id)
                .bind(now_ms())
                .bind(by)
                .execute(&mut *tx)
                .await?;
                Activation::Activated { previous }
            }
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// The model to roll back to: the most recently activated model other than the active
    /// one that still exists.
    pub async fn rollback_target(&self) -> Result<Option<String>, sqlx::Error> {
        let active = self.active_model().await?.map(|m| m.id);
        let rows = sqlx::query(
            "SELECT a.model_id AS model_id FROM model_activations a JOIN models m \
             ON m.id = a.model_id WHERE m.status <> 'deleted' \
             ORDER BY a.activated_at DESC, a.id DESC",
        )
        .fetch_all(&self.pool)
        .await?;
        for row in rows {
            let id: String = row.try_get("model_id")?;
            if Some(&id) != active.as_ref() {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }

    /// Marks an inactive model deleted (the row stays for the activation history).
    pub async fn delete_model(&self, id: &str) -> Result<Deletion, sqlx::Error> {
        let Some(m) = self.model(id).await? else {
            return Ok(Deletion::NotFound);
        };
        if m.status == "active" {
            return Ok(Deletion::Active);
        }
        sqlx::query("UPDATE models SET status = 'deleted' WHERE id = $1 AND status = 'inactive'")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(Deletion::Deleted {
            file_path: m.file_path,
        })
    }
}
