//! What a hit shows of its document — id, title, URL, snippet passages — and the reranker's
//! URL and date features, read from fast-field columns without decompressing the stored
//! document (a Rust API page's stored body is up to a megabyte; reading whole documents cost
//! 37% of a top-10 query).
//!
//! A hit's id, title, URL and passages sit together in one value of the `hit` bytes column
//! ([`encode_hit`]): reading a value of a string column decodes its dictionary block up to
//! the value's ordinal — blocks of ~4 KB hold hundreds of ids or titles, ~30k instructions per
//! read and three reads per hit, which were 10% of a default search — whereas a block of
//! the `hit` column holds one or two values.
//!
//! Opening the columns parses each segment's column directory, which cost ~3% of a default
//! search when done per query, so a [`SearcherCache`] keeps the columns of the searcher last
//! asked for (segments are immutable: a searcher with the same segments reads the same
//! columns).

use crate::sync::Recover;
use std::sync::{Arc, Mutex};

use tantivy::columnar::{BytesColumn, Column, StrColumn};
use tantivy::index::SegmentId;
use tantivy::{DocAddress, Searcher, TantivyError};

/// The columns of every segment of one searcher.
pub struct DocColumns {
    segments: Vec<SegmentColumns>,
    /// [`DocColumns::rating_sum`], computed on first use.
    rating_sum: std::sync::OnceLock<RatingSum>,
    /// [`DocColumns::id_rank`]'s table, built on first use.
    id_ranks: std::sync::OnceLock<Result<Vec<Vec<u32>>, String>>,
}

/// What was built for the most recent searcher asked about, keyed by its segments in order and
/// their deletion counts: segments are immutable, so a searcher with the same segments and
/// deletions would build the same value. [`DocColumns`] (whose collection-wide rating changes
/// with deletions) and the dense vectors' row tables (`crate::dense::Rows`) are kept so.
pub(crate) struct SearcherCache<T> {
    current: Mutex<Option<(SegmentsKey, Arc<T>)>>,
}

impl<T> Default for SearcherCache<T> {
    fn default() -> Self {
        SearcherCache {
            current: Mutex::new(None),
        }
    }
}

/// A searcher's segments in order, each with its deletion count: what changes when documents
/// are added, updated, deleted or merged.
pub(crate) type SegmentsKey = Vec<(SegmentId, u32)>;

/// The [`SegmentsKey`] of `searcher`.
pub(crate) fn segments_key(searcher: &Searcher) -> SegmentsKey {
    searcher
        .segment_readers()
        .iter()
        .map(|r| (r.segment_id(), r.num_deleted_docs()))
        .collect()
}

impl<T> SearcherCache<T> {
    /// The value for `searcher`, built by `build` only when its segments differ from the last
    /// ones.
    pub fn get<E>(
        &self,
        searcher: &Searcher,
        build: impl FnOnce() -> Result<T, E>,
    ) -> Result<Arc<T>, E> {
        let key = segments_key(searcher);
        if let Some((k, value)) = self.current.locked().as_ref() {
            if *k == key {
                return Ok(value.clone());
            }
        }
        let value = Arc::new(build()?);
        *self.current.locked() = Some((key, value.clone()));
        Ok(value)
    }
}

struct SegmentColumns {
    hit: Option<BytesColumn>,
    /// The ids, whose dictionary ordinals follow the ids' byte order within the segment.
    id: Option<StrColumn>,
    url_depth: Column<u64>,
    url_length: Column<u64>,
    simhash: Option<Column<u64>>,
    page: Option<Column<u64>>,
    site: Option<Column<u64>>,
    group: Option<Column<u64>>,
    lang: Option<Column<u64>>,
    social: SegmentSocial,
}

/// One segment's columns of SPEC §1.8's signals (also opened alone by the sort modes, which
/// visit every matching document of a segment).
pub(crate) struct SegmentSocial {
    published_at: Option<Column<i64>>,
    votes_up: Option<Column<u64>>,
    votes_down: Option<Column<u64>>,
    rating: Option<Column<f64>>,
    rating_count: Option<Column<u64>>,
}

impl SegmentSocial {
    pub fn open(reader: &tantivy::SegmentReader) -> Self {
        let ff = reader.fast_fields();
        SegmentSocial {
            published_at: ff.i64("published_at").ok(),
            votes_up: ff.u64("votes_up").ok(),
            votes_down: ff.u64("votes_down").ok(),
            rating: ff.f64("rating").ok(),
            rating_count: ff.u64("rating_count").ok(),
        }
    }

    /// Which fields any document of the segment has.
    fn present(&self) -> SignalsPresent {
        fn any<T: PartialOrd + Copy + Send + Sync + std::fmt::Debug + 'static>(
            c: &Option<Column<T>>,
        ) -> bool {
            c.as_ref().is_some_and(|c| c.values.num_vals() > 0)
        }
        SignalsPresent {
            published_at: any(&self.published_at),
            votes: any(&self.votes_up) || any(&self.votes_down),
            rating: any(&self.rating) && any(&self.rating_count),
        }
    }

    pub fn signals(&self, doc: tantivy::DocId) -> SocialSignals {
        let get = |c: &Option<Column<u64>>| c.as_ref().and_then(|c| c.first(doc));
        SocialSignals {
            published_at: self.published_at.as_ref().and_then(|p| p.first(doc)),
            votes_up: get(&self.votes_up),
            votes_down: get(&self.votes_down),
            rating: self.rating.as_ref().and_then(|c| c.first(doc)),
            rating_count: get(&self.rating_count),
        }
    }
}

/// A document's collapse keys (`crate::search::collapse`), each absent where the document
/// has none. Fixed hashes, so keys from different shards compare (`crate::cluster::wire`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct CollapseKeys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simhash: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub site: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<u64>,
    /// The document's language (`crate::corpus::lang::code`): not a key, but which version
    /// of a page stands for it (`crate::search::collapse`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<u64>,
}

/// Which of SPEC §1.8's fields some document of an index carries (`published_at`; votes up
/// or down; a rating with its count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SignalsPresent {
    pub published_at: bool,
    pub votes: bool,
    pub rating: bool,
}

/// A document's SPEC §1.8 signals (`crate::features::social`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SocialSignals {
    pub published_at: Option<i64>,
    pub votes_up: Option<u64>,
    pub votes_down: Option<u64>,
    pub rating: Option<f64>,
    pub rating_count: Option<u64>,
}

/// The URL shape and date of a document (reranker features).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct DocShape {
    pub url_depth: u64,
    pub url_length: u64,
    /// Unix seconds, where the document has a date.
    pub published_at: Option<i64>,
}

/// What a hit shows of its document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DocHead {
    pub id: String,
    pub title: String,
    pub url: Option<String>,
}

/// The `hit` column's value of a document: its id, title and URL, each as a little-endian
/// `u32` byte length and the UTF-8 text, then its encoded snippet passages
/// (`crate::text::snippet::encode`).
pub(crate) fn encode_hit(id: &str, title: &str, url: &str, passages: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + id.len() + title.len() + url.len() + passages.len());
    for s in [id, title, url] {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    out.extend_from_slice(passages);
    out
}

/// A decoded `hit` value, borrowing its bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HitValue<'a> {
    pub id: &'a str,
    pub title: &'a str,
    /// Empty for a document without a URL.
    pub url: &'a str,
    /// The encoded snippet passages.
    pub passages: &'a [u8],
}

impl<'a> HitValue<'a> {
    /// Decodes a value written by [`encode_hit`]; `None` when it is malformed.
    pub fn parse(bytes: &'a [u8]) -> Option<Self> {
        let mut rest = bytes;
        let mut text = || -> Option<&'a str> {
            let len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            let s = std::str::from_utf8(rest.get(4..4 + len)?).ok()?;
            rest = &rest[4 + len..];
            Some(s)
        };
        let (id, title, url) = (text()?, text()?, text()?);
        Some(HitValue {
            id,
            title,
            url,
            passages: rest,
        })
    }

    pub fn head(&self) -> DocHead {
        DocHead {
            id: self.id.to_string(),
            title: self.title.to_string(),
            url: (!self.url.is_empty()).then(|| self.url.to_string()),
        }
    }
}

impl DocColumns {
    pub fn new(searcher: &Searcher) -> tantivy::Result<Self> {
        let segments = searcher
            .segment_readers()
            .iter()
            .map(|r| {
                let ff = r.fast_fields();
                Ok(SegmentColumns {
                    hit: ff.bytes("hit")?,
                    id: ff.str("id")?,
                    url_depth: ff.u64("url_depth")?,
                    url_length: ff.u64("url_length")?,
                    simhash: ff.u64("simhash").ok(),
                    page: ff.u64("page").ok(),
                    site: ff.u64("site").ok(),
                    group: ff.u64("group").ok(),
                    lang: ff.u64("lang").ok(),
                    social: SegmentSocial::open(r),
                })
            })
            .collect::<tantivy::Result<_>>()?;
        Ok(DocColumns {
            segments,
            rating_sum: std::sync::OnceLock::new(),
            id_ranks: std::sync::OnceLock::new(),
        })
    }

    /// Reads the `hit` value of a document into `buf` (cleared first) and decodes it.
    pub fn hit<'b>(
        &self,
        address: DocAddress,
        buf: &'b mut Vec<u8>,
    ) -> tantivy::Result<HitValue<'b>> {
        buf.clear();
        let s = &self.segments[address.segment_ord as usize];
        let found = match &s.hit {
            Some(c) => match c.term_ords(address.doc_id).next() {
                Some(ord) => c.ord_to_bytes(ord, buf)?,
                None => false,
            },
            None => false,
        };
        if !found {
            return Err(TantivyError::InternalError(format!(
                "document {address:?} has no `hit` value"
            )));
        }
        HitValue::parse(buf).ok_or_else(|| {
            TantivyError::DataCorruption(tantivy::error::DataCorruption::comment_only(format!(
                "document {address:?}: malformed `hit` value"
            )))
        })
    }

    /// The ordinal of a document's id in its segment's id dictionary: within one segment,
    /// ordinals compare as the ids do.
    pub fn id_ord(&self, address: DocAddress) -> tantivy::Result<u64> {
        self.segments[address.segment_ord as usize]
            .id
            .as_ref()
            .and_then(|c| c.term_ords(address.doc_id).next())
            .ok_or_else(|| TantivyError::InternalError(format!("document {address:?} has no id")))
    }

    /// The rank of a document's id among the ids of every segment (equal ids, a deleted
    /// document's and its replacement's, share a rank): ids compare as their ranks do.
    ///
    /// The table (4 bytes per id) is built on the first call for a searcher, from the
    /// segments' sorted id dictionaries: decoding ids one by one for each tie group that
    /// spans segments cost 10% of a top-100 search on the Rust docs, which hold many
    /// identical pages.
    pub fn id_rank(&self, address: DocAddress) -> tantivy::Result<u32> {
        let ord = self.id_ord(address)?;
        let ranks = self
            .id_ranks
            .get_or_init(|| self.build_id_ranks().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| TantivyError::InternalError(format!("id ranks: {e}")))?;
        Ok(ranks[address.segment_ord as usize][ord as usize])
    }

    fn build_id_ranks(&self) -> std::io::Result<Vec<Vec<u32>>> {
        let mut all: Vec<(Vec<u8>, u32, u32)> = Vec::new();
        let mut ranks = Vec::with_capacity(self.segments.len());
        for (segment, s) in self.segments.iter().enumerate() {
            let Some(column) = &s.id else {
                ranks.push(Vec::new());
                continue;
            };
            ranks.push(vec![0; column.num_terms()]);
            let mut stream = column.dictionary().stream()?;
            while stream.advance() {
                all.push((
                    stream.key().to_vec(),
                    segment as u32,
                    stream.term_ord() as u32,
                ));
            }
        }
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut rank = 0u32;
        for i in 0..all.len() {
            if i > 0 && all[i].0 != all[i - 1].0 {
                rank += 1;
            }
            ranks[all[i].1 as usize][all[i].2 as usize] = rank;
        }
        Ok(ranks)
    }

    /// The ids of documents, in the order of `addresses`, read from the `id` column's
    /// dictionary in ordinal order, one pass per segment (tantivy's
    /// `sorted_ords_to_term_cb`: each dictionary block decoded once). Reading them from the
    /// `hit` values instead decodes, for each 30-byte id, a dictionary block of values that
    /// also hold titles, URLs and snippet passages: on the Rust docs that was 16 % of a
    /// shard's first-phase call with a window of 100.
    pub fn ids(&self, addresses: &[DocAddress]) -> tantivy::Result<Vec<String>> {
        let mut wanted: Vec<(u32, u64, usize)> = addresses
            .iter()
            .enumerate()
            .map(|(i, &a)| Ok((a.segment_ord, self.id_ord(a)?, i)))
            .collect::<tantivy::Result<_>>()?;
        wanted.sort_unstable();
        let mut ids = vec![String::new(); addresses.len()];
        for group in wanted.chunk_by(|a, b| a.0 == b.0) {
            let segment = group[0].0;
            let column = self.segments[segment as usize]
                .id
                .as_ref()
                .expect("id_ord found the column");
            let ords: Vec<u64> = group.iter().map(|w| w.1).collect();
            let mut next = group.iter();
            let mut malformed = None;
            let found = column.dictionary().sorted_ords_to_term_cb(&ords, |bytes| {
                let (_, ord, i) = *next.next().expect("one call per ordinal");
                match std::str::from_utf8(bytes) {
                    Ok(id) => ids[i] = id.to_owned(),
                    Err(_) => malformed = Some(ord),
                }
            })?;
            if let Some(ord) = malformed.or((!found).then_some(ords[ords.len() - 1])) {
                return Err(TantivyError::DataCorruption(
                    tantivy::error::DataCorruption::comment_only(format!(
                        "segment {segment}: id {ord} is missing or not UTF-8"
                    )),
                ));
            }
        }
        Ok(ids)
    }

    /// The id, title and URL of a document.
    pub fn head(&self, address: DocAddress) -> tantivy::Result<DocHead> {
        let mut buf = Vec::new();
        Ok(self.hit(address, &mut buf)?.head())
    }

    pub fn shape(&self, address: DocAddress) -> DocShape {
        let s = &self.segments[address.segment_ord as usize];
        let doc = address.doc_id;
        DocShape {
            url_depth: s.url_depth.first(doc).unwrap_or(0),
            url_length: s.url_length.first(doc).unwrap_or(0),
            published_at: s.social.published_at.as_ref().and_then(|p| p.first(doc)),
        }
    }

    pub fn collapse_keys(&self, address: DocAddress) -> CollapseKeys {
        let s = &self.segments[address.segment_ord as usize];
        let doc = address.doc_id;
        let get = |c: &Option<Column<u64>>| c.as_ref().and_then(|c| c.first(doc));
        CollapseKeys {
            simhash: get(&s.simhash),
            page: get(&s.page),
            site: get(&s.site),
            group: get(&s.group),
            lang: get(&s.lang),
        }
    }

    /// Which SPEC §1.8 fields some document of the searcher carries.
    pub fn signals_present(&self) -> SignalsPresent {
        self.segments
            .iter()
            .map(|s| s.social.present())
            .fold(SignalsPresent::default(), |a, b| SignalsPresent {
                published_at: a.published_at || b.published_at,
                votes: a.votes || b.votes,
                rating: a.rating || b.rating,
            })
    }

    pub fn social(&self, address: DocAddress) -> SocialSignals {
        self.segments[address.segment_ord as usize]
            .social
            .signals(address.doc_id)
    }

    /// The ratings of every rated document of the searcher, summed exactly
    /// ([`RatingSum`]); deleted documents are skipped. Computed once per [`DocColumns`]:
    /// `searcher` must be the one they were opened for.
    pub fn rating_sum(&self, searcher: &Searcher) -> RatingSum {
        *self.rating_sum.get_or_init(|| {
            let mut sum = RatingSum::default();
            for (ord, reader) in searcher.segment_readers().iter().enumerate() {
                let s = &self.segments[ord].social;
                let (Some(rating), Some(n)) = (&s.rating, &s.rating_count) else {
                    continue;
                };
                for doc in reader.doc_ids_alive() {
                    if let (Some(r), Some(n)) = (rating.first(doc), n.first(doc)) {
                        sum.add_rating(r, n);
                    }
                }
            }
            sum
        })
    }
}

/// The ratings of a collection's rated documents, each weighted by its count, summed in
/// fixed point (units of 2⁻³² of a rating): integer sums do not depend on their order, so a
/// sharded collection's shards add up to exactly the single index's sum, and the Bayesian
/// average's C (SPEC §1.8) is the same float on both. The fixed point rounds each rating by
/// at most 2⁻³³, far below any rating scale's step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RatingSum {
    /// Σ round(rating · 2³²) · count.
    pub units: i128,
    /// Σ count.
    pub count: u64,
}

impl RatingSum {
    const UNIT: f64 = (1u64 << 32) as f64;

    /// Adds one document's rating `r` given by `n` raters (a non-finite rating is skipped).
    pub fn add_rating(&mut self, r: f64, n: u64) {
        if r.is_finite() && n > 0 {
            let units = (r * Self::UNIT).round() as i128;
            self.units = self
                .units
                .saturating_add(units.saturating_mul(i128::from(n)));
            self.count = self.count.saturating_add(n);
        }
    }

    /// Adds another part of the collection.
    pub fn add(&mut self, other: RatingSum) {
        self.units = self.units.saturating_add(other.units);
        self.count = self.count.saturating_add(other.count);
    }

    /// The count-weighted mean rating (C); `None` when nothing is rated.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.units as f64 / Self::UNIT / self.count as f64)
    }
}

/// Where a search reads the Bayesian average's C (the collection's mean rating, SPEC §1.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeanRating {
    /// The searched index is the whole collection: its own ratings.
    OfIndex,
    /// The searched index is one shard: the collection's ratings, summed over its shards.
    Collection(RatingSum),
}

impl MeanRating {
    /// C, `None` when nothing is rated; `columns` are `searcher`'s.
    pub fn resolve(self, columns: &DocColumns, searcher: &Searcher) -> Option<f64> {
        match self {
            MeanRating::OfIndex => columns.rating_sum(searcher).mean(),
            MeanRating::Collection(sum) => sum.mean(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Document;
    use crate::text::TextIndex;

    #[test]
    fn ids_read_in_one_pass_equal_the_hit_values_ids() {
        let dir = tempfile::tempdir().unwrap();
        let index = TextIndex::open_or_create(dir.path(), None).unwrap();
        // Three commits: three segments, ids out of order, a replaced document, and ids long
        // enough to span several dictionary blocks.
        for batch in 0..3 {
            index
                .upsert((0..400).rev().map(|i| Document {
                    id: format!(
                        "{}/{i:05}-{}",
                        ["std", "core", "alloc"][i % 3],
                        "x".repeat(i % 40)
                    ),
                    title: format!("t{batch}"),
                    body: "word".into(),
                    ..Default::default()
                }))
                .unwrap();
        }
        let searcher = index.reader.searcher();
        let columns = DocColumns::new(&searcher).unwrap();
        let mut all: Vec<DocAddress> = Vec::new();
        for (s, r) in searcher.segment_readers().iter().enumerate() {
            all.extend((0..r.max_doc()).map(|d| DocAddress::new(s as u32, d)));
        }
        assert!(searcher.segment_readers().len() > 1);
        // Every document, shuffled, with repeats: each equals its `hit` value's id.
        let mut asked: Vec<DocAddress> = all.iter().rev().step_by(7).copied().collect();
        asked.extend(all.iter().step_by(3).copied());
        asked.push(all[5]);
        asked.push(all[5]);
        let ids = columns.ids(&asked).unwrap();
        assert_eq!(ids.len(), asked.len());
        for (a, id) in asked.iter().zip(&ids) {
            assert_eq!(*id, columns.head(*a).unwrap().id, "{a:?}");
        }
        assert!(columns.ids(&[]).unwrap().is_empty());
    }

    #[test]
    fn hit_values_round_trip_and_malformed_ones_are_refused() {
        let passages = [1u8, 2, 3, 0, 255];
        let v = encode_hit("std/vec/struct.Vec.html", "Vec in std::vec", "", &passages);
        let hit = HitValue::parse(&v).unwrap();
        assert_eq!(hit.id, "std/vec/struct.Vec.html");
        assert_eq!(hit.title, "Vec in std::vec");
        assert_eq!(hit.head().url, None);
        assert_eq!(hit.passages, &passages);
        let v = encode_hit("a", "", "https://x.org/é", &[]);
        let hit = HitValue::parse(&v).unwrap();
        assert_eq!(hit.head().url.as_deref(), Some("https://x.org/é"));
        assert!(hit.passages.is_empty());
        // Truncated anywhere inside the three strings, or not UTF-8: refused.
        for cut in 0..v.len() {
            assert!(HitValue::parse(&v[..cut]).is_none(), "cut at {cut}");
        }
        let mut bad = encode_hit("a", "b", "c", &[]);
        bad[4] = 0xff;
        assert!(HitValue::parse(&bad).is_none());
    }
}
