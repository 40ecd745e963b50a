//! A tantivy `Query`/`Weight`/`Scorer` for any [`TextModel`]: a document-at-a-time union over
//! the postings of every (query term, model field) pair. Only documents containing a query
//! term are visited; the model turns what the postings say about each into a score.

use std::sync::Arc;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::{EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::{DocAddress, DocId, DocSet, Score, Searcher, SegmentReader, Term, TERMINATED};

use super::models::{DocMatch, TextModel};

/// A query that ranks by `model`.
#[derive(Clone, Debug)]
pub struct ModelQuery {
    model: Arc<dyn TextModel>,
    /// `terms[t * n_fields + u]`: query term `t` in model field `u`.
    terms: Vec<Term>,
}

impl ModelQuery {
    pub fn new(model: Arc<dyn TextModel>) -> Self {
        let mut terms = Vec::new();
        for text in model.terms() {
            for &field in model.fields() {
                terms.push(Term::from_field_text(field, text));
            }
        }
        ModelQuery { model, terms }
    }

    pub fn model(&self) -> &Arc<dyn TextModel> {
        &self.model
    }

    /// Scores the given documents (any order) with the model, matching or not: the model as a
    /// per-(query, doc) feature. Postings are opened once per segment and walked forward.
    pub fn score_docs(
        &self,
        searcher: &Searcher,
        docs: &[DocAddress],
    ) -> tantivy::Result<Vec<Score>> {
        let mut out = vec![0.0; docs.len()];
        self.for_each_match(searcher, docs, |i, m| out[i] = self.model.score(&m))?;
        Ok(out)
    }

    /// Walks `docs` in increasing address order, postings opened once per segment and moved
    /// only forward, and calls `f(i, m)` with each document's index in `docs` and its raw
    /// per-document inputs: batched feature extraction over a candidate window.
    pub fn for_each_match(
        &self,
        searcher: &Searcher,
        docs: &[DocAddress],
        mut f: impl FnMut(usize, DocMatch<'_>),
    ) -> tantivy::Result<()> {
        let mut order: Vec<usize> = (0..docs.len()).collect();
        order.sort_by_key(|&i| docs[i]);
        let mut current: Option<(u32, ModelScorer)> = None;
        for i in order {
            let DocAddress {
                segment_ord,
                doc_id,
            } = docs[i];
            if current.as_ref().map(|(s, _)| *s) != Some(segment_ord) {
                let reader = searcher.segment_reader(segment_ord);
                current = Some((segment_ord, self.segment_scorer(reader)?));
            }
            let (_, scorer) = current.as_mut().expect("set above");
            f(i, scorer.doc_match(doc_id));
        }
        Ok(())
    }

    /// Opens a scorer for one segment.
    fn segment_scorer(&self, reader: &SegmentReader) -> tantivy::Result<ModelScorer> {
        let n_fields = self.model.fields().len();
        let option = self.model.record_option();
        let mut slots = Vec::new();
        for (i, term) in self.terms.iter().enumerate() {
            let inverted = reader.inverted_index(term.field())?;
            if let Some(postings) = inverted.read_postings(term, option)? {
                slots.push(Slot {
                    term: i / n_fields,
                    field: i % n_fields,
                    postings,
                });
            }
        }
        let mut fieldnorms = Vec::with_capacity(n_fields);
        for &field in self.model.fields() {
            fieldnorms.push(reader.get_fieldnorms_reader(field)?);
        }
        let n_terms = self.model.terms().len();
        let mut scorer = ModelScorer {
            model: self.model.clone(),
            slots,
            fieldnorms,
            doc: TERMINATED,
            tf: vec![0; n_terms * n_fields],
            len: vec![0; n_fields],
            norm_ids: vec![0; n_fields],
            positions: vec![
                Vec::new();
                if self.model.needs_positions() {
                    n_terms
                } else {
                    0
                }
            ],
            boost: 1.0,
        };
        scorer.doc = scorer.min_doc();
        Ok(scorer)
    }
}

impl Query for ModelQuery {
    fn weight(&self, _scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(ModelWeight {
            query: self.clone(),
        }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        for term in &self.terms {
            visitor(term, self.model.needs_positions());
        }
    }
}

struct ModelWeight {
    query: ModelQuery,
}

impl Weight for ModelWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let mut scorer = self.query.segment_scorer(reader)?;
        scorer.boost = boost;
        Ok(Box::new(scorer))
    }

    /// The top-k path: MaxScore (Turtle and Flood 1995) when the model bounds each term's
    /// contribution, else every matching document — gathered a window at a time unless the
    /// model reads positions, which the window's table does not hold.
    fn for_each_pruning(
        &self,
        threshold: Score,
        reader: &SegmentReader,
        callback: &mut dyn FnMut(DocId, Score) -> Score,
    ) -> tantivy::Result<()> {
        let mut scorer = self.query.segment_scorer(reader)?;
        let model = &self.query.model;
        if !model.needs_positions() {
            // Without bounds every term is essential: the window walks every list.
            let bounds = model
                .term_upper_bounds()
                .unwrap_or_else(|| vec![Score::MAX; model.terms().len()]);
            scorer.max_score(&bounds, threshold, callback)
        } else {
            let mut threshold = threshold;
            let mut doc = scorer.doc();
            while doc != TERMINATED {
                let score = scorer.score();
                if score > threshold {
                    threshold = callback(doc, score);
                }
                doc = scorer.advance();
            }
        }
        Ok(())
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let mut scorer = self.query.segment_scorer(reader)?;
        if scorer.seek(doc) != doc {
            return Err(tantivy::TantivyError::InvalidArgument(format!(
                "document {doc} does not match the query"
            )));
        }
        Ok(scorer.explain())
    }
}

/// Cells (documents × terms × fields) of one window's frequency table in [`ModelScorer::max_score`]:
/// 16 KB of `u32`, so the table stays in the first-level cache.
const WINDOW_CELLS: usize = 4096;
/// The fewest and the most documents in one window.
const MIN_WINDOW: usize = 64;
const MAX_WINDOW: usize = 1024;

struct Slot {
    term: usize,
    field: usize,
    postings: SegmentPostings,
}

/// The union scorer. Queries have few terms, so the next document is found by a linear scan
/// over the postings heads rather than a heap.
pub(crate) struct ModelScorer {
    model: Arc<dyn TextModel>,
    slots: Vec<Slot>,
    fieldnorms: Vec<FieldNormReader>,
    doc: DocId,
    tf: Vec<u32>,
    len: Vec<u32>,
    norm_ids: Vec<u8>,
    positions: Vec<Vec<u32>>,
    /// Multiplier tantivy may ask for (a boosted clause); 1 otherwise.
    boost: Score,
}

impl ModelScorer {
    fn min_doc(&self) -> DocId {
        self.slots
            .iter()
            .map(|s| s.postings.doc())
            .min()
            .unwrap_or(TERMINATED)
    }

    /// Gathers tf, lengths and (if needed) positions of the current document.
    fn load(&mut self) {
        self.load_for(self.doc);
    }

    /// Gathers what the postings say of `doc` (zero frequencies when no postings list is on
    /// it) and its field lengths.
    fn load_for(&mut self, doc: DocId) {
        let n_fields = self.len.len();
        self.tf.fill(0);
        for p in &mut self.positions {
            p.clear();
        }
        for slot in &mut self.slots {
            if slot.postings.doc() == doc {
                self.tf[slot.term * n_fields + slot.field] = slot.postings.term_freq();
                if slot.field == 0 && !self.positions.is_empty() {
                    slot.postings.positions(&mut self.positions[slot.term]);
                }
            }
        }
        self.load_lengths(doc);
    }

    /// The model fields' lengths of `doc` (and their one-byte codes).
    fn load_lengths(&mut self, doc: DocId) {
        for (u, norms) in self.fieldnorms.iter().enumerate() {
            let id = norms.fieldnorm_id(doc);
            self.norm_ids[u] = id;
            self.len[u] = FieldNormReader::id_to_fieldnorm(id);
        }
    }

    fn current(&self) -> DocMatch<'_> {
        DocMatch {
            tf: &self.tf,
            len: &self.len,
            norm_ids: &self.norm_ids,
            positions: &self.positions,
        }
    }

    pub fn explain(&mut self) -> Explanation {
        self.load();
        self.model.explain(&self.current())
    }

    /// MaxScore over the query terms: with the terms ordered by their bound, the longest prefix
    /// whose bounds sum to at most `threshold` is *non-essential* (a document holding only
    /// those terms cannot beat the current k-th score), so candidates come from the postings
    /// of the other, essential terms alone; each candidate's postings of the non-essential
    /// terms are moved to it and it is scored exactly as [`Scorer::score`] would. The top k is
    /// therefore the exhaustive one (a document left out scores at most `threshold`, and
    /// documents tied with the k-th lose to it on document order anyway).
    ///
    /// Candidates are gathered a window of documents at a time (models without positions):
    /// each essential postings list is walked through the window, writing its frequencies
    /// into a per-window table, then the non-essential lists are moved to the window's
    /// candidates only, and the candidates are scored in document order from the table. A
    /// document-at-a-time union looked for the smallest head among all (term, field) lists
    /// and loaded every list for every candidate: with a window of 100 on a query of seven
    /// common terms (35 lists under BM25F) that bookkeeping, not decoding, was most of the
    /// first phase (docs/BENCHMARKS.md "Gradient-boosted trees: reranking latency"). The
    /// model sees the same inputs, so the scores are the same bits. The essential set is
    /// re-split between windows, which is safe: the threshold only rises.
    fn max_score(
        &mut self,
        bounds: &[f32],
        mut threshold: Score,
        callback: &mut dyn FnMut(DocId, Score) -> Score,
    ) {
        let mut order: Vec<usize> = (0..bounds.len()).collect();
        order.sort_by(|&a, &b| bounds[a].total_cmp(&bounds[b]).then(a.cmp(&b)));
        // essential[t]: whether term t's postings drive the candidates.
        let mut essential = vec![true; bounds.len()];
        let boost = self.boost;
        let split = |threshold: Score, essential: &mut [bool]| {
            let mut sum = 0.0f32;
            essential.fill(true);
            for &t in &order {
                sum += bounds[t] * boost;
                if sum > threshold {
                    break;
                }
                essential[t] = false;
            }
        };
        split(threshold, &mut essential);
        let width = self.tf.len();
        let window = (WINDOW_CELLS / width.max(1)).clamp(MIN_WINDOW, MAX_WINDOW);
        // table[i * width + t * n_fields + u]: tf of term t in field u of document base + i.
        let mut table = vec![0u32; window * width];
        let mut seen = vec![false; window];
        let mut candidates: Vec<u32> = Vec::with_capacity(window);
        let n_fields = self.len.len();
        loop {
            let base = self
                .slots
                .iter()
                .filter(|s| essential[s.term])
                .map(|s| s.postings.doc())
                .min()
                .unwrap_or(TERMINATED);
            if base == TERMINATED {
                break;
            }
            // Never past TERMINATED, which every exhausted list reports as its document.
            let end = base.saturating_add(window as u32).min(TERMINATED);
            for slot in self.slots.iter_mut().filter(|s| essential[s.term]) {
                let cell = slot.term * n_fields + slot.field;
                let mut doc = slot.postings.doc();
                while doc < end {
                    let i = (doc - base) as usize;
                    if !seen[i] {
                        seen[i] = true;
                        candidates.push(i as u32);
                    }
                    table[i * width + cell] = slot.postings.term_freq();
                    doc = slot.postings.advance();
                }
            }
            candidates.sort_unstable();
            for slot in self.slots.iter_mut().filter(|s| !essential[s.term]) {
                let cell = slot.term * n_fields + slot.field;
                for &i in &candidates {
                    let doc = base + i;
                    if slot.postings.doc() < doc {
                        slot.postings.seek(doc);
                    }
                    if slot.postings.doc() == doc {
                        table[i as usize * width + cell] = slot.postings.term_freq();
                    }
                }
            }
            for &i in &candidates {
                let i = i as usize;
                let doc = base + i as u32;
                let row = &mut table[i * width..(i + 1) * width];
                self.load_lengths(doc);
                let score = boost
                    * self.model.score(&DocMatch {
                        tf: row,
                        len: &self.len,
                        norm_ids: &self.norm_ids,
                        positions: &self.positions,
                    });
                row.fill(0);
                seen[i] = false;
                if score > threshold {
                    let raised = callback(doc, score);
                    if raised > threshold {
                        threshold = raised;
                    }
                }
            }
            candidates.clear();
            split(threshold, &mut essential);
        }
        self.doc = TERMINATED;
    }

    /// The raw per-document inputs (tf matrix, lengths, positions) of `target`, matching or
    /// not, for feature extraction. Targets must come in increasing doc order (postings only
    /// move forward).
    pub fn doc_match(&mut self, target: DocId) -> DocMatch<'_> {
        self.seek(target);
        self.load_for(target);
        self.current()
    }
}

impl DocSet for ModelScorer {
    fn advance(&mut self) -> DocId {
        let doc = self.doc;
        for slot in &mut self.slots {
            if slot.postings.doc() == doc {
                slot.postings.advance();
            }
        }
        self.doc = self.min_doc();
        self.doc
    }

    fn seek(&mut self, target: DocId) -> DocId {
        if self.doc >= target {
            return self.doc;
        }
        for slot in &mut self.slots {
            if slot.postings.doc() < target {
                slot.postings.seek(target);
            }
        }
        self.doc = self.min_doc();
        self.doc
    }

    fn doc(&self) -> DocId {
        self.doc
    }

    fn size_hint(&self) -> u32 {
        self.slots
            .iter()
            .map(|s| s.postings.size_hint())
            .max()
            .unwrap_or(0)
    }
}

impl Scorer for ModelScorer {
    fn score(&mut self) -> Score {
        self.load();
        self.boost * self.model.score(&self.current())
    }
}
