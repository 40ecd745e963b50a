//! Name features: whether the query, read as a name, is the candidate's item name (SPEC §3.1).
//!
//! Users look items up by name, typed any way: `HashMap`, `hash map`, `hashmap`,
//! `collections::HashMap`. The text models score those queries by their words; these features
//! say whether the query *is* the document's `name` (`crate::corpus::Document::name`), which
//! a ranker needs to put the item's own page above the pages that mention it most.
//!
//! A name is a path of segments separated by `::`, `.` or `/` (`std::collections::HashMap`);
//! its *key* and the query's are their letters and digits, lowercased
//! ([`crate::text::identifiers::name_key`]), so spacing, case and underscores do not matter.
//!
//! - `name.exact`: 1 when the query's key is the key of the name's last segment or of a
//!   trailing path of it (`HashMap`, `collections::HashMap`, `std::collections::HashMap`).
//! - `name.prefix`: 1 when such a key starts with the query's key (`hashm`, `std::coll`);
//!   every exact match is a prefix match.
//! - `name.coverage`: the share of the last segment's words (`Hash`, `Map`) that are words of
//!   the query ([`crate::text::identifiers::name_words`]).
//!
//! - `name.exact_links`: `name.exact` × `link.in_degree` (the log of the links to the page).
//!   A query often names several pages exactly (`String`: the struct and the `string`
//!   module; `Ord`: the trait and its derive macro; a product name and its accessories), and
//!   users mean the one everything else links to. The degree alone cannot say it to a linear
//!   model: over all queries the known item asked for is as often an obscure page as a popular
//!   one, so its weight there says little; conditioned on an exact name it is learned from the
//!   queries that are names.
//!
//! All are 0 for a document without a name. They read the query's text, the candidate's name
//! and its whole-graph in-degree only, so a shard computes them as the single index does.

use tantivy::Searcher;

use super::set::{NAME_EXACT_LINKS, NAME_FEATURES};
use super::{Candidate, FeatureMatrix, FeatureSet};
use crate::text::identifiers::{name_key, name_words};
use crate::text::search::TextError;

/// How a query matches one name.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NameMatch {
    pub exact: bool,
    pub prefix: bool,
    pub coverage: f32,
}

/// The part of the features that depends on the query alone, computed once per window.
#[derive(Debug, Clone)]
pub struct NameQuery {
    key: String,
    words: Vec<String>,
}

impl NameQuery {
    pub fn new(query: &str) -> Self {
        NameQuery {
            key: name_key(query),
            words: name_words(query),
        }
    }

    /// How the query matches `name`.
    pub fn matches(&self, name: &str) -> NameMatch {
        let segments: Vec<&str> = name
            .split("::")
            .flat_map(|s| s.split(['.', '/']))
            .filter(|s| !name_key(s).is_empty())
            .collect();
        let Some(last) = segments.last() else {
            return NameMatch::default();
        };
        let mut out = NameMatch::default();
        if !self.key.is_empty() {
            let mut tail = String::new();
            for segment in segments.iter().rev() {
                tail.insert_str(0, &name_key(segment));
                out.exact |= tail == self.key;
                out.prefix |= tail.starts_with(&self.key);
            }
        }
        let words = name_words(last);
        if !words.is_empty() {
            let covered = words.iter().filter(|w| self.words.contains(w)).count();
            out.coverage = covered as f32 / words.len() as f32;
        }
        out
    }
}

/// Fills the name columns of `m` from the candidates' `name_column` fast column.
pub(super) fn extract(
    searcher: &Searcher,
    set: &FeatureSet,
    query: &str,
    candidates: &[Candidate],
    m: &mut FeatureMatrix,
) -> Result<(), TextError> {
    let q = NameQuery::new(query);
    let cols = NAME_FEATURES.map(|f| set.col(f));
    let mut opened: Option<(u32, Option<tantivy::columnar::StrColumn>)> = None;
    let mut name = String::new();
    for (row, c) in candidates.iter().enumerate() {
        let segment = c.address.segment_ord;
        if opened.as_ref().map(|o| o.0) != Some(segment) {
            let reader = searcher.segment_reader(segment);
            opened = Some((segment, reader.fast_fields().str("name_column")?));
        }
        let Some((_, Some(column))) = &opened else {
            continue;
        };
        name.clear();
        if let Some(ord) = column.term_ords(c.address.doc_id).next() {
            column
                .ord_to_str(ord, &mut name)
                .map_err(tantivy::TantivyError::from)?;
        }
        let hit = q.matches(&name);
        let values = [
            f32::from(u8::from(hit.exact)),
            f32::from(u8::from(hit.prefix)),
            hit.coverage,
        ];
        for (&col, v) in cols.iter().zip(values) {
            m.set(row, col, v);
        }
    }
    Ok(())
}

/// Fills `name.exact_links` of `m` from its `name.exact` and `link.in_degree` columns (once
/// both are filled).
pub(super) fn exact_links(set: &FeatureSet, m: &mut FeatureMatrix) {
    let (exact, degree, out) = (
        set.col("name.exact"),
        set.col("link.in_degree"),
        set.col(NAME_EXACT_LINKS),
    );
    for row in 0..m.rows {
        let v = m.row(row)[exact] * m.row(row)[degree];
        m.set(row, out, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(query: &str, name: &str) -> NameMatch {
        NameQuery::new(query).matches(name)
    }

    #[test]
    fn any_spelling_of_the_name_or_a_trailing_path_is_exact() {
        for typed in [
            "HashMap",
            "hash map",
            "hash_map",
            "hashmap",
            "collections::HashMap",
            "std::collections::HashMap",
        ] {
            let m = matches(typed, "std::collections::HashMap");
            assert!(m.exact && m.prefix, "{typed}: {m:?}");
        }
        let m = matches("hash map", "std::collections::HashMap");
        assert_eq!(m.coverage, 1.0);
        let m = matches("std", "std::collections::HashMap");
        assert!(!m.exact && m.prefix);
        assert_eq!(m.coverage, 0.0);
        let m = matches("hash", "std::collections::HashMap");
        assert!(!m.exact && m.prefix);
        assert_eq!(m.coverage, 0.5);
        let m = matches("map", "std::collections::HashMap");
        assert!(!m.exact && !m.prefix);
        assert_eq!(m.coverage, 0.5);
        let m = matches("collections", "std::collections::HashMap");
        assert!(!m.exact && m.prefix);
        assert_eq!(matches("vec", ""), NameMatch::default());
        assert_eq!(matches("::", "std::vec::Vec"), NameMatch::default());
        let m = matches("os.path.join", "os.path.join");
        assert!(m.exact);
    }

    #[test]
    fn exact_links_is_the_degree_of_exact_names_only() {
        let set = FeatureSet::current();
        let (exact, degree, out) = (
            set.col("name.exact"),
            set.col("link.in_degree"),
            set.col(NAME_EXACT_LINKS),
        );
        let mut m = FeatureMatrix {
            rows: 3,
            cols: set.len(),
            values: [set.defaults(), set.defaults(), set.defaults()].concat(),
        };
        // The struct the query names, the module it also names, a page it does not name.
        for (row, (e, d)) in [(1.0, 3.2), (1.0, 0.7), (0.0, 5.0)].into_iter().enumerate() {
            m.values[row * m.cols + exact] = e;
            m.values[row * m.cols + degree] = d;
        }
        exact_links(set, &mut m);
        let got: Vec<f32> = (0..3).map(|r| m.row(r)[out]).collect();
        assert_eq!(got, [3.2, 0.7, 0.0]);
    }
}
