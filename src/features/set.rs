//! The feature set: names, declared defaults for missing values, and a version.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::text::config::TEXT_FIELDS;

/// Version of the feature set; bumped when a feature's meaning changes (adding features does
/// not break trained models, which look their features up by name).
/// v2 added the RM3 pseudo-relevance-feedback features `rm3.*` (`prf.rs`); v3 the `name`
/// field's text features `name.*` and the name-match features (`name.rs`), and the
/// identifier-aware `code` analysis of the default index configuration, which changes the
/// text features of code-like text; v4 `name.exact_links`, the links to a page the query
/// names exactly; v5 `dense.similarity`, the query's and the document's embeddings' dot
/// product (SPEC §10).
pub const FEATURE_SET_VERSION: &str = "rankd-features-v5";

/// The dense similarity `ê_q · ê_d` (SPEC §10), from the index's document vectors; 0 (no
/// relation) where there are none, or for a document added since they were computed.
pub const DENSE_SIMILARITY: &str = "dense.similarity";

/// Per-field text models (SPEC §1.2, §1.3, §1.5, §1.6) and per-field counts.
pub(super) const FIELD_FEATURES: [&str; 6] = ["tfidf", "bm25", "f2exp", "lm", "matched", "len"];

/// RM3 pseudo-relevance feedback on the whole document, filled by `prf.rs`.
pub(super) const RM3_FEATURES: [&str; 4] = [
    "rm3.bm25",
    "rm3.bm25f",
    "rm3.expansion_bm25",
    "rm3.centroid_cosine",
];

/// Whether the query names the document's item, filled by `name.rs`.
pub(super) const NAME_FEATURES: [&str; 3] = ["name.exact", "name.prefix", "name.coverage"];

/// The links to a page the query names exactly, filled by `name.rs` from `name.exact` and
/// `link.in_degree`.
pub(super) const NAME_EXACT_LINKS: &str = "name.exact_links";

/// `ln(ε + s·N)` is how link scores enter the features (a score of 1/N maps to ≈ 0); this is
/// the value of a document outside the link graph.
pub(super) const LOG_SCORE_FLOOR: f32 = -6.907_755; // ln(1e-3)

/// Link scores read from the stored link analysis, log-scaled (see [`LOG_SCORE_FLOOR`]).
pub(super) const LINK_LOG_SCORES: [&str; 8] = [
    "link.pagerank",
    "link.inverse_pagerank",
    "link.trustrank",
    "link.anti_trustrank",
    "link.hits_hub",
    "link.hits_authority",
    "link.salsa_hub",
    "link.salsa_authority",
];

/// SPEC §1.8's vote and rating scores (`social.rs`); 0 where a document lacks the fields.
pub(super) const SOCIAL_FEATURES: [&str; 7] = [
    "social.has_votes",
    "social.net_votes",
    "social.hot",
    "social.gravity",
    "social.wilson",
    "social.has_rating",
    "social.bayes",
];

/// Names and defaults of every feature, in column order.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureSet {
    names: Vec<String>,
    defaults: Vec<f32>,
    by_name: HashMap<String, usize>,
    /// Columns of [`FIELD_FEATURES`] for each of `TEXT_FIELDS`, in that order.
    field_columns: Vec<[usize; FIELD_FEATURES.len()]>,
}

impl FeatureSet {
    /// The current feature set.
    pub fn current() -> &'static FeatureSet {
        static SET: OnceLock<FeatureSet> = OnceLock::new();
        SET.get_or_init(FeatureSet::build)
    }

    fn build() -> FeatureSet {
        let mut list: Vec<(String, f32)> = Vec::new();
        let mut add = |name: &str, default: f32| list.push((name.to_string(), default));
        for field in TEXT_FIELDS {
            for f in FIELD_FEATURES {
                add(&format!("{field}.{f}"), 0.0);
            }
        }
        add("bm25f", 0.0);
        add(DENSE_SIMILARITY, 0.0);
        // Whether the query names the document's item (`name.rs`).
        for f in NAME_FEATURES {
            add(f, 0.0);
        }
        // SPEC §1.7 on the whole document.
        for f in ["all.min_dist", "all.span", "all.min_cover", "all.proximity"] {
            add(f, 0.0);
        }
        // Pseudo-relevance feedback on the whole document (`prf.rs`).
        for f in RM3_FEATURES {
            add(f, 0.0);
        }
        add("query.terms", 0.0);
        add("query.length", 0.0);
        add("first_phase.score", 0.0);
        add("first_phase.rank", 0.0);
        add("url.length", 0.0);
        add("url.depth", 0.0);
        add("link.in_graph", 0.0);
        for f in LINK_LOG_SCORES {
            add(f, LOG_SCORE_FLOOR);
        }
        add("link.spam_mass", 0.0);
        add("link.in_degree", 0.0);
        // `name.exact` × `link.in_degree`: which of the pages a query names is the one linked
        // most (`name.rs`).
        add(NAME_EXACT_LINKS, 0.0);
        add("link.out_degree", 0.0);
        // Query-dependent link analysis on the candidate window's induced subgraph.
        for f in [
            "window.hits_authority",
            "window.hits_hub",
            "window.salsa_authority",
            "window.in_links",
        ] {
            add(f, 0.0);
        }
        // SPEC §1.8, where documents carry `published_at`.
        for f in ["fresh.has_date", "fresh.age_days", "fresh.decay"] {
            add(f, 0.0);
        }
        // SPEC §1.8's social scores, where documents carry votes or ratings (`social.rs`).
        for f in SOCIAL_FEATURES {
            add(f, 0.0);
        }
        let by_name: HashMap<String, usize> = list
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        let field_columns = TEXT_FIELDS
            .iter()
            .map(|field| FIELD_FEATURES.map(|f| by_name[&format!("{field}.{f}")]))
            .collect();
        let (names, defaults) = list.into_iter().unzip();
        FeatureSet {
            names,
            defaults,
            by_name,
            field_columns,
        }
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn defaults(&self) -> &[f32] {
        &self.defaults
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Whether column `col` is one of the RM3 features.
    pub fn is_prf(&self, col: usize) -> bool {
        RM3_FEATURES.contains(&self.names[col].as_str())
    }

    /// Whether someone reading `cols` reads the dense similarity (serving then embeds the
    /// query even when the first phase is lexical).
    pub fn reads_dense(&self, cols: &[usize]) -> bool {
        cols.iter().any(|&c| self.names[c] == DENSE_SIMILARITY)
    }

    /// Whether extraction has to compute the RM3 features for someone reading `cols`.
    pub fn prf_for(&self, cols: &[usize]) -> super::Prf {
        if cols.iter().any(|&c| self.is_prf(c)) {
            super::Prf::Compute
        } else {
            super::Prf::Skip
        }
    }

    /// The columns of feature names, in their order, or the first name the set lacks.
    pub fn columns_of<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<usize>, String> {
        names
            .iter()
            .map(|n| {
                self.get(n.as_ref().trim())
                    .ok_or_else(|| n.as_ref().to_string())
            })
            .collect()
    }

    /// The columns a reranker trains on unless told otherwise: every feature but the RM3 ones,
    /// which a model must ask for by name (`--features`), since serving them costs
    /// milliseconds per query (docs/BENCHMARKS.md "Reranking latency"); the dense similarity
    /// only with `dense`, when the index has vectors: without them the column is constant,
    /// and a model that named it would have every query embedded for nothing.
    pub fn default_training_columns(&self, dense: bool) -> Vec<usize> {
        (0..self.len())
            .filter(|&c| !self.is_prf(c) && (dense || self.names[c] != DENSE_SIMILARITY))
            .collect()
    }

    /// Column of a feature this set defines.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Columns of the per-field features of `TEXT_FIELDS[field]`, in [`FIELD_FEATURES`] order.
    pub(super) fn field_columns(&self, field: usize) -> &[usize; FIELD_FEATURES.len()] {
        &self.field_columns[field]
    }

    /// Column of a feature the extraction code itself names (a missing name is a bug).
    pub(super) fn col(&self, name: &str) -> usize {
        self.get(name)
            .unwrap_or_else(|| panic!("feature `{name}` is not in {FEATURE_SET_VERSION}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_cover_the_spec_list() {
        let set = FeatureSet::current();
        assert_eq!(set.by_name.len(), set.len(), "duplicate feature names");
        assert!(set.len() >= 25);
        for name in [
            "title.bm25",
            "body.lm",
            "all.f2exp",
            "anchor.tfidf",
            "bm25f",
            "all.min_cover",
            "first_phase.rank",
            "url.depth",
            "link.pagerank",
            "link.spam_mass",
            "window.salsa_authority",
            "link.in_degree",
            "rm3.bm25",
            "rm3.bm25f",
            "rm3.expansion_bm25",
            "rm3.centroid_cosine",
            "name.bm25",
            "name.exact",
            "name.prefix",
            "name.coverage",
            "name.exact_links",
            "dense.similarity",
        ] {
            assert!(set.get(name).is_some(), "{name} missing");
        }
    }

    /// v3 to v5 only added features: every name of v2 (77) is still here, so a model
    /// trained on v2, v3 or v4 loads and reads its features by name.
    #[test]
    fn v3_to_v5_add_the_name_and_dense_features_to_v2() {
        let set = FeatureSet::current();
        let v2 = set
            .names()
            .iter()
            .filter(|n| !n.starts_with("name.") && *n != DENSE_SIMILARITY);
        assert_eq!((v2.count(), set.len()), (77, 88), "{:?}", set.names());
    }
}
