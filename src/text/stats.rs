//! Collection statistics (N, |C| per field, df and cf per (field, term)): what every model of
//! SPEC §1 and every text feature reads besides the document itself.
//!
//! A [`Stats`] reads them from a [`StatsSource`]: one index ([`Searcher`]), or a table of sums
//! gathered from the shards of a collection ([`GlobalStats`], what a cluster ships to each
//! shard with a query, like Elasticsearch's `dfs_query_then_fetch` and Solr's
//! `ExactStatsCache`). The sums
//! are of integers, so a shard scoring with the collection's statistics computes exactly the
//! floats the single index computes: models never see which source they read.
//!
//! A table lookup that misses is an internal error, never a silent fallback to the shard's own
//! numbers: that fallback is the bug "exact global statistics" exists to exclude.

use std::cell::RefCell;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{Field, IndexRecordOption, Schema};
use tantivy::{Searcher, TantivyError, Term};

use super::columns::RatingSum;
use super::config::{IndexConfig, TEXT_FIELDS};
use super::query::{AnalyzedQuery, QueryError};

/// Where a [`Stats`] reads its numbers. Document counts include deleted documents not yet
/// merged away, as tantivy's `doc_freq` does.
pub trait StatsSource {
    /// N.
    fn num_docs(&self) -> u64;
    /// |C| for one field: its total number of tokens.
    fn total_tokens(&self, field: Field) -> tantivy::Result<u64>;
    fn df(&self, term: &Term) -> tantivy::Result<u64>;
    /// cf(t): occurrences of the term over the collection.
    fn cf(&self, term: &Term) -> tantivy::Result<u64>;
}

impl StatsSource for Searcher {
    fn num_docs(&self) -> u64 {
        self.segment_readers()
            .iter()
            .map(|r| u64::from(r.max_doc()))
            .sum()
    }

    fn total_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut total = 0;
        for r in self.segment_readers() {
            total += r.inverted_index(field)?.total_num_tokens();
        }
        Ok(total)
    }

    fn df(&self, term: &Term) -> tantivy::Result<u64> {
        self.doc_freq(term)
    }

    /// tantivy keeps no collection frequency: this sums the term's frequency blocks once
    /// (128 decoded frequencies at a time, without stepping document by document).
    fn cf(&self, term: &Term) -> tantivy::Result<u64> {
        let mut cf = 0u64;
        for r in self.segment_readers() {
            let inverted = r.inverted_index(term.field())?;
            if let Some(mut block) =
                inverted.read_block_postings(term, IndexRecordOption::WithFreqs)?
            {
                while !block.docs().is_empty() {
                    cf += block.freqs().iter().map(|&f| u64::from(f)).sum::<u64>();
                    block.advance();
                }
            }
        }
        Ok(cf)
    }
}

/// The statistics of one query, read once and remembered: feature extraction builds four
/// models per field over the same terms, and repeating their term-dictionary lookups (and the
/// collection-frequency walks) cost ~5% of a default search.
pub struct Stats<'a> {
    source: &'a dyn StatsSource,
    df: RefCell<HashMap<Term, u64>>,
    cf: RefCell<HashMap<Term, u64>>,
    total_tokens: RefCell<HashMap<Field, u64>>,
}

impl<'a> Stats<'a> {
    pub fn new(source: &'a dyn StatsSource) -> Self {
        Stats {
            source,
            df: RefCell::default(),
            cf: RefCell::default(),
            total_tokens: RefCell::default(),
        }
    }

    /// N.
    pub fn num_docs(&self) -> u64 {
        self.source.num_docs()
    }

    /// |C| for one field: the total number of tokens.
    pub fn total_tokens(&self, field: Field) -> tantivy::Result<u64> {
        if let Some(&total) = self.total_tokens.borrow().get(&field) {
            return Ok(total);
        }
        let total = self.source.total_tokens(field)?;
        self.total_tokens.borrow_mut().insert(field, total);
        Ok(total)
    }

    /// avgdl of one field (0 for an empty collection).
    pub fn avgdl(&self, field: Field) -> tantivy::Result<f32> {
        let n = self.num_docs();
        Ok(if n == 0 {
            0.0
        } else {
            self.total_tokens(field)? as f32 / n as f32
        })
    }

    pub fn df(&self, field: Field, term: &str) -> tantivy::Result<u64> {
        self.df_of(&Term::from_field_text(field, term))
    }

    fn df_of(&self, term: &Term) -> tantivy::Result<u64> {
        if let Some(&df) = self.df.borrow().get(term) {
            return Ok(df);
        }
        let df = self.source.df(term)?;
        self.df.borrow_mut().insert(term.clone(), df);
        Ok(df)
    }

    pub fn cf(&self, field: Field, term: &str) -> tantivy::Result<u64> {
        let term = Term::from_field_text(field, term);
        if let Some(&cf) = self.cf.borrow().get(&term) {
            return Ok(cf);
        }
        let cf = self.source.cf(&term)?;
        self.cf.borrow_mut().insert(term, cf);
        Ok(cf)
    }
}

/// tantivy's own BM25 (`Bm25Weight`) reads the same numbers, so the native first phase scores
/// with the collection's statistics too.
impl Bm25StatisticsProvider for Stats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.total_tokens(field)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.num_docs())
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.df_of(term)
    }
}

/// Which statistics a query needs: for every text field, the query's terms under that field's
/// analyzer (the first phase reads one or all of them, the text features all of them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsRequest {
    /// Field name → terms.
    pub terms: BTreeMap<String, BTreeSet<String>>,
    /// Whether collection frequencies are wanted too (the language model and RM3 read them;
    /// each costs a walk over the term's postings).
    pub cf: bool,
    /// Whether the collection's ratings are wanted (the Bayesian average's C: the social
    /// features and `sort=rating` read it).
    #[serde(default)]
    pub rating: bool,
}

impl StatsRequest {
    /// Every statistic any model or feature reads for `text`.
    pub fn for_query(config: &IndexConfig, query: &AnalyzedQuery) -> Result<Self, QueryError> {
        let mut request = Self::for_fields(config, query, &TEXT_FIELDS, true)?;
        request.rating = true;
        Ok(request)
    }

    /// The statistics of `text`'s terms in `fields` (collection frequencies when `cf`), and
    /// every text field's token count (BM25F reads each part's, whatever field its terms
    /// are counted in).
    pub fn for_fields(
        config: &IndexConfig,
        query: &AnalyzedQuery,
        fields: &[&str],
        cf: bool,
    ) -> Result<Self, QueryError> {
        let mut request = StatsRequest {
            terms: BTreeMap::new(),
            cf,
            rating: false,
        };
        for name in TEXT_FIELDS {
            let terms = match fields.contains(&name) {
                true => query
                    .terms(config.field(name).analyzer)?
                    .terms
                    .iter()
                    .map(|(t, _)| t.clone())
                    .collect(),
                false => BTreeSet::new(),
            };
            request.terms.insert(name.to_string(), terms);
        }
        Ok(request)
    }

    /// The document frequencies of `terms` in one field, without collection frequencies.
    pub fn for_terms(field: &str, terms: impl IntoIterator<Item = String>) -> Self {
        StatsRequest {
            terms: BTreeMap::from([(field.to_string(), terms.into_iter().collect())]),
            cf: false,
            rating: false,
        }
    }
}

/// The statistics a [`StatsRequest`] asked for, of one shard or summed over several.
/// Field names, not `Field` ordinals, so that it means the same to every process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalStats {
    pub num_docs: u64,
    /// Field name → |C|.
    pub total_tokens: BTreeMap<String, u64>,
    /// Field name → term → statistics.
    pub terms: BTreeMap<String, BTreeMap<String, TermStats>>,
    /// The ratings, when the request asked for them (gathered by whoever holds the index's
    /// columns: `crate::cluster::leaf`, or a statistics table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rating: Option<RatingSum>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TermStats {
    pub df: u64,
    /// Absent when the request did not ask for collection frequencies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cf: Option<u64>,
}

impl GlobalStats {
    /// What `request` asks for, read from `source` (one shard's searcher, usually), but the
    /// ratings: whoever holds the index's columns adds them
    /// (`crate::text::columns::DocColumns::rating_sum`, computed once per searcher).
    pub fn gather(
        source: &dyn StatsSource,
        schema: &Schema,
        request: &StatsRequest,
    ) -> tantivy::Result<Self> {
        let mut out = GlobalStats {
            num_docs: source.num_docs(),
            ..GlobalStats::default()
        };
        for (name, terms) in &request.terms {
            let field = schema.get_field(name)?;
            out.total_tokens
                .insert(name.clone(), source.total_tokens(field)?);
            let by_term = out.terms.entry(name.clone()).or_default();
            for t in terms {
                let term = Term::from_field_text(field, t);
                let cf = if request.cf {
                    Some(source.cf(&term)?)
                } else {
                    None
                };
                by_term.insert(
                    t.clone(),
                    TermStats {
                        df: source.df(&term)?,
                        cf,
                    },
                );
            }
        }
        Ok(out)
    }

    /// Adds another shard's statistics (of the same request). Integer sums: the order of
    /// the shards does not matter. A collection frequency one side lacks is lacking in the sum.
    pub fn add(&mut self, other: &GlobalStats) {
        self.num_docs += other.num_docs;
        if let Some(r) = other.rating {
            self.rating.get_or_insert_with(RatingSum::default).add(r);
        }
        for (name, &tokens) in &other.total_tokens {
            *self.total_tokens.entry(name.clone()).or_default() += tokens;
        }
        for (name, terms) in &other.terms {
            let mine = self.terms.entry(name.clone()).or_default();
            for (t, s) in terms {
                match mine.entry(t.clone()) {
                    Entry::Vacant(e) => {
                        e.insert(*s);
                    }
                    Entry::Occupied(mut e) => {
                        let m = e.get_mut();
                        m.df += s.df;
                        m.cf = m.cf.zip(s.cf).map(|(a, b)| a + b);
                    }
                }
            }
        }
    }

    /// Merges in statistics of other terms (a second round for RM3's expansion terms); terms
    /// already present keep theirs (with their collection frequencies).
    pub fn extend(&mut self, other: GlobalStats) {
        for (name, terms) in other.terms {
            let mine = self.terms.entry(name).or_default();
            for (t, s) in terms {
                mine.entry(t).or_insert(s);
            }
        }
        for (name, tokens) in other.total_tokens {
            self.total_tokens.entry(name).or_insert(tokens);
        }
        self.rating = self.rating.or(other.rating);
    }

    /// The table as a [`StatsSource`] for an index with `schema`.
    pub fn source<'a>(&'a self, schema: &'a Schema) -> GlobalSource<'a> {
        GlobalSource {
            stats: self,
            schema,
        }
    }
}

/// A [`GlobalStats`] read through an index's schema.
pub struct GlobalSource<'a> {
    stats: &'a GlobalStats,
    schema: &'a Schema,
}

/// How the error of a [`GlobalSource`] asked for a statistic it lacks begins: a leaf answers
/// it as a bad call (`crate::cluster::leaf`), the statistics being the caller's.
pub const LACKING: &str = "the collection statistics shipped with this query lack";

impl GlobalSource<'_> {
    fn missing(&self, what: &str, field: Field, term: Option<&Term>) -> TantivyError {
        let name = self.schema.get_field_name(field);
        let term = term
            .and_then(|t| t.value().as_str().map(|s| format!(":{s}")))
            .unwrap_or_default();
        TantivyError::InternalError(format!("{LACKING} the {what} of {name}{term}"))
    }

    fn term(&self, term: &Term) -> tantivy::Result<TermStats> {
        let name = self.schema.get_field_name(term.field());
        term.value()
            .as_str()
            .and_then(|t| self.stats.terms.get(name)?.get(t))
            .copied()
            .ok_or_else(|| self.missing("statistics", term.field(), Some(term)))
    }
}

impl StatsSource for GlobalSource<'_> {
    fn num_docs(&self) -> u64 {
        self.stats.num_docs
    }

    fn total_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.stats
            .total_tokens
            .get(self.schema.get_field_name(field))
            .copied()
            .ok_or_else(|| self.missing("token count", field, None))
    }

    fn df(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(self.term(term)?.df)
    }

    fn cf(&self, term: &Term) -> tantivy::Result<u64> {
        self.term(term)?
            .cf
            .ok_or_else(|| self.missing("collection frequency", term.field(), Some(term)))
    }
}
