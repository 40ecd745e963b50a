//! The default reranker of a documentation collection (what `rankd demo` trains): judgments
//! derived from the docs in every query class users bring (`crate::judgments::QueryClass`:
//! known items, item names as typed, the guides' task phrases), a fifth of each class held
//! out, a model trained on the rest, and its comparison with the first phase class by class
//! (`crate::training::guard`), which decides whether it may serve.
//!
//! The classes are mixed because a model trained on one kind of query learns that kind's
//! habits: trained on known items alone (name words plus summary words), the demo's model
//! promoted pages whose summary repeats the query, which hurt queries that are only a name.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::known_items::{self, KnownItem};
use super::QueryClass;
use crate::rerank::{MetricConvention, Reranker};
use crate::search::model::{ActiveModel, DEFAULT_WINDOW};
use crate::search::Engine;
use crate::training::guard::{self, Classes, Comparison};
use crate::training::{
    judged_windows, train_on_windows, JudgedQuery, TrainSettings, Window, DEFAULT_FIRST_PHASE,
};

/// Queries derived per class at most (every one there is below that), and the seed of
/// their samples.
pub const QUERIES_PER_CLASS: usize = known_items::DEFAULT_QUERIES;
pub const SEED: u64 = known_items::DEFAULT_SEED;

/// Judgments derived from a docs directory, split for training and the guard.
#[derive(Debug, Clone)]
pub struct DocsJudgments {
    pub train: Vec<JudgedQuery>,
    /// By class name.
    pub held_out: Classes,
    /// Queries derived per class, before the split.
    pub derived: BTreeMap<String, usize>,
    /// Queries left out for judging an excluded page.
    pub excluded: usize,
}

/// Derives every class's queries from `docs_dir`, leaves out those that judge a page of
/// `excluded` relevant (pages a model will be evaluated on elsewhere), and holds out a fifth
/// of each class.
pub fn derive(docs_dir: &Path, excluded: &HashSet<String>) -> anyhow::Result<DocsJudgments> {
    let mut classes = Classes::new();
    let mut derived = BTreeMap::new();
    let mut left_out = 0;
    let documented = known_items::items(docs_dir)?;
    for class in QueryClass::ALL {
        let mut items: Vec<KnownItem> =
            class.derive(docs_dir, &documented, QUERIES_PER_CLASS, SEED)?;
        let before = items.len();
        items.retain(|item| !item.relevant.iter().any(|id| excluded.contains(id)));
        left_out += before - items.len();
        derived.insert(class.name().to_string(), items.len());
        if !items.is_empty() {
            classes.insert(class.name().to_string(), known_items::judged(&items));
        }
    }
    let (train, held_out) = guard::hold_out(classes);
    Ok(DocsJudgments {
        train,
        held_out,
        derived,
        excluded: left_out,
    })
}

impl DocsJudgments {
    /// Writes `train.queries`/`train.qrels` (every class), `test.*` (every class's held-out
    /// queries) and `test-CLASS.*` under `dir`, for `rankd eval` to reproduce the numbers.
    pub fn write_trec(&self, dir: &Path) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir)?;
        let write = |name: &str, queries: &[&JudgedQuery]| -> anyhow::Result<()> {
            let (q, r) = known_items::to_trec(queries);
            crate::text::index::write_atomic(&dir.join(format!("{name}.queries")), q.as_bytes())?;
            crate::text::index::write_atomic(&dir.join(format!("{name}.qrels")), r.as_bytes())?;
            Ok(())
        };
        write("train", &self.train.iter().collect::<Vec<_>>())?;
        write(
            "test",
            &self.held_out.values().flatten().collect::<Vec<_>>(),
        )?;
        for (class, queries) in &self.held_out {
            write(
                &format!("test-{class}"),
                &queries.iter().collect::<Vec<_>>(),
            )?;
        }
        Ok(())
    }
}

/// One class's held-out MRR over the whole window, of the first phase and the model.
#[derive(Debug, Clone, Serialize)]
pub struct ClassMrr {
    pub class: String,
    pub queries: usize,
    pub first_phase: f64,
    pub reranked: f64,
}

/// What training on the docs made.
#[derive(Debug, Clone)]
pub struct DocsModel {
    pub model: Reranker,
    /// Where it is stored (inactive until the caller activates it).
    pub path: PathBuf,
    pub classes: Vec<ClassMrr>,
    /// The guard's verdict.
    pub comparison: Comparison,
}

impl DocsModel {
    /// Asks the server of the data directory `data_dir` to serve the model at its next start
    /// if the guard let it ([`Comparison::refused`] is `None`); returns the guard's reason
    /// otherwise, and asks for nothing.
    pub fn activate_if_allowed(&self, data_dir: &Path) -> anyhow::Result<Option<&str>> {
        match &self.comparison.refused {
            None => {
                crate::search::model::request_activation(data_dir, &self.model)?;
                Ok(None)
            }
            Some(reason) => Ok(Some(reason)),
        }
    }
}

/// Progress of [`train`]: once per query whose window is computed, once per epoch.
pub trait Progress: Sync {
    fn windows(&self, _total: usize) {}
    fn query(&self) {}
    fn epochs(&self, _total: usize) {}
    fn epoch(&self) {}
}

/// No progress reports.
pub struct Quiet;
impl Progress for Quiet {}

/// Trains `settings`' model on `judgments.train`, stores it in the index's model directory and
/// compares it on the held-out classes.
pub fn train(
    engine: &Engine,
    judgments: &DocsJudgments,
    settings: &TrainSettings,
    source: &str,
    progress: &dyn Progress,
) -> anyhow::Result<DocsModel> {
    settings.validate()?;
    let windows_of = |queries: &[JudgedQuery]| -> anyhow::Result<Vec<Window>> {
        // The default training columns leave RM3 out: no need to compute it.
        let (w, _) = judged_windows(
            engine,
            queries,
            DEFAULT_FIRST_PHASE,
            DEFAULT_WINDOW,
            crate::features::Prf::Skip,
            &|| progress.query(),
        )?;
        Ok(w)
    };
    progress
        .windows(judgments.train.len() + judgments.held_out.values().map(Vec::len).sum::<usize>());
    let train_windows = windows_of(&judgments.train)?;
    let mut held_out = BTreeMap::new();
    for (class, queries) in &judgments.held_out {
        held_out.insert(class.clone(), windows_of(queries)?);
    }
    let config = settings.config(
        format!("{} queries derived from {source}", judgments.train.len()),
        MetricConvention::Trec,
    );
    progress.epochs(config.epochs());
    let outcome = train_on_windows(
        &train_windows,
        &config,
        settings.valid_fraction,
        &mut |_| progress.epoch(),
        &std::sync::atomic::AtomicBool::new(false),
    )?;
    let model = crate::training::record_embedder(
        outcome.model,
        crate::training::embedder_of(engine).as_deref(),
    );
    let path = crate::search::model::store(&engine.index.dir, &model)?;
    let candidate = ActiveModel::new(model.clone(), path.clone())?;
    let mut classes = Vec::new();
    for (class, windows) in &held_out {
        classes.push(ClassMrr {
            class: class.clone(),
            queries: windows.len(),
            first_phase: guard::window_mrr(windows, None)?,
            reranked: guard::window_mrr(windows, Some(&candidate))?,
        });
    }
    let comparison = guard::compare(&held_out, &candidate, None)?;
    Ok(DocsModel {
        model,
        path,
        classes,
        comparison,
    })
}
