//! A collection's rerankers on its roots: uploaded, activated and rolled back through any
//! root, and served by every root of the collection.
//!
//! The registry is the node registry's code ([`crate::db::models::Registry`]) over the
//! collection's rows of the cluster tables (`migrations/*/0007_cluster_models.sql`), in the
//! metastore when the root has one, so that every root of the collection reads the same
//! registry, else in the root's own database (a lone root). A row holds the model file's
//! bytes: roots share no disk. The database decides what is active: an activation is one
//! transaction, and at most one model of a collection is active (a unique index).
//!
//! Each root follows the registry ([`CollectionModels::spawn_follow`]): every
//! [`FOLLOW_EVERY`] it reads which model is active and, when that is not the one it serves,
//! loads the file from the registry and swaps it in (searches in flight finish with the model
//! they started with). The root that took an activation swaps at once; the others within
//! about a second. Polling one indexed row a second is what Quickwit's searchers do with their
//! metastore; gossip could carry the id sooner, but the file still comes from the database.
//!
//! A file the root cannot load (from a newer rankd, say, during an upgrade) is not served: the
//! root keeps the model it serves, logs and counts the failure, shows it in `GET
//! /admin/models` (`load_error`), and tries again when the active model changes.
//!
//! `rankd serve --role root --model FILE` registers FILE in the collection and activates it
//! only when the collection has no active model: a root restarted with an old flag must not
//! undo an activation made since. The model it would have replaced is named in a warning.
//!
//! The activation guard of a single node (`crate::training::guard`) compares a candidate
//! with the active model on stored judged queries; a root stores no judgments, so it
//! activates as a single node with no judged query does, and says so in the answer
//! (`guard: null`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use super::root::Root;
use crate::db::models::{Activation, Deletion, ModelRecord, Registry};
use crate::db::Db;
use crate::rerank::Reranker;
use crate::search::model::ActiveModel;
use crate::sync::Recover;

/// How often a root reads which model is active.
pub const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// Where the registry lives.
enum Source {
    /// The metastore at this URL, connected on first use (a root starts while it is down).
    Metastore(String),
    /// The root's own database.
    Local,
}

/// The registry of one collection, as a root reads and writes it.
pub struct CollectionModels {
    collection: String,
    source: Source,
    db: tokio::sync::OnceCell<Db>,
    /// Why the active model is not served, if it is not.
    load_error: Mutex<Option<String>>,
}

/// What the roots' registry lists.
pub struct Listing {
    pub models: Vec<ModelRecord>,
    pub active: Option<String>,
    pub load_error: Option<String>,
}

/// A model the registry could not give.
#[derive(Debug)]
pub enum ModelError {
    /// No model of the collection has this id.
    NotFound(String),
    /// The request conflicts with the registry (already active, active, nothing to roll
    /// back to, the same content registered).
    Conflict(String),
    /// The registry's database cannot be reached.
    Unavailable(anyhow::Error),
    /// The registry failed otherwise: not the caller's fault.
    Internal(anyhow::Error),
}

impl From<sqlx::Error> for ModelError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
                ModelError::Unavailable(e.into())
            }
            e => ModelError::Internal(e.into()),
        }
    }
}

impl From<anyhow::Error> for ModelError {
    fn from(e: anyhow::Error) -> Self {
        ModelError::Internal(e)
    }
}

impl From<ModelError> for anyhow::Error {
    fn from(e: ModelError) -> Self {
        match e {
            ModelError::NotFound(m) | ModelError::Conflict(m) => anyhow::anyhow!(m),
            ModelError::Unavailable(e) | ModelError::Internal(e) => e,
        }
    }
}

impl CollectionModels {
    /// The registry of `collection` in the metastore at `url`.
    pub fn in_metastore(collection: &str, url: &str) -> CollectionModels {
        CollectionModels::new(collection, Source::Metastore(url.to_string()), None)
    }

    /// The registry of `collection` in the root's own database.
    pub fn local(collection: &str, db: Db) -> CollectionModels {
        CollectionModels::new(collection, Source::Local, Some(db))
    }

    fn new(collection: &str, source: Source, db: Option<Db>) -> CollectionModels {
        CollectionModels {
            collection: collection.to_string(),
            source,
            db: match db {
                Some(db) => tokio::sync::OnceCell::new_with(Some(db)),
                None => tokio::sync::OnceCell::new(),
            },
            load_error: Mutex::new(None),
        }
    }

    /// The database, connected now if it was not.
    async fn db(&self) -> anyhow::Result<&Db> {
        self.db
            .get_or_try_init(|| async {
                match &self.source {
                    Source::Metastore(url) => {
                        let store =
                            super::metastore::Metastore::connect(url, Duration::from_secs(5))
                                .await?;
                        Ok(store.into_db())
                    }
                    Source::Local => anyhow::bail!("the root's database is not open"),
                }
            })
            .await
            .context("the model registry is unavailable")
    }

    async fn registry(&self) -> Result<Registry<'_>, ModelError> {
        let db = self.db().await.map_err(ModelError::Unavailable)?;
        Ok(db.collection_registry(&self.collection))
    }

    /// Every model not deleted, newest first, the active one, and why it is not served.
    pub async fn list(&self) -> Result<Listing, ModelError> {
        let models = self.registry().await?.models().await?;
        let active = models
            .iter()
            .find(|m| m.status == "active")
            .map(|m| m.id.clone());
        Ok(Listing {
            models,
            active,
            load_error: self.load_error.locked().clone(),
        })
    }

    /// Registers a checked model (`crate::admin::models::read_upload`) inactive, with its
    /// file; `from` says where it came from (`upload`, the `--model` path).
    pub async fn register(&self, model: &Reranker, from: &str) -> Result<ModelRecord, ModelError> {
        let registry = self.registry().await?;
        let id = model.id();
        if registry.model(id).await?.is_some() {
            return Err(ModelError::Conflict(format!(
                "model {id} (the same content) is already registered"
            )));
        }
        let record = ModelRecord::of(model, std::path::Path::new(from), Vec::new());
        registry
            .register(&record, Some(&model.to_file_bytes()))
            .await?;
        Ok(record)
    }

    /// Loads a registered model's file.
    async fn load(&self, registry: &Registry<'_>, id: &str) -> Result<ActiveModel, ModelError> {
        let body = registry
            .body(id)
            .await?
            .ok_or_else(|| ModelError::NotFound(format!("no model with id {id:?}")))?;
        let model = tokio::task::spawn_blocking(move || {
            Reranker::from_json(&body)
                .map_err(anyhow::Error::msg)
                .and_then(|r| ActiveModel::new(r, std::path::PathBuf::new()).map_err(Into::into))
        })
        .await
        .map_err(anyhow::Error::from)?;
        model.map_err(|e| {
            ModelError::Conflict(format!("model {id} cannot be served by this root: {e:#}"))
        })
    }

    /// Makes `id` the collection's active model, after this root has loaded it (a model it
    /// cannot serve is never marked active), and serves it here at once. The answer names the
    /// model it replaced.
    pub async fn activate(
        &self,
        root: &Root,
        id: &str,
        by: &str,
    ) -> Result<Option<String>, ModelError> {
        let registry = self.registry().await?;
        let record = registry
            .model(id)
            .await?
            .ok_or_else(|| ModelError::NotFound(format!("no model with id {id:?}")))?;
        if record.status == "active" && root.model().is_some_and(|m| m.id() == id) {
            return Err(ModelError::Conflict(format!(
                "model {id} is already active"
            )));
        }
        let model = self.load(&registry, id).await?;
        let previous = match registry.activate(id, by).await? {
            Activation::Activated { previous } => previous,
            // Active in the registry, not served here (its file had failed to load): served now.
            Activation::AlreadyActive => Some(id.to_string()),
            Activation::NotFound => {
                return Err(ModelError::NotFound(format!("no model with id {id:?}")))
            }
        };
        self.serve(root, Some(model));
        Ok(previous)
    }

    /// Activates the most recently active model other than the active one.
    pub async fn rollback(
        &self,
        root: &Root,
        by: &str,
    ) -> Result<(String, Option<String>), ModelError> {
        let target = self.registry().await?.rollback_target().await?;
        let Some(target) = target else {
            return Err(ModelError::Conflict(
                "no earlier model to roll back to".into(),
            ));
        };
        let previous = self.activate(root, &target, by).await?;
        Ok((target, previous))
    }

    /// Deletes an inactive model (the activation history keeps its id).
    pub async fn delete(&self, id: &str) -> Result<(), ModelError> {
        match self.registry().await?.delete(id).await? {
            Deletion::Deleted { .. } => Ok(()),
            Deletion::Active => Err(ModelError::Conflict(format!(
                "model {id} is active; activate another model first"
            ))),
            Deletion::NotFound => Err(ModelError::NotFound(format!("no model with id {id:?}"))),
        }
    }

    fn serve(&self, root: &Root, model: Option<ActiveModel>) {
        let id = model.as_ref().map(|m| m.id().to_string());
        root.set_model(model.map(Arc::new));
        *self.load_error.locked() = None;
        crate::metrics::set_active_model(id.as_deref());
    }

    /// One round of following: serves the registry's active model when this root serves
    /// another (or none when none is active). Returns the id served after the round.
    pub async fn sync(&self, root: &Root) -> anyhow::Result<Option<String>> {
        let registry = self.registry().await.map_err(anyhow::Error::from)?;
        let active = registry.active_id().await?;
        let served = root.model().map(|m| m.id().to_string());
        if active == served {
            *self.load_error.locked() = None;
            return Ok(served);
        }
        let Some(id) = active else {
            tracing::info!("the collection has no active model: serving first-phase results");
            self.serve(root, None);
            return Ok(None);
        };
        let failed_before = self
            .load_error
            .locked()
            .as_ref()
            .is_some_and(|e| e.contains(&id));
        if failed_before {
            return Ok(served);
        }
        match self.load(&registry, &id).await {
            Ok(model) => {
                tracing::info!("serving the collection's active model {id}");
                self.serve(root, Some(model));
                Ok(Some(id))
            }
            Err(e) => {
                let message = match e {
                    ModelError::NotFound(m) | ModelError::Conflict(m) => m,
                    ModelError::Unavailable(e) | ModelError::Internal(e) => return Err(e),
                };
                tracing::error!("{message}; still serving {served:?}");
                crate::metrics::count_metastore_error("model");
                *self.load_error.locked() = Some(message);
                Ok(served)
            }
        }
    }

    /// Registers `model` (the `--model` flag) and activates it when the collection has no
    /// active model; else warns that the collection's active model is served instead. Then
    /// serves the registry's active model.
    pub async fn start(&self, root: &Root, model: Option<(&Reranker, &str)>) -> anyhow::Result<()> {
        let registry = self.registry().await.map_err(anyhow::Error::from)?;
        if let Some((model, from)) = model {
            let id = model.id().to_string();
            match self.register(model, from).await {
                // Registered now, or by an earlier start.
                Ok(_) | Err(ModelError::Conflict(_)) => {}
                Err(e) => return Err(e.into()),
            }
            match registry.active_id().await? {
                None => {
                    registry.activate(&id, "command line").await?;
                }
                Some(active) if active != id => eprintln!(
                    "warning: the collection's active model is {active}; --model {from} ({id}) \
                     is registered, not activated (POST /admin/models/{id}/activate activates it)"
                ),
                Some(_) => {}
            }
        }
        self.sync(root).await?;
        Ok(())
    }

    /// Follows the registry every [`FOLLOW_EVERY`] until the task is dropped; failures to
    /// reach it are counted, logged when their message changes (not every second while the
    /// database is down), and the served model stays.
    pub fn spawn_follow(self: &Arc<Self>, root: Arc<Root>) -> tokio::task::JoinHandle<()> {
        let models = self.clone();
        tokio::spawn(async move {
            let mut last_error = String::new();
            loop {
                tokio::time::sleep(FOLLOW_EVERY).await;
                match models.sync(&root).await {
                    Ok(_) if !last_error.is_empty() => {
                        tracing::info!("following the collection's active model again");
                        last_error.clear();
                    }
                    Ok(_) => {}
                    Err(e) => {
                        crate::metrics::count_metastore_error("model");
                        let message = format!("{e:#}");
                        if message != last_error {
                            tracing::warn!(
                                "cannot follow the collection's active model: {message}"
                            );
                            last_error = message;
                        }
                    }
                }
            }
        })
    }
}
