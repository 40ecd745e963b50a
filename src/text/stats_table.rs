//! A shard's whole statistics table in compact form: N, each text field's token count, and df
//! and cf of every term of every text field — what a cluster root keeps per shard and index
//! generation to answer any query's [`StatsRequest`] without asking the shard (`serve --role
//! root --stats table`).
//!
//! **Layout.** Per field, the terms are the keys of an FST (`tantivy-fst`, the finite-state
//! transducer tantivy's own term dictionaries use; already a dependency) mapping each term to
//! its ordinal, and df and cf are two arrays indexed by ordinal. An FST shares prefixes and
//! suffixes, so a term costs a few bytes instead of a string and a tree node. On the Rust
//! docs' three shards the tables ship 3.5 MB instead of the 13.7 MB of the JSON maps they
//! replaced, and take ≈ 14 MB of a root's memory instead of ≈ 74 MB (docs/BENCHMARKS.md,
//! "Statistics per search against statistics tables").
//!
//! **Bytes** ([`StatsTable::to_bytes`], what `/cluster/v1/table` answers): the magic
//! `RKSTATS`, a format version, then N, the ratings ([`RatingSum`]: 16 bytes of units, 8 of
//! count, little-endian), and per field its name, token count, term count, FST
//! bytes and the two arrays (variable-length integers, tantivy's `VInt`: most counts take one
//! byte), and last the SHA-256 of everything before it. [`StatsTable::from_bytes`] checks the checksum before it parses anything (a truncated
//! or damaged transfer is refused, never half-read), then every length, and that the FST maps
//! its terms to the ordinals `0..n` in order.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use tantivy::schema::{IndexRecordOption, Schema};
use tantivy::Searcher;
use tantivy_common::VInt;
use tantivy_fst::{Map, MapBuilder, Streamer};

use super::columns::RatingSum;
use super::config::TEXT_FIELDS;
use super::stats::{GlobalStats, StatsRequest, StatsSource, TermStats};

const MAGIC: &[u8; 7] = b"RKSTATS";
/// The byte format this rankd writes and reads.
pub(crate) const FORMAT: u32 = 2;

/// One text field's statistics.
struct FieldTable {
    name: String,
    total_tokens: u64,
    /// Term → ordinal into `df` and `cf`.
    terms: Map<Vec<u8>>,
    df: Vec<u64>,
    cf: Vec<u64>,
}

/// A shard's whole statistics table ([module docs](self)).
pub struct StatsTable {
    num_docs: u64,
    rating: RatingSum,
    fields: Vec<FieldTable>,
}

/// Why bytes are not a statistics table.
#[derive(Debug, thiserror::Error)]
#[error("not a rankd statistics table: {0}")]
pub struct TableError(String);

impl StatsTable {
    /// Every statistic of `searcher`'s index: one pass over each text field's term dictionary
    /// and postings, segment by segment (document counts include deleted documents not yet
    /// merged away, as tantivy's `doc_freq` does), with the searcher's ratings `rating`
    /// (`crate::text::columns::DocColumns::rating_sum`).
    pub fn of_searcher(
        searcher: &Searcher,
        schema: &Schema,
        rating: RatingSum,
    ) -> tantivy::Result<Self> {
        let mut fields = Vec::with_capacity(TEXT_FIELDS.len());
        for name in TEXT_FIELDS {
            let field = schema.get_field(name)?;
            let mut by_term: BTreeMap<Vec<u8>, (u64, u64)> = BTreeMap::new();
            for reader in searcher.segment_readers() {
                let inverted = reader.inverted_index(field)?;
                let mut terms = inverted.terms().stream()?;
                while let Some((key, info)) = terms.next() {
                    if std::str::from_utf8(key).is_err() {
                        continue;
                    }
                    let mut cf = 0u64;
                    let mut block = inverted
                        .read_block_postings_from_terminfo(info, IndexRecordOption::WithFreqs)?;
                    while !block.docs().is_empty() {
                        cf += block.freqs().iter().map(|&f| u64::from(f)).sum::<u64>();
                        block.advance();
                    }
                    let s = by_term.entry(key.to_vec()).or_default();
                    s.0 += u64::from(info.doc_freq);
                    s.1 += cf;
                }
            }
            let mut builder = MapBuilder::memory();
            let (mut df, mut cf) = (
                Vec::with_capacity(by_term.len()),
                Vec::with_capacity(by_term.len()),
            );
            for (ordinal, (term, (d, c))) in by_term.into_iter().enumerate() {
                builder
                    .insert(&term, ordinal as u64)
                    .map_err(|e| tantivy::TantivyError::InternalError(e.to_string()))?;
                df.push(d);
                cf.push(c);
            }
            let bytes = builder
                .into_inner()
                .map_err(|e| tantivy::TantivyError::InternalError(e.to_string()))?;
            fields.push(FieldTable {
                name: name.to_string(),
                total_tokens: searcher.total_tokens(field)?,
                terms: Map::from_bytes(bytes)
                    .map_err(|e| tantivy::TantivyError::InternalError(e.to_string()))?,
                df,
                cf,
            });
        }
        Ok(StatsTable {
            num_docs: StatsSource::num_docs(searcher),
            rating,
            fields,
        })
    }

    /// What `request` asks for: a term the table lacks occurs in no document (df = cf = 0);
    /// a field it lacks is left out (the scorer then reports it missing).
    pub fn lookup(&self, request: &StatsRequest) -> GlobalStats {
        let mut out = GlobalStats {
            num_docs: self.num_docs,
            rating: request.rating.then_some(self.rating),
            ..GlobalStats::default()
        };
        for (name, terms) in &request.terms {
            let Some(field) = self.fields.iter().find(|f| &f.name == name) else {
                continue;
            };
            out.total_tokens.insert(name.clone(), field.total_tokens);
            let by_term = out.terms.entry(name.clone()).or_default();
            for t in terms {
                let (df, cf) = match field.terms.get(t) {
                    Some(i) => (field.df[i as usize], field.cf[i as usize]),
                    None => (0, 0),
                };
                by_term.insert(
                    t.clone(),
                    TermStats {
                        df,
                        cf: request.cf.then_some(cf),
                    },
                );
            }
        }
        out
    }

    pub fn num_docs(&self) -> u64 {
        self.num_docs
    }

    /// Each field's name and token count, and its terms in order with df and cf.
    pub fn fields(&self) -> impl Iterator<Item = (&str, u64, Vec<(String, u64, u64)>)> + '_ {
        self.fields.iter().map(|f| {
            let mut terms = Vec::with_capacity(f.df.len());
            let mut stream = f.terms.stream();
            while let Some((term, i)) = stream.next() {
                let i = i as usize;
                terms.push((String::from_utf8_lossy(term).into_owned(), f.df[i], f.cf[i]));
            }
            (f.name.as_str(), f.total_tokens, terms)
        })
    }

    /// The table as bytes ([module docs](self)).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&self.num_docs.to_le_bytes());
        out.extend_from_slice(&self.rating.units.to_le_bytes());
        out.extend_from_slice(&self.rating.count.to_le_bytes());
        out.extend_from_slice(&(self.fields.len() as u64).to_le_bytes());
        for f in &self.fields {
            out.extend_from_slice(&(f.name.len() as u64).to_le_bytes());
            out.extend_from_slice(f.name.as_bytes());
            out.extend_from_slice(&f.total_tokens.to_le_bytes());
            out.extend_from_slice(&(f.df.len() as u64).to_le_bytes());
            let fst = f.terms.as_fst().to_vec();
            out.extend_from_slice(&(fst.len() as u64).to_le_bytes());
            out.extend_from_slice(&fst);
            for &v in f.df.iter().chain(&f.cf) {
                VInt(v).serialize_into_vec(&mut out);
            }
        }
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        out
    }

    /// Reads [`StatsTable::to_bytes`]'s bytes, checking them first ([module docs](self)).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TableError> {
        let bad = |m: &str| TableError(m.to_string());
        let Some(body_len) = bytes.len().checked_sub(32) else {
            return Err(bad("shorter than its checksum"));
        };
        let (body, digest) = bytes.split_at(body_len);
        if Sha256::digest(body).as_slice() != digest {
            return Err(bad("checksum mismatch (truncated or damaged)"));
        }
        let mut r = Reader { bytes: body };
        if r.take(MAGIC.len())? != MAGIC {
            return Err(bad("wrong magic"));
        }
        let format = u32::from_le_bytes(r.take(4)?.try_into().expect("4 bytes"));
        if format != FORMAT {
            return Err(TableError(format!(
                "format {format}, this rankd reads {FORMAT}"
            )));
        }
        let num_docs = r.u64()?;
        let rating = RatingSum {
            units: i128::from_le_bytes(r.take(16)?.try_into().expect("16 bytes")),
            count: r.u64()?,
        };
        let count = r.u64()?;
        let mut fields = Vec::new();
        for _ in 0..count {
            let name_len = r.len()?;
            let name = String::from_utf8(r.take(name_len)?.to_vec())
                .map_err(|_| bad("a field name is not UTF-8"))?;
            let total_tokens = r.u64()?;
            let n = r.len()?;
            let fst_len = r.len()?;
            let terms = Map::from_bytes(r.take(fst_len)?.to_vec())
                .map_err(|e| TableError(format!("field {name}: {e}")))?;
            if terms.len() != n {
                return Err(TableError(format!(
                    "field {name}: {} terms for {n} counts",
                    terms.len()
                )));
            }
            let mut stream = terms.stream();
            let mut expected = 0u64;
            while let Some((_, i)) = stream.next() {
                if i != expected {
                    return Err(TableError(format!("field {name}: ordinals out of order")));
                }
                expected += 1;
            }
            let array = |r: &mut Reader| -> Result<Vec<u64>, TableError> {
                (0..n).map(|_| r.vint()).collect()
            };
            let df = array(&mut r)?;
            let cf = array(&mut r)?;
            fields.push(FieldTable {
                name,
                total_tokens,
                terms,
                df,
                cf,
            });
        }
        if !r.bytes.is_empty() {
            return Err(bad("bytes after the last field"));
        }
        Ok(StatsTable {
            num_docs,
            rating,
            fields,
        })
    }
}

/// Reads the byte layout front to back, every read bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TableError> {
        if n > self.bytes.len() {
            return Err(TableError("ends early".into()));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u64(&mut self) -> Result<u64, TableError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }

    /// A variable-length integer (tantivy's `VInt`).
    fn vint(&mut self) -> Result<u64, TableError> {
        VInt::deserialize_u64(&mut self.bytes).map_err(|_| TableError("ends early".into()))
    }

    /// A length, which cannot exceed what is left.
    fn len(&mut self) -> Result<usize, TableError> {
        let n = self.u64()?;
        if n > self.bytes.len() as u64 {
            return Err(TableError(format!(
                "a length of {n} with {} bytes left",
                self.bytes.len()
            )));
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::Document;
    use crate::text::{IndexConfig, TextIndex};

    fn index() -> (tempfile::TempDir, TextIndex) {
        let dir = tempfile::tempdir().unwrap();
        let index = TextIndex::open_or_create(dir.path(), None).unwrap();
        let words = ["shock", "wave", "flow", "mach", "boundary", "layer", "heat"];
        // Two commits: two segments whose term dictionaries overlap.
        for batch in 0..2 {
            index
                .upsert((0..30).map(|i| {
                    Document {
                        id: format!("d{batch}-{i}"),
                        title: format!("{} {}", words[i % 7], words[(i + batch) % 7]),
                        body: (0..1 + i % 5)
                            .map(|k| words[(i * k + batch) % 7])
                            .collect::<Vec<_>>()
                            .join(" "),
                        extra: match i % 3 {
                            0 => serde_json::Map::new(),
                            _ => serde_json::json!({"rating": 1.0 + 0.37 * i as f64, "rating_count": i})
                                .as_object()
                                .unwrap()
                                .clone(),
                        },
                        ..Default::default()
                    }
                }))
                .unwrap();
        }
        (dir, index)
    }

    /// Lookups equal what a gather from the index reads, for terms present and absent, with
    /// and without collection frequencies; the bytes round-trip.
    #[test]
    fn lookups_equal_the_index_and_bytes_round_trip() {
        let (_dir, index) = index();
        let searcher = index.reader.searcher();
        let schema = index.index.schema();
        let rating = index.doc_columns(&searcher).unwrap().rating_sum(&searcher);
        assert!(rating.count > 0);
        let table = StatsTable::of_searcher(&searcher, &schema, rating).unwrap();
        let back = StatsTable::from_bytes(&table.to_bytes()).unwrap();
        let config = IndexConfig::default();
        let mut compared = 0;
        for q in ["shock wave", "flow zzznotaterm", "mach boundary layer heat"] {
            let q = &crate::text::query::AnalyzedQuery::new(q);
            for request in [
                StatsRequest::for_query(&config, q).unwrap(),
                StatsRequest::for_fields(&config, q, &["body"], false).unwrap(),
            ] {
                let mut gathered = GlobalStats::gather(&searcher, &schema, &request).unwrap();
                gathered.rating = request.rating.then_some(rating);
                assert_eq!(table.lookup(&request), gathered, "{q:?}");
                assert_eq!(back.lookup(&request), gathered, "{q:?}");
                compared += gathered.terms.values().map(|t| t.len()).sum::<usize>();
            }
        }
        assert!(compared > 20, "{compared}");
        let fields: Vec<_> = table.fields().collect();
        assert_eq!(fields.len(), TEXT_FIELDS.len());
        assert!(fields.iter().any(|(_, _, terms)| terms.len() >= 7));
    }

    /// Damaged, truncated, foreign and future bytes are refused with a reason.
    #[test]
    fn bad_bytes_are_refused() {
        let (_dir, index) = index();
        let searcher = index.reader.searcher();
        let rating = RatingSum::default();
        let table = StatsTable::of_searcher(&searcher, &index.index.schema(), rating).unwrap();
        let bytes = table.to_bytes();
        let err = |b: &[u8]| {
            StatsTable::from_bytes(b)
                .err()
                .expect("refused")
                .to_string()
        };
        assert!(err(&bytes[..bytes.len() - 1]).contains("checksum"));
        assert!(err(&bytes[..10]).contains("checksum"));
        assert!(err(&[]).contains("shorter"));
        let mut flipped = bytes.clone();
        flipped[40] ^= 1;
        assert!(err(&flipped).contains("checksum"));
        // Well-formed checksums over wrong contents.
        let sealed = |body: &[u8]| {
            let mut b = body.to_vec();
            b.extend_from_slice(&Sha256::digest(body));
            b
        };
        let body = &bytes[..bytes.len() - 32];
        let mut future = body.to_vec();
        future[7..11].copy_from_slice(&(FORMAT + 1).to_le_bytes());
        assert!(err(&sealed(&future)).contains(&format!("format {}", FORMAT + 1)));
        assert!(err(&sealed(&body[..body.len() - 3])).contains("ends early"));
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(err(&sealed(&longer)).contains("after the last field"));
        assert!(err(&sealed(b"RKSTATX\x01\x00\x00\x00")).contains("magic"));
        let mut huge = body.to_vec();
        // The first field's name length: after magic, format, N, the ratings, the count.
        huge[51..59].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(err(&sealed(&huge)).contains("length"));
    }
}
