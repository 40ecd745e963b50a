//! The on-disk index: tantivy index, its manifest and the configuration it was built with.
//!
//! Layout of a data directory:
//! ```text
//! DATA/index/          tantivy's files
//! DATA/index.toml      the index configuration (copied at creation, editable for scoring)
//! DATA/manifest.json   tantivy version, index format, configuration hashes, document count
//! ```
//!
//! The reader reloads by itself when another process commits (tantivy watches `meta.json`):
//! a `rankd ingest` into the directory a server is serving becomes visible to its searches
//! within about a second, without a restart. A write that fails (a full disk, above all)
//! rolls back and removes the segment files it had written, so the failure leaves the index
//! and the free space as they were and the next write can succeed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use tantivy::schema::{OwnedValue, Value};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use super::columns::{DocColumns, SearcherCache};
use super::config::IndexConfig;
use super::schema::{build_schema, register_analyzers, Fields};
use crate::corpus::Document;

/// Bumped whenever the schema or the meaning of a stored field changes (4: the `hit` column
/// replaced `snippet`; 5: SimHash, collapse keys and social signals as fast fields; 6: the
/// `name` and `lang` fields, and page keys of `hreflang` versions).
pub(crate) const INDEX_FORMAT: u32 = 6;

/// Memory budget of the index writer.
const WRITER_BUDGET_BYTES: usize = 256 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub index_format: u32,
    pub rankd_version: String,
    pub tantivy_version: String,
    pub analysis_hash: String,
    pub config_hash: String,
    pub num_docs: u64,
    /// Seconds since the Unix epoch of the last commit.
    pub updated_at: u64,
}

/// The index's writer lock is held by another process (a `rankd ingest`): nothing was written,
/// and retrying later may succeed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WriterBusy(pub String);

/// An open index with its reader.
pub struct TextIndex {
    pub dir: PathBuf,
    pub index: Index,
    pub reader: IndexReader,
    pub fields: Fields,
    pub config: IndexConfig,
    columns: SearcherCache<DocColumns>,
    /// The configuration's collapse page rules, compiled.
    page_rules: Vec<(regex::Regex, String)>,
}

impl TextIndex {
    /// Opens the index in `data_dir`, creating an empty one with `config` when none exists.
    /// When `config` is given and an index exists, its analysis settings must match.
    pub fn open_or_create(data_dir: &Path, config: Option<IndexConfig>) -> anyhow::Result<Self> {
        if data_dir.join("manifest.json").exists() {
            return TextIndex::open(data_dir, config);
        }
        let config = config.unwrap_or_default();
        std::fs::create_dir_all(data_dir.join("index"))
            .with_context(|| format!("cannot create data directory {}", data_dir.display()))?;
        let (schema, fields) = build_schema(&config);
        let index = Index::create_in_dir(data_dir.join("index"), schema)
            .with_context(|| format!("cannot create an index in {}", data_dir.display()))?;
        write_atomic(
            &data_dir.join("index.toml"),
            toml::to_string(&config)?.as_bytes(),
        )?;
        let this = TextIndex::finish_open(data_dir, index, fields, config)?;
        this.write_manifest()?;
        Ok(this)
    }

    /// Opens an existing index. `config` overrides the stored configuration's scoring
    /// parameters; its analysis settings must match those the index was built with.
    pub fn open(data_dir: &Path, config: Option<IndexConfig>) -> anyhow::Result<Self> {
        let manifest = read_manifest(data_dir)?;
        if manifest.index_format != INDEX_FORMAT {
            bail!(
                "index in {} has format {} but this rankd reads format {INDEX_FORMAT}; re-ingest into a new --data-dir",
                data_dir.display(),
                manifest.index_format
            );
        }
        let stored = IndexConfig::load(&data_dir.join("index.toml"))?;
        let config = match config {
            Some(c) if c.analysis_hash() != stored.analysis_hash() => bail!(
                "the index in {} was built with different analyzers than the given configuration; \
                 re-ingest into a new --data-dir to change analysis",
                data_dir.display()
            ),
            Some(c) => c,
            None => stored,
        };
        if config.analysis_hash() != manifest.analysis_hash {
            bail!(
                "{}/index.toml does not match the manifest's analysis hash (was it edited?)",
                data_dir.display()
            );
        }
        let (_, fields) = build_schema(&config);
        let index = Index::open_in_dir(data_dir.join("index"))
            .with_context(|| format!("cannot open the index in {}", data_dir.display()))?;
        TextIndex::finish_open(data_dir, index, fields, config)
    }

    fn finish_open(
        data_dir: &Path,
        index: Index,
        fields: Fields,
        config: IndexConfig,
    ) -> anyhow::Result<Self> {
        register_analyzers(index.tokenizers());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::OnCommitWithDelay)
            .try_into()?;
        Ok(TextIndex {
            dir: data_dir.to_path_buf(),
            index,
            reader,
            fields,
            page_rules: config.collapse.compile()?,
            config,
            columns: SearcherCache::default(),
        })
    }

    /// The fast-field columns hits are built from, for `searcher` (cached while its segments
    /// stay the same).
    pub fn doc_columns(&self, searcher: &Searcher) -> tantivy::Result<Arc<DocColumns>> {
        self.columns.get(searcher, || DocColumns::new(searcher))
    }

    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    pub fn manifest(&self) -> anyhow::Result<Manifest> {
        read_manifest(&self.dir)
    }

    pub(crate) fn write_manifest(&self) -> anyhow::Result<()> {
        let manifest = Manifest {
            index_format: INDEX_FORMAT,
            rankd_version: env!("CARGO_PKG_VERSION").to_string(),
            tantivy_version: tantivy::version_string().to_string(),
            analysis_hash: self.config.analysis_hash(),
            config_hash: self.config.full_hash(),
            num_docs: self.num_docs(),
            updated_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        };
        write_atomic(
            &self.dir.join("manifest.json"),
            serde_json::to_string_pretty(&manifest)?.as_bytes(),
        )
    }

    /// Adds or replaces (same `id`) `docs` in one atomic commit: either every document becomes
    /// visible or, on any error, none does.
    pub fn upsert(&self, docs: impl IntoIterator<Item = Document>) -> anyhow::Result<u64> {
        let mut writer = self.writer()?;
        let mut count = 0u64;
        let mut prose_analyzer = super::schema::analyzer(self.config.field("body").analyzer);
        let result = (|| -> tantivy::Result<()> {
            for doc in docs {
                writer.delete_term(Term::from_field_text(self.fields.id, &doc.id));
                writer.add_document(self.to_tantivy(&doc, &mut prose_analyzer))?;
                count += 1;
            }
            writer.commit()?;
            Ok(())
        })();
        if let Err(e) = result {
            return Err(self.discard(writer, e));
        }
        self.after_commit(writer)?;
        Ok(count)
    }

    /// The index's writer; [`WriterBusy`] when another process holds its lock.
    fn writer(&self) -> anyhow::Result<IndexWriter> {
        match self.index.writer(WRITER_BUDGET_BYTES) {
            Ok(writer) => Ok(writer),
            Err(tantivy::TantivyError::LockFailure(..)) => {
                Err(anyhow::Error::new(WriterBusy(format!(
                    "the index in {} is being written by another process (a `rankd ingest`?); \
                     nothing was written: retry when it has finished",
                    self.index_dir()
                ))))
            }
            Err(e) => Err(anyhow::Error::new(e).context(format!(
                "cannot open the index in {} for writing",
                self.index_dir()
            ))),
        }
    }

    fn index_dir(&self) -> String {
        self.dir.join("index").display().to_string()
    }

    /// After a failed write: rolls back and deletes the segment files the write left (on a
    /// full disk they would keep it full, and every later write would fail). The error names
    /// the index directory.
    fn discard(&self, mut writer: IndexWriter, e: tantivy::TantivyError) -> anyhow::Error {
        let cleanup = writer
            .rollback()
            .and_then(|_| writer.garbage_collect_files().wait());
        let e = anyhow::Error::new(e).context(format!(
            "cannot write to the index in {}; nothing was committed",
            self.index_dir()
        ));
        match cleanup {
            Ok(_) => e,
            Err(c) => e.context(format!(
                "and the uncommitted files in {} could not be removed ({c}); they go at the \
                 next successful write",
                self.index_dir()
            )),
        }
    }

    /// After a commit: waits for merges (a merge that fails, say on a full disk, leaves the
    /// committed documents as they are, so it is logged, not returned), then makes searches
    /// see the commit and records it in the manifest.
    fn after_commit(&self, writer: IndexWriter) -> anyhow::Result<()> {
        if let Err(e) = writer.wait_merging_threads() {
            tracing::warn!("merging segments in {} failed: {e}", self.index_dir());
        }
        self.reader.reload()?;
        self.write_manifest()
    }

    /// Deletes the documents with the given ids in one commit; returns how many existed.
    pub fn delete(&self, ids: &[String]) -> anyhow::Result<u64> {
        let searcher = self.reader.searcher();
        let existing = ids
            .iter()
            .filter(|id| {
                searcher
                    .doc_freq(&Term::from_field_text(self.fields.id, id))
                    .unwrap_or(0)
                    > 0
            })
            .count() as u64;
        let mut writer = self.writer()?;
        for id in ids {
            writer.delete_term(Term::from_field_text(self.fields.id, id));
        }
        if let Err(e) = writer.commit() {
            return Err(self.discard(writer, e));
        }
        self.after_commit(writer)?;
        Ok(existing)
    }

    fn to_tantivy(&self, doc: &Document, prose_analyzer: &mut TextAnalyzer) -> TantivyDocument {
        let f = &self.fields;
        let mut t = TantivyDocument::new();
        t.add_text(f.id, &doc.id);
        let url = doc.url.as_deref().unwrap_or("");
        for (field, text) in [
            (f.title, doc.title.as_str()),
            (f.name, doc.name.as_str()),
            (f.headings, doc.headings.as_str()),
            (f.body, doc.body.as_str()),
            (f.anchor, doc.anchor.as_str()),
            (f.url, url),
        ] {
            t.add_text(field, text);
            t.add_text(f.all, text);
        }
        // The item's kind (`trait`, a product category) is searched as part of its name.
        if let Some(kind) = doc.extra.get("kind").and_then(|k| k.as_str()) {
            t.add_text(f.name, kind);
            t.add_text(f.all, kind);
        }
        if !doc.name.is_empty() {
            t.add_text(f.name_column, &doc.name);
        }
        for link in &doc.links {
            t.add_text(f.links, link);
        }
        let prose = if doc.prose.is_empty() {
            &doc.body
        } else {
            &doc.prose
        };
        let passages = super::snippet::encode(prose, prose_analyzer);
        t.add_bytes(
            f.hit,
            &super::columns::encode_hit(&doc.id, &doc.title, url, &passages),
        );
        t.add_u64(f.url_depth, super::schema::url_depth(url) as u64);
        t.add_u64(f.url_length, url.chars().count() as u64);
        if let Some(ts) = doc.published_at {
            t.add_i64(f.published_at, ts);
        }
        if let Some(h) = super::simhash::simhash(&format!("{}\n{}", doc.title, doc.body)) {
            t.add_u64(f.simhash, h);
        }
        if let Some(lang) = &doc.lang {
            t.add_u64(f.lang, crate::corpus::lang::code(lang));
        }
        if !url.is_empty() {
            // Language versions linked by `hreflang` share the page key of their first URL.
            let page = doc.translation_of.as_deref().unwrap_or(url);
            t.add_u64(f.page, key_hash(&self.page_key(page)));
            if let Some(host) = url::Url::parse(url)
                .ok()
                .and_then(|u| u.host_str().map(str::to_string))
            {
                t.add_u64(f.site, key_hash(&host));
            }
        }
        let social = crate::corpus::SocialFields::of(&doc.extra);
        if let Some(g) = &social.group {
            t.add_u64(f.group, key_hash(g));
        }
        if let Some(v) = social.votes_up {
            t.add_u64(f.votes_up, v);
        }
        if let Some(v) = social.votes_down {
            t.add_u64(f.votes_down, v);
        }
        if let Some(r) = social.rating {
            t.add_f64(f.rating, r);
        }
        if let Some(n) = social.rating_count {
            t.add_u64(f.rating_count, n);
        }
        if !doc.extra.is_empty() {
            let object = doc
                .extra
                .iter()
                .map(|(k, v)| (k.clone(), OwnedValue::from(v.clone())))
                .collect();
            t.add_object(f.extra, object);
        }
        t
    }

    /// The key `collapse=page` groups by: the URL without query and fragment, rewritten by
    /// the configured page rules in order. An absolute URL is first normalised as browsers
    /// read it (WHATWG URL: scheme and host in lowercase, the scheme's default port dropped,
    /// `.` and `..` segments resolved), so `HTTPS://X.org:443/a` and `https://x.org/a` are
    /// one page; the path keeps its case (servers may tell `/A` from `/a`).
    pub fn page_key(&self, url: &str) -> String {
        let mut key = match url::Url::parse(url) {
            Ok(mut u) if u.has_host() => {
                u.set_query(None);
                u.set_fragment(None);
                u.into()
            }
            _ => url.split(['?', '#']).next().unwrap_or("").to_string(),
        };
        for (re, replace) in &self.page_rules {
            key = re.replace_all(&key, replace.as_str()).into_owned();
        }
        key
    }

    /// Reads a stored document back into a [`Document`].
    pub fn stored(&self, t: &TantivyDocument) -> Document {
        let f = &self.fields;
        let text = |field| {
            t.get_first(field)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string()
        };
        let url = text(f.url);
        let extra = t
            .get_first(f.extra)
            .map(|v| serde_json::to_value(OwnedValue::from(v)).unwrap_or_default())
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default();
        Document {
            id: text(f.id),
            url: (!url.is_empty()).then_some(url),
            title: text(f.title),
            name: text(f.name),
            headings: text(f.headings),
            body: text(f.body),
            anchor: text(f.anchor),
            links: t
                .get_all(f.links)
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            published_at: t.get_first(f.published_at).and_then(|v| v.as_i64()),
            extra,
            prose: String::new(),
            lang: t
                .get_first(f.lang)
                .and_then(|v| v.as_u64())
                .and_then(crate::corpus::lang::from_code),
            translation_of: None,
        }
    }
}

/// The manifest of the index in `data_dir`.
pub(crate) fn read_manifest(data_dir: &Path) -> anyhow::Result<Manifest> {
    let path = data_dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "no rankd index in {} (missing manifest.json); run `rankd ingest` or `rankd demo` first",
            data_dir.display()
        )
    })?;
    serde_json::from_str(&text).with_context(|| format!("corrupt manifest {}", path.display()))
}

/// Files of the data directory are replaced whole through this (see `crate::durable`).
pub use crate::durable::write_atomic;

/// The 64-bit key of a collapse group ([`super::simhash::stable_hasher`]).
fn key_hash(key: &str) -> u64 {
    use std::hash::Hasher;
    let mut h = super::simhash::stable_hasher();
    h.write(key.as_bytes());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30, N15: host case and default ports made one page two.
    #[test]
    fn page_keys_ignore_host_case_default_ports_query_and_fragment() {
        let dir = tempfile::tempdir().unwrap();
        let index = TextIndex::open_or_create(dir.path(), None).unwrap();
        let key = |url| index.page_key(url);
        let page = key("https://x.org/Guide/a");
        for same in [
            "HTTPS://X.ORG/Guide/a",
            "https://x.org:443/Guide/a",
            "https://X.org:443/Guide/a?utm=1#top",
            "https://x.org/Guide/./a",
        ] {
            assert_eq!(key(same), page, "{same}");
        }
        assert_eq!(key("http://x.org:80/"), key("http://x.org"));
        // Another port, scheme or path case is another page.
        for other in [
            "https://x.org:8443/Guide/a",
            "http://x.org/Guide/a",
            "https://x.org/guide/a",
        ] {
            assert_ne!(key(other), page, "{other}");
        }
        // Not an absolute URL: cut at the query as before.
        assert_eq!(key("docs/a.html?x#y"), "docs/a.html");
    }
}
