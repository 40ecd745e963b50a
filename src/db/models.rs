//! The model registry: every trained reranker, which one is active, and the history of
//! activations for rollback. A node's registry (`models`) points at model files on its disk;
//! a cluster collection's (`cluster_models`, [`Db::collection_registry`]) holds the files'
//! bytes, since every root of the collection reads them (`crate::cluster::models`). Both are
//! the one [`Registry`], whose queries differ only in their tables and the collection.

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
    /// The registry row of a model read from (or stored as) `path`, inactive.
    pub fn of(
        model: &crate::rerank::Reranker,
        path: &std::path::Path,
        log: Vec<crate::rerank::EpochLog>,
    ) -> ModelRecord {
        let objective = serde_json::to_value(model.training.objective.kind())
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        ModelRecord {
            id: model.id().to_string(),
            file_path: path.display().to_string(),
            objective,
            model_kind: model.kind().into(),
            metrics: serde_json::json!({"metrics": model.training.metrics, "log": log}),
            created_at: now_ms(),
            parent: model.parent.clone(),
            status: "inactive".into(),
        }
    }

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

/// One model registry: a node's or a collection's ([`Db::registry`],
/// [`Db::collection_registry`]).
#[derive(Clone, Copy)]
pub struct Registry<'a> {
    db: &'a Db,
    /// `None`: the node's tables; else the collection's rows of the cluster tables.
    collection: Option<&'a str>,
}

impl Db {
    /// The node's registry.
    pub fn registry(&self) -> Registry<'_> {
        Registry {
            db: self,
            collection: None,
        }
    }

    /// A cluster collection's registry, whose rows also hold the model files' bytes.
    pub fn collection_registry<'a>(&'a self, collection: &'a str) -> Registry<'a> {
        Registry {
            db: self,
            collection: Some(collection),
        }
    }
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

impl<'a> Registry<'a> {
    fn models_table(&self) -> &'static str {
        match self.collection {
            None => "models",
            Some(_) => "cluster_models",
        }
    }

    fn activations_table(&self) -> &'static str {
        match self.collection {
            None => "model_activations",
            Some(_) => "cluster_model_activations",
        }
    }

    /// `sql` with `{m}` and `{a}` naming the tables and `{c}` standing for the condition
    /// on the collection (prefixed by `AND`; `column` names it, the parameter is `$next`).
    fn sql(&self, sql: &str, column: &str, next: usize) -> String {
        let scope = match self.collection {
            None => String::new(),
            Some(_) => format!(" AND {column} = ${next}"),
        };
        sql.replace("{m}", self.models_table())
            .replace("{a}", self.activations_table())
            .replace("{c}", &scope)
    }

    /// Binds the collection, when there is one, as the query's last parameter.
    fn scoped<'q>(&self, query: AnyQuery<'q>) -> AnyQuery<'q>
    where
        'a: 'q,
    {
        match self.collection {
            None => query,
            Some(c) => query.bind(c),
        }
    }

    /// Registers a model as inactive; registering the same id again is a no-op (a model's id
    /// is the hash of its content). A collection's registry also stores `body`, the model
    /// file's bytes.
    pub async fn register(&self, m: &ModelRecord, body: Option<&[u8]>) -> Result<(), sqlx::Error> {
        let sql = match self.collection {
            None => {
                "INSERT INTO models (id, file_path, objective, model_kind, \
                     feature_set_version, metrics, created_at, parent, status) VALUES ($1, $2, \
                     $3, $4, 1, $5, $6, $7, 'inactive') ON CONFLICT (id) DO NOTHING"
            }
            Some(_) => {
                "INSERT INTO cluster_models (id, file_path, objective, model_kind, \
                        feature_set_version, metrics, created_at, parent, status, collection, \
                        body) VALUES ($1, $2, $3, $4, 1, $5, $6, $7, 'inactive', $8, $9) \
                        ON CONFLICT (collection, id) DO NOTHING"
            }
        };
        let mut query = sqlx::query(sql)
            .bind(&m.id)
            .bind(&m.file_path)
            .bind(&m.objective)
            .bind(&m.model_kind)
            .bind(m.metrics.to_string())
            .bind(m.created_at)
            .bind(m.parent.as_deref());
        if let Some(c) = self.collection {
            query = query.bind(c).bind(body.unwrap_or_default().to_vec());
        }
        query.execute(&self.db.pool).await?;
        Ok(())
    }

    /// Every model not deleted, newest first.
    pub async fn models(&self) -> Result<Vec<ModelRecord>, sqlx::Error> {
        let sql = self.sql(
            &format!(
                "SELECT {COLUMNS} FROM {{m}} WHERE status <> 'deleted'{{c}} \
                 ORDER BY created_at DESC, id"
            ),
            "collection",
            1,
        );
        self.scoped(sqlx::query(&sql))
            .fetch_all(&self.db.pool)
            .await?
            .iter()
            .map(record)
            .collect()
    }

    pub async fn model(&self, id: &str) -> Result<Option<ModelRecord>, sqlx::Error> {
        let sql = self.sql(
            &format!("SELECT {COLUMNS} FROM {{m}} WHERE id = $1 AND status <> 'deleted'{{c}}"),
            "collection",
            2,
        );
        self.scoped(sqlx::query(&sql).bind(id))
            .fetch_optional(&self.db.pool)
            .await?
            .as_ref()
            .map(record)
            .transpose()
    }

    /// A collection's model file, as registered (`None`: no such model, or a node registry,
    /// whose files stay on disk).
    pub async fn body(&self, id: &str) -> Result<Option<Vec<u8>>, sqlx::Error> {
        let Some(collection) = self.collection else {
            return Ok(None);
        };
        sqlx::query(
            "SELECT body FROM cluster_models WHERE id = $1 AND status <> 'deleted' \
             AND collection = $2",
        )
        .bind(id)
        .bind(collection)
        .fetch_optional(&self.db.pool)
        .await?
        .map(|r| r.try_get("body"))
        .transpose()
    }

    pub async fn active_model(&self) -> Result<Option<ModelRecord>, sqlx::Error> {
        let sql = self.sql(
            &format!("SELECT {COLUMNS} FROM {{m}} WHERE status = 'active'{{c}}"),
            "collection",
            1,
        );
        self.scoped(sqlx::query(&sql))
            .fetch_optional(&self.db.pool)
            .await?
            .as_ref()
            .map(record)
            .transpose()
    }

    /// The active model's id alone (what a root reads every second to follow its
    /// collection, without the metrics and training log of [`Registry::active_model`]).
    pub async fn active_id(&self) -> Result<Option<String>, sqlx::Error> {
        let sql = self.sql(
            "SELECT id FROM {m} WHERE status = 'active'{c}",
            "collection",
            1,
        );
        self.scoped(sqlx::query(&sql))
            .fetch_optional(&self.db.pool)
            .await?
            .map(|r| r.try_get("id"))
            .transpose()
    }

    /// Makes `id` the one active model and records the activation, in one transaction.
    pub async fn activate(&self, id: &str, by: &str) -> Result<Activation, sqlx::Error> {
        let mut tx = self.db.begin_write().await?;
        let sql = self.sql(
            "SELECT status FROM {m} WHERE id = $1 AND status <> 'deleted'{c}",
            "collection",
            2,
        );
        let status: Option<String> = self
            .scoped(sqlx::query(&sql).bind(id))
            .fetch_optional(&mut *tx)
            .await?
            .map(|r| r.try_get("status"))
            .transpose()?;
        let outcome = match status.as_deref() {
            None => Activation::NotFound,
            Some("active") => Activation::AlreadyActive,
            Some(_) => {
                let sql = self.sql(
                    "SELECT id FROM {m} WHERE status = 'active'{c}",
                    "collection",
                    1,
                );
                let previous: Option<String> = self
                    .scoped(sqlx::query(&sql))
                    .fetch_optional(&mut *tx)
                    .await?
                    .map(|r| r.try_get("id"))
                    .transpose()?;
                let sql = self.sql(
                    "UPDATE {m} SET status = 'inactive' WHERE status = 'active'{c}",
                    "collection",
                    1,
                );
                self.scoped(sqlx::query(&sql)).execute(&mut *tx).await?;
                let sql = self.sql(
                    "UPDATE {m} SET status = 'active' WHERE id = $1{c}",
                    "collection",
                    2,
                );
                self.scoped(sqlx::query(&sql).bind(id))
                    .execute(&mut *tx)
                    .await?;
                let sql = match self.collection {
                    None => {
                        "INSERT INTO model_activations (model_id, activated_at, \
                             activated_by) VALUES ($1, $2, $3)"
                    }
                    Some(_) => {
                        "INSERT INTO cluster_model_activations (model_id, activated_at, \
                                activated_by, collection) VALUES ($1, $2, $3, $4)"
                    }
                };
                self.scoped(sqlx::query(sql).bind(id).bind(now_ms()).bind(by))
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
        let active = self.active_id().await?;
        let sql = self.sql(
            "SELECT a.model_id AS model_id FROM {a} a JOIN {m} m ON m.id = a.model_id \
             WHERE m.status <> 'deleted'{c} ORDER BY a.activated_at DESC, a.id DESC",
            "a.collection",
            1,
        );
        let sql = match self.collection {
            None => sql,
            Some(_) => sql.replace(
                "ON m.id = a.model_id",
                "ON m.id = a.model_id AND m.collection = a.collection",
            ),
        };
        let rows = self
            .scoped(sqlx::query(&sql))
            .fetch_all(&self.db.pool)
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
    pub async fn delete(&self, id: &str) -> Result<Deletion, sqlx::Error> {
        let Some(m) = self.model(id).await? else {
            return Ok(Deletion::NotFound);
        };
        if m.status == "active" {
            return Ok(Deletion::Active);
        }
        let sql = self.sql(
            "UPDATE {m} SET status = 'deleted' WHERE id = $1 AND status = 'inactive'{c}",
            "collection",
            2,
        );
        self.scoped(sqlx::query(&sql).bind(id))
            .execute(&self.db.pool)
            .await?;
        Ok(Deletion::Deleted {
            file_path: m.file_path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, created_at: i64) -> ModelRecord {
        ModelRecord {
            id: id.into(),
            file_path: "upload".into(),
            objective: "sap".into(),
            model_kind: "linear".into(),
            metrics: serde_json::json!({}),
            created_at,
            parent: None,
            status: "inactive".into(),
        }
    }

    /// The node's registry and two collections' share one database and see only their own
    /// models, activations, rollbacks and files.
    #[tokio::test]
    async fn registries_of_the_node_and_of_collections_are_apart() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(&crate::db::default_url(dir.path())).await.unwrap();
        let (node, a, b) = (
            db.registry(),
            db.collection_registry("a"),
            db.collection_registry("b"),
        );
        node.register(&row("m1", 1), None).await.unwrap();
        a.register(&row("m1", 1), Some(b"file of m1"))
            .await
            .unwrap();
        a.register(&row("m2", 2), Some(b"file of m2"))
            .await
            .unwrap();
        b.register(&row("m3", 3), Some(b"file of m3"))
            .await
            .unwrap();
        let ids = |v: Vec<ModelRecord>| v.into_iter().map(|m| m.id).collect::<Vec<_>>();
        assert_eq!(ids(node.models().await.unwrap()), ["m1"]);
        assert_eq!(ids(a.models().await.unwrap()), ["m2", "m1"]);
        assert_eq!(ids(b.models().await.unwrap()), ["m3"]);
        assert_eq!(a.body("m2").await.unwrap().unwrap(), b"file of m2");
        assert_eq!(b.body("m2").await.unwrap(), None);
        assert_eq!(node.body("m1").await.unwrap(), None);

        assert_eq!(
            a.activate("m1", "t").await.unwrap(),
            Activation::Activated { previous: None }
        );
        assert_eq!(
            b.activate("m3", "t").await.unwrap(),
            Activation::Activated { previous: None }
        );
        assert_eq!(
            a.activate("m2", "t").await.unwrap(),
            Activation::Activated {
                previous: Some("m1".into())
            }
        );
        assert_eq!(a.activate("m3", "t").await.unwrap(), Activation::NotFound);
        assert_eq!(a.active_model().await.unwrap().unwrap().id, "m2");
        assert_eq!(a.active_id().await.unwrap().as_deref(), Some("m2"));
        assert_eq!(node.active_id().await.unwrap(), None);
        assert_eq!(b.active_model().await.unwrap().unwrap().id, "m3");
        assert_eq!(node.active_model().await.unwrap(), None);
        assert_eq!(a.rollback_target().await.unwrap().as_deref(), Some("m1"));
        assert_eq!(b.rollback_target().await.unwrap(), None);
        assert_eq!(node.rollback_target().await.unwrap(), None);
        assert_eq!(a.delete("m2").await.unwrap(), Deletion::Active);
        assert_eq!(
            a.delete("m1").await.unwrap(),
            Deletion::Deleted {
                file_path: "upload".into()
            }
        );
        assert_eq!(a.rollback_target().await.unwrap(), None);
        assert_eq!(ids(node.models().await.unwrap()), ["m1"]);
    }
}
