//! The tree part of a reranker model file (format version 3, SPEC §3.2 and §3.6): the
//! forest over the model's `feature_names`, how it was made (rankd's training parameters,
//! or the library it was imported from), and the compiled scorer, built once when the model
//! is created or loaded and never written.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use super::import::Library;
use super::params::GbdtParams;
use super::{CompiledForest, Forest};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GbdtModel {
    /// rankd's training parameters (absent for an imported model).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::params::deserialize_stored"
    )]
    pub params: Option<GbdtParams>,
    /// The library that trained an imported model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported_from: Option<Library>,
    pub forest: Forest,
    #[serde(skip)]
    compiled: OnceLock<Arc<CompiledForest>>,
}

impl PartialEq for GbdtModel {
    fn eq(&self, other: &Self) -> bool {
        self.params == other.params
            && self.imported_from == other.imported_from
            && self.forest == other.forest
    }
}

impl GbdtModel {
    pub fn new(forest: Forest, params: Option<GbdtParams>, imported_from: Option<Library>) -> Self {
        GbdtModel {
            params,
            imported_from,
            forest,
            compiled: OnceLock::new(),
        }
    }

    /// Validates the forest against `num_features` inputs and compiles it (once).
    pub fn prepare(&self, num_features: usize) -> Result<(), String> {
        if self.forest.num_features != num_features {
            return Err(format!(
                "the forest reads {} features but the model lists {num_features}",
                self.forest.num_features
            ));
        }
        if self.compiled.get().is_none() {
            let compiled = CompiledForest::new(&self.forest)?;
            let _ = self.compiled.set(Arc::new(compiled));
        }
        Ok(())
    }

    /// The compiled scorer ([`Self::prepare`] must have succeeded; every constructor of a
    /// reranker calls it).
    pub fn compiled(&self) -> &CompiledForest {
        self.compiled
            .get()
            .expect("a GBDT model is prepared when its reranker is built")
    }
}
