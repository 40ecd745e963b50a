//! Pseudo-relevance feedback features: an RM3 expanded query scored on every candidate of the
//! window, and the candidates' similarity to the feedback documents' relevance model.
//!
//! RM3 (Lavrenko & Croft 2001, relevance model RM1; interpolated with the query as in
//! Abdul-Jaleel et al. 2004, "UMass at TREC 2004"). The relevance model is estimated on the
//! catch-all field `all`, with its analyzer; parameters from `[models.rm3]` and
//! `[models.lm] mu`:
//!
//! ```text
//! F        = the first-phase top fb_docs candidates (fewer if the window is smaller), minus
//!            documents with no token; tf(w,D) and |D| are exact, from re-analysing the
//!            stored text of D (the tokens `all` indexed)
//! ℓ(D)     = Σ_{t∈q, cf(t)>0} qtf(t)·ln((tf(t,D) + μ·p(t|C)) / (|D| + μ)),  p(t|C) = cf(t)/|C|
//! w_D      = exp(ℓ(D)) / Σ_{D'∈F} exp(ℓ(D'))                 (P(D|q), uniform P(D))
//! P1(w)    = Σ_{D∈F} w_D · tf(w,D)/|D|                         (RM1)
//! E        = the fb_terms terms with the largest P1 (ties: term text ascending)
//! P̂(w)     = P1(w) / Σ_{v∈E} P1(v)   for w ∈ E, else 0
//! P3(w)    = λ·qtf(w)/|q| + (1 − λ)·P̂(w)     over q ∪ E        (RM3; |q| = Σ qtf)
//! ```
//!
//! Features of a candidate d (`|d|` the quantised length of `all`, as every model here; `idf`
//! SPEC §1.3 (for BM25F, df over `all` as §1.4 says); BM25 with the `all` field's k1 and b):
//!
//! ```text
//! rm3.bm25            = Σ_{w∈q∪E} P3(w) · idf(w)·tf(w,d)·(k1+1)/(tf(w,d) + k1·(1 − b + b·|d|/avgdl))
//! rm3.bm25f           = Σ_{w∈q∪E} P3(w) · idf(w)·tf~(w,d)·(k1+1)/(tf~(w,d) + k1)   (SPEC §1.4 BM25F,
//!                       the first phase's default model, with its fields, weights, b and k1)
//! rm3.expansion_bm25  = the same with P̂(w) in place of P3(w)  (the relevance model alone, λ = 0)
//! rm3.centroid_cosine = cos(a, x) over E:  a_w = P̂(w)·idf(w),  x_w = tf(w,d)·idf(w);  0 if x = 0
//! ```
//!
//! `rm3.centroid_cosine` is the candidate's similarity to the feedback centroid (the relevance
//! model is the w_D-weighted centroid of the feedback documents' language models) in tf-idf
//! space, restricted to the expansion terms so that it needs no term vector of the candidate.
//!
//! Cost: fb_docs stored documents read and analysed, and two batched postings walks (`all`;
//! the BM25F fields) over |q ∪ E| ≤ |q| + fb_terms terms (each list opened once per segment,
//! candidates in doc order); both are capped by [`crate::text::config::Rm3Params`].

use std::collections::HashMap;
use std::sync::Arc;

use tantivy::schema::Value;
use tantivy::tokenizer::TokenStream;
use tantivy::{DocAddress, Searcher, TantivyDocument};

use super::set::RM3_FEATURES;
use super::{Candidate, FeatureMatrix, FeatureSet};
use crate::text::config::Rm3Params;
use crate::text::models::{bm25_idf, Bm25, Bm25F, Stats, TextModel};
use crate::text::query::AnalyzedQuery;
use crate::text::schema::analyzer;
use crate::text::scorer::ModelQuery;
use crate::text::search::TextError;
use crate::text::TextIndex;

/// One feedback document: its term counts in `all` and its exact length.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct FeedbackDoc {
    pub tf: HashMap<String, u32>,
    pub len: u32,
}

impl FeedbackDoc {
    /// Counts a document's tokens (those `all` indexed).
    pub fn from_tokens<I: IntoIterator<Item = String>>(tokens: I) -> FeedbackDoc {
        let mut d = FeedbackDoc::default();
        for t in tokens {
            *d.tf.entry(t).or_insert(0) += 1;
            d.len += 1;
        }
        d
    }
}

impl Rm3Query {
    /// The statistics the RM3 features read beyond the query's: the document frequencies of
    /// the expanded query's terms in `all` (a second round once the model is known).
    pub fn stats_request(&self) -> crate::text::stats::StatsRequest {
        crate::text::stats::StatsRequest::for_terms(
            "all",
            self.expanded.iter().map(|(t, _)| t.clone()),
        )
    }
}

/// The estimated relevance model and the RM3 query built from it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Rm3Query {
    /// E with P̂(w), most probable first.
    pub expansion: Vec<(String, f64)>,
    /// q ∪ E with P3(w): the query's terms in query order, then E's others in E's order.
    pub expanded: Vec<(String, f64)>,
}

/// Estimates RM1 from `feedback` and interpolates it with `query` (the formulas of the module
/// documentation). `mu_p` holds μ·p(t|C) of the query terms with cf > 0. None when no feedback
/// document has a token.
pub(crate) fn relevance_model(
    query: &[(String, u32)],
    feedback: &[FeedbackDoc],
    mu_p: &HashMap<String, f64>,
    mu: f64,
    params: Rm3Params,
) -> Option<Rm3Query> {
    let docs: Vec<&FeedbackDoc> = feedback.iter().filter(|d| d.len > 0).collect();
    if docs.is_empty() {
        return None;
    }
    let loglik: Vec<f64> = docs
        .iter()
        .map(|d| {
            query
                .iter()
                .filter_map(|(t, qtf)| {
                    let mp = mu_p.get(t)?;
                    let tf = f64::from(d.tf.get(t).copied().unwrap_or(0));
                    Some(f64::from(*qtf) * ((tf + mp) / (f64::from(d.len) + mu)).ln())
                })
                .sum()
        })
        .collect();
    let max = loglik.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let unnormalised: Vec<f64> = loglik.iter().map(|l| (l - max).exp()).collect();
    let z: f64 = unnormalised.iter().sum();
    let mut p1: HashMap<&str, f64> = HashMap::new();
    for (d, u) in docs.iter().zip(&unnormalised) {
        let w_d = u / z;
        for (t, &tf) in &d.tf {
            *p1.entry(t.as_str()).or_insert(0.0) += w_d * f64::from(tf) / f64::from(d.len);
        }
    }
    let mut ranked: Vec<(&str, f64)> = p1.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    ranked.truncate(params.fb_terms);
    let mass: f64 = ranked.iter().map(|(_, p)| p).sum();
    let expansion: Vec<(String, f64)> = ranked
        .into_iter()
        .map(|(t, p)| (t.to_string(), p / mass))
        .collect();
    let lambda = f64::from(params.lambda);
    let q_len: f64 = query.iter().map(|(_, qtf)| f64::from(*qtf)).sum();
    let p_hat = |t: &str| {
        expansion
            .iter()
            .find(|(e, _)| e == t)
            .map_or(0.0, |(_, p)| *p)
    };
    let mut expanded: Vec<(String, f64)> = query
        .iter()
        .map(|(t, qtf)| {
            (
                t.clone(),
                lambda * f64::from(*qtf) / q_len + (1.0 - lambda) * p_hat(t),
            )
        })
        .collect();
    for (t, p) in &expansion {
        if !query.iter().any(|(q, _)| q == t) {
            expanded.push((t.clone(), (1.0 - lambda) * p));
        }
    }
    Some(Rm3Query {
        expansion,
        expanded,
    })
}

/// Fills the `rm3.*` columns of `m` (they keep their defaults, 0, when the query has no term
/// in `all` or no feedback document has text).
pub fn extract(
    index: &TextIndex,
    searcher: &Searcher,
    stats: &Stats,
    set: &FeatureSet,
    q: &AnalyzedQuery,
    candidates: &[Candidate],
    m: &mut FeatureMatrix,
) -> Result<(), TextError> {
    let fb_docs = index.config.models.rm3.fb_docs.min(candidates.len());
    let feedback = feedback_docs(index, searcher, &candidates[..fb_docs])?;
    let rm = estimate(&index.config, index.fields.all, stats, q, &feedback)?;
    match rm {
        Some(rm) => score(index, searcher, stats, set, &rm, candidates, m),
        None => Ok(()),
    }
}

/// The relevance model of `q` estimated on `feedback` (the window's top `fb_docs`, in window
/// order) with the collection statistics `stats`; `None` when the query has no term in `all`
/// or no feedback document has text. `all` is the schema's `all` field.
pub(crate) fn estimate(
    config: &crate::text::IndexConfig,
    all: tantivy::schema::Field,
    stats: &Stats,
    q: &AnalyzedQuery,
    feedback: &[FeedbackDoc],
) -> Result<Option<Rm3Query>, TextError> {
    let query = q.terms(config.field("all").analyzer)?;
    if query.is_empty() || feedback.is_empty() {
        return Ok(None);
    }
    let mu = f64::from(config.models.lm.mu);
    let collection_len = stats.total_tokens(all)? as f64;
    let mut mu_p = HashMap::new();
    for (t, _) in &query.terms {
        let cf = stats.cf(all, t)?;
        if cf > 0 {
            mu_p.insert(t.clone(), mu * cf as f64 / collection_len);
        }
    }
    Ok(relevance_model(
        &query.terms,
        feedback,
        &mu_p,
        mu,
        config.models.rm3,
    ))
}

/// Fills the `rm3.*` columns of `m` for `candidates` from the relevance model `rm` (estimated
/// here, or by a cluster root from the whole window's feedback documents).
pub fn score(
    index: &TextIndex,
    searcher: &Searcher,
    stats: &Stats,
    set: &FeatureSet,
    rm: &Rm3Query,
    candidates: &[Candidate],
    m: &mut FeatureMatrix,
) -> Result<(), TextError> {
    if candidates.is_empty() {
        return Ok(());
    }
    let all = index.config.field("all");
    let field = index.fields.all;
    let (k1, b) = (all.bm25.k1, all.bm25.b);
    let rm3 = Arc::new(Bm25::weighted(stats, field, &rm.expanded, k1, b)?);
    let p_hat: Vec<(String, f64)> = rm
        .expanded
        .iter()
        .map(|(t, _)| {
            let p = rm
                .expansion
                .iter()
                .find(|(e, _)| e == t)
                .map_or(0.0, |e| e.1);
            (t.clone(), p)
        })
        .collect();
    let rm1 = Bm25::weighted(stats, field, &p_hat, k1, b)?;
    // The centroid over E, idf-weighted; its norm once.
    let n = stats.num_docs();
    let mut centroid = Vec::with_capacity(p_hat.len());
    for (t, p) in &p_hat {
        let idf = f64::from(bm25_idf(stats.df(field, t)?, n));
        centroid.push((*p > 0.0, idf, p * idf));
    }
    let centroid_norm = centroid.iter().map(|c| c.2 * c.2).sum::<f64>().sqrt();
    let cols = RM3_FEATURES.map(|name| set.col(name));

    let docs: Vec<DocAddress> = candidates.iter().map(|c| c.address).collect();
    ModelQuery::new(rm3.clone()).for_each_match(searcher, &docs, |row, dm| {
        m.set(row, cols[0], rm3.score(&dm));
        m.set(row, cols[2], rm1.score(&dm));
        let (mut dot, mut norm2) = (0.0, 0.0);
        for (t, &(in_e, idf, a)) in centroid.iter().enumerate() {
            if in_e {
                let x = f64::from(dm.tf(t, 0)) * idf;
                dot += a * x;
                norm2 += x * x;
            }
        }
        if norm2 > 0.0 && centroid_norm > 0.0 {
            m.set(row, cols[3], (dot / (norm2.sqrt() * centroid_norm)) as f32);
        }
    })?;
    let parts = index.bm25f_parts();
    if !parts.is_empty() {
        let k1 = index.config.models.bm25f.k1;
        let model = Bm25F::weighted(stats, &parts, field, &rm.expanded, k1)?;
        let scores = ModelQuery::new(Arc::new(model)).score_docs(searcher, &docs)?;
        for (row, score) in scores.into_iter().enumerate() {
            m.set(row, cols[1], score);
        }
    }
    Ok(())
}

/// Reads and analyses the feedback documents: the stored values `all` was built from (title,
/// name and kind, headings, body, anchor, url; `TextIndex::upsert`), under `all`'s analyzer.
pub(crate) fn feedback_docs(
    index: &TextIndex,
    searcher: &Searcher,
    feedback: &[Candidate],
) -> Result<Vec<FeedbackDoc>, TextError> {
    let f = &index.fields;
    let mut analyzer = analyzer(index.config.field("all").analyzer);
    let mut out = Vec::with_capacity(feedback.len());
    for c in feedback {
        let doc: TantivyDocument = searcher.doc(c.address)?;
        let mut tokens = Vec::new();
        for source in [f.title, f.name, f.headings, f.body, f.anchor, f.url] {
            for text in doc.get_all(source).filter_map(|v| v.as_str()) {
                let mut stream = analyzer.token_stream(text);
                while let Some(t) = stream.next() {
                    tokens.push(t.text.clone());
                }
            }
        }
        out.push(FeedbackDoc::from_tokens(tokens));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(words: &str) -> FeedbackDoc {
        FeedbackDoc::from_tokens(words.split_whitespace().map(str::to_string))
    }

    #[test]
    fn relevance_model_by_hand() {
        // q = "a", μ = 2, μ·p(a|C) = 1. D1 = "a b": (1 + 1)/(2 + 2) = 1/2; D2 = "c":
        // (0 + 1)/(1 + 2) = 1/3; so w = (3/5, 2/5) (the empty D3 is left out).
        // P1: a = b = 3/5·1/2 = 3/10, c = 2/5. Two terms kept: c, then a (the tie with b goes
        // to the smaller text): P̂(c) = 4/7, P̂(a) = 3/7.
        let q = vec![("a".to_string(), 1)];
        let mu_p = HashMap::from([("a".to_string(), 1.0)]);
        let params = Rm3Params {
            fb_docs: 3,
            fb_terms: 2,
            lambda: 0.25,
        };
        let rm = relevance_model(&q, &[doc("a b"), doc("c"), doc("")], &mu_p, 2.0, params).unwrap();
        let names: Vec<&str> = rm.expansion.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(names, ["c", "a"]);
        assert!((rm.expansion[0].1 - 4.0 / 7.0).abs() < 1e-12);
        // P3(a) = 0.25·1 + 0.75·3/7 = 4/7, P3(c) = 0.75·4/7 = 3/7; query terms first.
        assert_eq!(rm.expanded[0].0, "a");
        assert!((rm.expanded[0].1 - 4.0 / 7.0).abs() < 1e-12);
        assert_eq!(rm.expanded[1].0, "c");
        assert!((rm.expanded[1].1 - 3.0 / 7.0).abs() < 1e-12);
        let total: f64 = rm.expanded.iter().map(|e| e.1).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn no_text_no_model() {
        let q = vec![("a".to_string(), 1)];
        let params = Rm3Params::default();
        assert!(relevance_model(&q, &[doc("")], &HashMap::new(), 2000.0, params).is_none());
    }
}
