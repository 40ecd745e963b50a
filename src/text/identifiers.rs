//! Identifier-aware tokenization (SPEC §1.1, analyzer `code`): names as users type them.
//!
//! Code documentation and product catalogues name things `HashMap`, `hash_map`,
//! `std::collections::HashMap` or `TcpListener`, and users type `hash map`, `hashmap` or
//! `HashMap`. A plain word tokenizer makes `HashMap` one word `hashmap`, which `hash map`
//! never matches, and `hash_map` two words, which `hashmap` never matches. This tokenizer
//! reads Unicode words as tantivy's `SimpleTokenizer` does, except that a run of letters,
//! digits and underscores is one *identifier*, split into its *parts* at underscores and at
//! case changes (`hashMap`, `HashMap` → `Hash`, `Map`; `HTTPServer` → `HTTP`, `Server`;
//! letters and digits stay together: `utf8`, `Ipv4Addr` → `Ipv4`, `Addr`). An identifier of
//! several parts also yields its *joined* form (`HashMap`, `hash_map` → `hashmap` once
//! lowercased), at the position of its first part, as Lucene's word-delimiter filter does
//! with `catenateWords`; the parts take consecutive positions. `::`, `.` and other
//! punctuation separate words, so a path yields each of its segments.
//!
//! Text without underscores or case changes inside words (English prose, Cranfield) yields
//! exactly `SimpleTokenizer`'s tokens and positions, so this analysis changes nothing for it.
//!
//! [`name_words`] and [`name_key`] are the same splitting without tantivy, for the reranker's
//! name features (`crate::features::name`).

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// The tokenizer of the `code` analyzer (see the module documentation).
#[derive(Clone, Default)]
pub struct IdentifierTokenizer {
    token: Token,
}

/// The token stream of [`IdentifierTokenizer`]: the tokens of the current identifier are
/// computed when it is reached and handed out one by one.
pub struct IdentifierTokenStream<'a> {
    text: &'a str,
    /// Byte offset where the search for the next identifier starts.
    cursor: usize,
    /// The current identifier's tokens `(from, to, position offset, joined)`, in emission
    /// order; `joined` tokens concatenate the parts within `from..to`.
    pending: Vec<(usize, usize, usize, bool)>,
    /// The current identifier's parts ([`parts`]), a buffer kept between identifiers.
    parts: Vec<(usize, usize)>,
    next: usize,
    /// The position of the current identifier's first part.
    base: usize,
    /// The position the next identifier's first part takes.
    next_position: usize,
    token: &'a mut Token,
}

impl Tokenizer for IdentifierTokenizer {
    type TokenStream<'a> = IdentifierTokenStream<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> IdentifierTokenStream<'a> {
        self.token.reset();
        IdentifierTokenStream {
            text,
            cursor: 0,
            pending: Vec::new(),
            parts: Vec::new(),
            next: 0,
            base: 0,
            next_position: 0,
            token: &mut self.token,
        }
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl IdentifierTokenStream<'_> {
    /// Moves to the next identifier with at least one part and queues its tokens; false at
    /// the end of the text.
    fn load_identifier(&mut self) -> bool {
        loop {
            let rest = &self.text[self.cursor..];
            let Some(start) = rest.find(is_word_char) else {
                self.cursor = self.text.len();
                return false;
            };
            let start = self.cursor + start;
            let end = self.text[start..]
                .find(|c| !is_word_char(c))
                .map_or(self.text.len(), |e| start + e);
            self.cursor = end;
            parts(&self.text[start..end], &mut self.parts);
            let parts = &self.parts;
            if parts.is_empty() {
                continue;
            }
            self.pending.clear();
            self.next = 0;
            if parts.len() > 1 {
                let (from, to) = (parts[0].0, parts[parts.len() - 1].1);
                self.pending.push((start + from, start + to, 0, true));
            }
            for (i, (from, to)) in parts.iter().enumerate() {
                self.pending.push((start + from, start + to, i, false));
            }
            self.base = self.next_position;
            self.next_position += parts.len();
            return true;
        }
    }
}

impl TokenStream for IdentifierTokenStream<'_> {
    fn advance(&mut self) -> bool {
        if self.next == self.pending.len() && !self.load_identifier() {
            return false;
        }
        let (from, to, offset, joined) = self.pending[self.next];
        self.next += 1;
        let token = &mut *self.token;
        token.text.clear();
        let slice = &self.text[from..to];
        if joined {
            token.text.extend(slice.chars().filter(|&c| c != '_'));
        } else {
            token.text.push_str(slice);
        }
        token.offset_from = from;
        token.offset_to = to;
        token.position = self.base + offset;
        token.position_length = 1;
        true
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

/// The parts of one identifier (letters, digits and underscores) as byte ranges, into `out`
/// (cleared first; the token stream reuses it): split at underscores, before an uppercase
/// letter that follows a lowercase letter or a digit, and before the last uppercase letter of
/// a run followed by a lowercase one (`HTTPServer`).
fn parts(ident: &str, out: &mut Vec<(usize, usize)>) {
    out.clear();
    if !ident.chars().any(|c| c == '_' || c.is_uppercase()) {
        // A plain word (most of prose): one part, without the walk below.
        if !ident.is_empty() {
            out.push((0, ident.len()));
        }
        return;
    }
    let mut start: Option<usize> = None;
    let mut prev = '_';
    let mut chars = ident.char_indices().peekable();
    while let Some((offset, c)) = chars.next() {
        if c == '_' {
            if let Some(s) = start.take() {
                out.push((s, offset));
            }
        } else if let Some(s) = start {
            let next = chars.peek().map(|&(_, c)| c);
            let boundary = c.is_uppercase()
                && (prev.is_lowercase()
                    || prev.is_numeric()
                    || (prev.is_uppercase() && next.is_some_and(char::is_lowercase)));
            if boundary {
                out.push((s, offset));
                start = Some(offset);
            }
        } else {
            start = Some(offset);
        }
        prev = c;
    }
    if let Some(s) = start {
        out.push((s, ident.len()));
    }
}

/// The words of a name or query, lowercased: every identifier's parts (no joined forms), in
/// order. `std::collections::HashMap` → `std`, `collections`, `hash`, `map`.
pub fn name_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut buffer = Vec::new();
    for ident in text.split(|c: char| !is_word_char(c)) {
        parts(ident, &mut buffer);
        words.extend(
            buffer
                .iter()
                .map(|&(from, to)| ident[from..to].to_lowercase()),
        );
    }
    words
}

/// A name reduced to what users vary least: its letters and digits, lowercased, without
/// separators. `HashMap`, `hash_map`, `hash map` and `Hash-Map` → `hashmap`.
pub fn name_key(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::tokenizer::SimpleTokenizer;

    /// `(text, position)` of every token.
    fn tokens(text: &str) -> Vec<(String, usize)> {
        let mut t = IdentifierTokenizer::default();
        let mut stream = t.token_stream(text);
        let mut out = Vec::new();
        while let Some(token) = stream.next() {
            assert_eq!(
                text[token.offset_from..token.offset_to].replace('_', ""),
                token.text.replace('_', ""),
                "offsets of {token:?}"
            );
            out.push((token.text.clone(), token.position));
        }
        out
    }

    fn texts(text: &str) -> Vec<String> {
        tokens(text).into_iter().map(|t| t.0).collect()
    }

    #[test]
    fn splits_camel_snake_and_paths_and_joins_the_parts() {
        assert_eq!(
            tokens("HashMap::new"),
            vec![
                ("HashMap".into(), 0),
                ("Hash".into(), 0),
                ("Map".into(), 1),
                ("new".into(), 2)
            ]
        );
        assert_eq!(texts("hash_map"), ["hashmap", "hash", "map"]);
        assert_eq!(texts("hashMap"), ["hashMap", "hash", "Map"]);
        assert_eq!(
            texts("std::collections::HashMap"),
            ["std", "collections", "HashMap", "Hash", "Map"]
        );
        assert_eq!(texts("HTTPServer"), ["HTTPServer", "HTTP", "Server"]);
        assert_eq!(texts("Ipv4Addr utf8"), ["Ipv4Addr", "Ipv4", "Addr", "utf8"]);
        assert_eq!(texts("os.path.join"), ["os", "path", "join"]);
        assert_eq!(
            tokens("read_to_string(p)"),
            vec![
                ("readtostring".into(), 0),
                ("read".into(), 0),
                ("to".into(), 1),
                ("string".into(), 2),
                ("p".into(), 3)
            ]
        );
        assert_eq!(texts("__init__ _ x"), ["init", "x"]);
        assert_eq!(texts("ÉtéChaud"), ["ÉtéChaud", "Été", "Chaud"]);
    }

    #[test]
    fn prose_tokenizes_exactly_as_the_simple_tokenizer() {
        let text = "The flows of heated GASES, in a tube: 3.5 m/s (NACA-TN 1234); école.";
        let mut simple = SimpleTokenizer::default();
        let mut stream = simple.token_stream(text);
        let mut expected = Vec::new();
        while let Some(t) = stream.next() {
            expected.push((t.text.clone(), t.position));
        }
        assert_eq!(tokens(text), expected);
    }

    #[test]
    fn name_words_and_keys_ignore_spelling() {
        assert_eq!(
            name_words("std::collections::HashMap"),
            ["std", "collections", "hash", "map"]
        );
        for spelling in ["HashMap", "hash_map", "hash map", "hashmap", "Hash-Map"] {
            assert_eq!(name_key(spelling), "hashmap", "{spelling}");
        }
    }
}
