//! Text features: every SPEC §1 model per field, BM25F, proximity, match counts and lengths.

use std::sync::Arc;

use tantivy::{DocAddress, Searcher};

use super::{Candidate, FeatureMatrix, FeatureSet};
use crate::text::config::TextField;
use crate::text::models::proximity::{proximity, proximity_score};
use crate::text::models::{DocMatch, ModelKind, Stats, TextModel};
use crate::text::query::AnalyzedQuery;
use crate::text::scorer::ModelQuery;
use crate::text::search::TextError;
use crate::text::TextIndex;

/// Fills the text columns of `m`.
pub(super) fn extract(
    index: &TextIndex,
    searcher: &Searcher,
    stats: &Stats,
    set: &FeatureSet,
    q: &AnalyzedQuery,
    candidates: &[Candidate],
    m: &mut FeatureMatrix,
) -> Result<(), TextError> {
    let docs: Vec<DocAddress> = candidates.iter().map(|c| c.address).collect();
    for (field_index, text_field) in TextField::FIELDS.into_iter().enumerate() {
        let field_name = text_field.name();
        let terms = q.terms(index.config.field(field_name).analyzer)?;
        if field_name == "all" {
            m_set_all(m, set.col("query.terms"), terms.terms.len() as f32);
            m_set_all(m, set.col("query.length"), terms.len_with_repeats() as f32);
        }
        if terms.is_empty() {
            continue;
        }
        let t = &terms.terms;
        let mp = &index.config.models;
        let model = |kind| index.field_model(stats, kind, text_field, t);
        let models: [Arc<dyn TextModel>; 4] = [
            model(ModelKind::TfIdf)?,
            model(ModelKind::Bm25)?,
            model(ModelKind::F2Exp)?,
            model(ModelKind::Lm)?,
        ];
        // One postings walk per field gathers tf and length for all four models (and the
        // positions proximity needs, on the whole document only).
        let with_positions = field_name == "all";
        let collector = match with_positions {
            true => model(ModelKind::Bm25Prox)?,
            false => models[1].clone(),
        };
        let collector_terms = collector.terms().to_vec();
        let remaps: Vec<Vec<usize>> = models
            .iter()
            .map(|model| remap(model.terms(), &collector_terms))
            .collect();
        let cols = set.field_columns(field_index);
        let prox_cols = [
            set.col("all.min_dist"),
            set.col("all.span"),
            set.col("all.min_cover"),
            set.col("all.proximity"),
        ];
        let mut tf = Vec::new();
        ModelQuery::new(collector).for_each_match(searcher, &docs, |row, dm| {
            for (k, model) in models.iter().enumerate() {
                tf.clear();
                tf.extend(remaps[k].iter().map(|&j| dm.tf[j]));
                let sub = DocMatch {
                    tf: &tf,
                    len: dm.len,
                    norm_ids: dm.norm_ids,
                    positions: &[],
                };
                m.set(row, cols[k], model.score(&sub));
            }
            let matched = dm.tf.iter().filter(|&&f| f > 0).count();
            m.set(row, cols[4], matched as f32);
            m.set(row, cols[5], dm.len[0] as f32);
            if with_positions {
                let p = proximity(dm.positions, dm.len[0]);
                m.set(row, prox_cols[0], p.min_dist as f32);
                m.set(row, prox_cols[1], p.span as f32);
                m.set(row, prox_cols[2], p.min_cover as f32);
                m.set(
                    row,
                    prox_cols[3],
                    proximity_score(p.min_dist, mp.proximity.alpha),
                );
            }
        })?;
    }
    Ok(())
}

/// BM25F over its fields at once (SPEC §1.4), through the model's own batched scorer, into
/// column `col`.
pub(super) fn bm25f(
    index: &TextIndex,
    searcher: &Searcher,
    stats: &Stats,
    col: usize,
    q: &AnalyzedQuery,
    candidates: &[Candidate],
    m: &mut FeatureMatrix,
) -> Result<(), TextError> {
    let Some(bound) = index.bind(stats, ModelKind::Bm25F, None, q)? else {
        return Ok(());
    };
    let docs: Vec<DocAddress> = candidates.iter().map(|c| c.address).collect();
    for (row, score) in bound.score_docs(searcher, &docs)?.into_iter().enumerate() {
        m.set(row, col, score);
    }
    Ok(())
}

/// Position in `collector` of each of `model`'s terms (a model may keep a subset, as the
/// language model drops terms absent from the collection).
fn remap(model: &[String], collector: &[String]) -> Vec<usize> {
    model
        .iter()
        .map(|t| {
            collector
                .iter()
                .position(|c| c == t)
                .expect("every model's terms come from the same analysed query")
        })
        .collect()
}

fn m_set_all(m: &mut FeatureMatrix, col: usize, value: f32) {
    for row in 0..m.rows {
        m.set(row, col, value);
    }
}
