//! The tantivy schema and the analyzers (SPEC §1.1).

use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED, STORED, STRING,
};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    TextAnalyzerBuilder, Tokenizer, TokenizerManager,
};

use super::config::{Analyzer, IndexConfig, TEXT_FIELDS};
use super::identifiers::IdentifierTokenizer;

/// Handles of every field of the schema.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub id: Field,
    pub title: Field,
    pub name: Field,
    pub headings: Field,
    pub body: Field,
    pub anchor: Field,
    pub url: Field,
    pub all: Field,
    pub links: Field,
    pub published_at: Field,
    /// URL shape, computed at indexing for the reranker's features (SPEC §3.1).
    pub url_depth: Field,
    pub url_length: Field,
    pub extra: Field,
    /// The document's name alone (the `name` field also indexes its kind), a fast column
    /// the name features read (`crate::features::name`).
    pub name_column: Field,
    /// SimHash of the visible text (SPEC §8), where it has words.
    pub simhash: Field,
    /// Collapse keys, 64-bit hashes: the page key (URL rewritten by the configured page
    /// rules), the URL's host, and the JSONL `group` field.
    pub page: Field,
    pub site: Field,
    pub group: Field,
    /// SPEC §1.8's social signals, from the JSONL fields of the same names.
    pub votes_up: Field,
    pub votes_down: Field,
    pub rating: Field,
    pub rating_count: Field,
    /// The document's language as a `crate::corpus::lang::code`: a term for `lang=`, a
    /// column for the requester's preference among translations.
    pub lang: Field,
    /// What a hit shows of the document, encoded by `crate::text::columns::encode_hit`: id,
    /// title, URL and snippet passages, a fast bytes column.
    pub hit: Field,
}

impl Fields {
    /// The text field called `name` (one of [`TEXT_FIELDS`]).
    pub fn text(&self, name: &str) -> Option<Field> {
        Some(match name {
            "title" => self.title,
            "name" => self.name,
            "headings" => self.headings,
            "body" => self.body,
            "anchor" => self.anchor,
            "url" => self.url,
            "all" => self.all,
            _ => return None,
        })
    }
}

/// Builds the schema: text fields indexed with positions (SPEC §1.7 needs them) under the
/// analyzer the configuration names; `all` is indexed only, the others are stored too.
pub(crate) fn build_schema(config: &IndexConfig) -> (Schema, Fields) {
    let mut b = Schema::builder();
    let id = b.add_text_field("id", STRING | STORED | FAST);
    let mut text = |name: &str, stored: bool, fast: bool| {
        let indexing = TextFieldIndexing::default()
            .set_tokenizer(config.field(name).analyzer.name())
            .set_index_option(IndexRecordOption::WithFreqsAndPositions);
        let mut options = TextOptions::default().set_indexing_options(indexing);
        if stored {
            options = options.set_stored();
        }
        if fast {
            // The whole value as one column entry: hits and reranker features read a
            // candidate's title and URL without loading its stored document.
            options = options.set_fast("raw");
        }
        b.add_text_field(name, options)
    };
    let title = text("title", true, true);
    let name = text("name", true, false);
    let headings = text("headings", true, false);
    let body = text("body", true, false);
    let anchor = text("anchor", true, false);
    let url = text("url", true, true);
    let all = text("all", false, false);
    debug_assert_eq!(TEXT_FIELDS.len(), 7);
    let name_column = b.add_text_field("name_column", TextOptions::default().set_fast("raw"));
    let links = b.add_text_field("links", STORED);
    let published_at = b.add_i64_field("published_at", INDEXED | STORED | FAST);
    let url_depth = b.add_u64_field("url_depth", FAST);
    let url_length = b.add_u64_field("url_length", FAST);
    let extra = b.add_json_field("extra", STORED);
    let hit = b.add_bytes_field("hit", FAST);
    let simhash = b.add_u64_field("simhash", FAST);
    let page = b.add_u64_field("page", FAST);
    let site = b.add_u64_field("site", FAST);
    let group = b.add_u64_field("group", FAST);
    let votes_up = b.add_u64_field("votes_up", FAST);
    let votes_down = b.add_u64_field("votes_down", FAST);
    let rating = b.add_f64_field("rating", FAST);
    let rating_count = b.add_u64_field("rating_count", FAST);
    let lang = b.add_u64_field("lang", INDEXED | STORED | FAST);
    let fields = Fields {
        id,
        title,
        name,
        headings,
        body,
        anchor,
        url,
        all,
        links,
        published_at,
        url_depth,
        url_length,
        extra,
        name_column,
        simhash,
        page,
        site,
        group,
        votes_up,
        votes_down,
        rating,
        rating_count,
        lang,
        hit,
    };
    (b.build(), fields)
}

/// Words longer than this many bytes are dropped (they are almost always base64 or hashes).
const MAX_TOKEN_BYTES: usize = 64;

/// The analysis chain of SPEC §1.1 for one analyzer setting.
pub fn analyzer(kind: Analyzer) -> TextAnalyzer {
    match kind {
        Analyzer::Plain => words(SimpleTokenizer::default()).build(),
        Analyzer::En => words(SimpleTokenizer::default())
            .filter(english_stop_words())
            .build(),
        Analyzer::EnStem => english_stems(SimpleTokenizer::default()),
        Analyzer::Code => english_stems(IdentifierTokenizer::default()),
    }
}

/// `tokenizer`'s words, long ones dropped, lowercased.
fn words<T: Tokenizer>(tokenizer: T) -> TextAnalyzerBuilder<impl Tokenizer> {
    TextAnalyzer::builder(tokenizer)
        .filter(RemoveLongFilter::limit(MAX_TOKEN_BYTES))
        .filter(LowerCaser)
}

/// [`words`] without English stop words, stemmed.
fn english_stems<T: Tokenizer>(tokenizer: T) -> TextAnalyzer {
    words(tokenizer)
        .filter(english_stop_words())
        .filter(Stemmer::new(Language::English))
        .build()
}

fn english_stop_words() -> StopWordFilter {
    StopWordFilter::new(Language::English).expect("tantivy ships an English stop-word list")
}

/// Registers every analyzer under its name so tantivy and rankd analyse text identically.
pub(crate) fn register_analyzers(manager: &TokenizerManager) {
    for kind in Analyzer::ALL {
        manager.register(kind.name(), analyzer(kind));
    }
}

/// The tokens `text` yields under `kind`, in order.
pub fn tokens(kind: Analyzer, text: &str) -> Vec<String> {
    let mut analyzer = analyzer(kind);
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while let Some(token) = stream.next() {
        out.push(token.text.clone());
    }
    out
}

/// Path segments of a URL (`https://h/a/b.html` → 2); for a bare path, its segments.
pub fn url_depth(url: &str) -> usize {
    let path = match url::Url::parse(url) {
        Ok(u) => u.path().to_string(),
        Err(_) => url.to_string(),
    };
    path.split('/').filter(|s| !s.is_empty()).count()
}

#[cfg(test)]
mod tests {

    #[test]
    fn url_depth_counts_path_segments() {
        use super::url_depth;
        assert_eq!(
            url_depth("https://doc.rust-lang.org/std/vec/struct.Vec.html"),
            3
        );
        assert_eq!(url_depth("https://example.org/"), 0);
        assert_eq!(url_depth("https://example.org"), 0);
        assert_eq!(url_depth("a/b/"), 2);
        assert_eq!(url_depth(""), 0);
    }
    use super::*;

    #[test]
    fn english_chain_stems_and_drops_stop_words() {
        assert_eq!(
            tokens(Analyzer::EnStem, "The Flows of heated GASES, in a tube"),
            vec!["flow", "heat", "gase", "tube"]
        );
        assert_eq!(tokens(Analyzer::En, "The flows"), vec!["flows"]);
        assert_eq!(tokens(Analyzer::Plain, "The flows"), vec!["the", "flows"]);
    }

    #[test]
    fn code_chain_matches_a_name_however_it_is_typed() {
        let item = "std::collections::HashMap";
        let indexed = tokens(Analyzer::Code, item);
        for typed in [
            "HashMap",
            "hash_map",
            "hash map",
            "hashmap",
            "std::collections::HashMap",
        ] {
            let query = tokens(Analyzer::Code, typed);
            assert!(!query.is_empty());
            for term in &query {
                assert!(
                    indexed.contains(term),
                    "{typed}: `{term}` not in {indexed:?}"
                );
            }
        }
        assert_eq!(
            tokens(Analyzer::Code, "TcpListener::read_to_string"),
            ["tcplisten", "tcp", "listen", "readtostr", "read", "string"]
        );
        // Prose reads as under `en_stem`.
        let prose = "The Flows of heated GASES, in a tube at Mach 3.5";
        assert_eq!(
            tokens(Analyzer::Code, prose),
            tokens(Analyzer::EnStem, prose)
        );
    }
}
