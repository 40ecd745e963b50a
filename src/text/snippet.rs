//! Snippets that cost what they show.
//!
//! Cutting a hit's snippet from its stored body would read the whole document from the doc
//! store (Rust API pages run to megabytes) and re-analyse tens of kilobytes of it per hit:
//! most of a search's time. The work happens once instead, at indexing: the document's *prose*
//! (the paragraphs and list items of an HTML page, not its code blocks; the body for other
//! sources) is cut into passages of at most [`PASSAGE_CHARS`] characters at sentence or word
//! boundaries, at most [`SOURCE_BYTES`] of them are kept, and each passage gets a 64-bit
//! signature: one bit per analysed term (SPEC §1.1's analysis, so stems match the query's).
//! The encoded passages end each document's value of the fast bytes column `hit`
//! (`crate::text::columns`), read per hit without touching the stored document.
//!
//! At query time the best passage is the one whose signature covers the most query weight
//! (rarer terms weigh more, as in tantivy's `SnippetGenerator`: `1 / (1 + df)`), earliest on
//! ties; only that passage is analysed, to put `<b>` around the terms that really match (a
//! signature bit can be shared by two terms, so the highlighting is the exact check). A page
//! whose passages match no query term shows its first passage: the start of its prose.
//!
//! The signature hash is FNV-1a, written here rather than taken from a crate because it is
//! part of the index format: it must never change with a dependency's version.

use tantivy::tokenizer::TextAnalyzer;

/// Most characters in one passage (and so in one snippet).
pub(crate) const PASSAGE_CHARS: usize = 200;
/// Most bytes of prose kept per document for its snippets.
pub(crate) const SOURCE_BYTES: usize = 4096;

/// The bit of one analysed term in a passage signature.
pub(crate) fn term_bit(term: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in term.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    1u64 << (h % 64)
}

/// Cuts `prose` (segments separated by newlines: paragraphs, list items) into passages of at
/// most [`PASSAGE_CHARS`] characters, sentences kept whole where they fit, at most
/// [`SOURCE_BYTES`] in all.
pub fn passages(prose: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut total = 0usize;
    'segments: for segment in prose.split('\n') {
        let words: Vec<&str> = segment.split_whitespace().collect();
        let mut current = String::new();
        let mut chars = 0usize;
        for word in &words {
            let w = word.chars().count();
            // A sentence end inside the passage's last 40% is a good place to stop.
            let sentence_end = current.ends_with(['.', '!', '?', ':', ';']);
            let full = chars + 1 + w > PASSAGE_CHARS;
            if !current.is_empty() && (full || (sentence_end && chars > PASSAGE_CHARS * 3 / 5)) {
                total += current.len();
                out.push(std::mem::take(&mut current));
                chars = 0;
                if total >= SOURCE_BYTES {
                    break 'segments;
                }
            }
            if !current.is_empty() {
                current.push(' ');
                chars += 1;
            }
            if w > PASSAGE_CHARS {
                // One giant "word" (a URL, a hash): keep its start.
                current.extend(word.chars().take(PASSAGE_CHARS - chars));
                chars = PASSAGE_CHARS;
            } else {
                current.push_str(word);
                chars += w;
            }
        }
        if !current.is_empty() {
            total += current.len();
            out.push(current);
            if total >= SOURCE_BYTES {
                break;
            }
        }
    }
    out
}

/// The snippet column's value for a document: each passage as its signature (8 bytes, little
/// endian), its length (2 bytes) and its UTF-8 text.
pub fn encode(prose: &str, analyzer: &mut TextAnalyzer) -> Vec<u8> {
    let mut out = Vec::new();
    for passage in passages(prose) {
        let mut signature = 0u64;
        let mut stream = analyzer.token_stream(&passage);
        while stream.advance() {
            signature |= term_bit(&stream.token().text);
        }
        out.extend_from_slice(&signature.to_le_bytes());
        out.extend_from_slice(&(passage.len() as u16).to_le_bytes());
        out.extend_from_slice(passage.as_bytes());
    }
    out
}

/// The passages of an encoded value with their signatures; stops at the first malformed one.
pub fn decode(bytes: &[u8]) -> impl Iterator<Item = (u64, &str)> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.len() < 10 {
            return None;
        }
        let signature = u64::from_le_bytes(rest[..8].try_into().expect("8 bytes"));
        let len = usize::from(u16::from_le_bytes([rest[8], rest[9]]));
        let text = rest.get(10..10 + len)?;
        rest = &rest[10 + len..];
        Some((signature, std::str::from_utf8(text).ok()?))
    })
}

/// The query side: each analysed query term with its signature bit and weight.
#[derive(Debug, Clone, Default)]
pub(crate) struct SnippetQuery {
    terms: Vec<(String, u64, f32)>,
}

impl SnippetQuery {
    /// `terms`: the query's analysed terms with their weights.
    pub fn new(terms: impl IntoIterator<Item = (String, f32)>) -> Self {
        SnippetQuery {
            terms: terms
                .into_iter()
                .map(|(t, w)| {
                    let bit = term_bit(&t);
                    (t, bit, w)
                })
                .collect(),
        }
    }

    /// The best passage of an encoded value, highlighted as HTML (`None` without passages).
    pub fn snippet(&self, encoded: &[u8], analyzer: &mut TextAnalyzer) -> Option<String> {
        let mut best: Option<(f32, &str)> = None;
        for (signature, text) in decode(encoded) {
            let score: f32 = self
                .terms
                .iter()
                .filter(|(_, bit, _)| signature & bit != 0)
                .map(|(_, _, w)| w)
                .sum();
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, text));
            }
        }
        let (_, passage) = best?;
        Some(self.highlight(passage, analyzer))
    }

    /// `passage` as HTML, every token that analyses to a query term in `<b>`.
    pub fn highlight(&self, passage: &str, analyzer: &mut TextAnalyzer) -> String {
        let mut out = String::with_capacity(passage.len() + 32);
        let mut at = 0usize;
        let mut stream = analyzer.token_stream(passage);
        while stream.advance() {
            let token = stream.token();
            if !self.terms.iter().any(|(t, _, _)| *t == token.text) {
                continue;
            }
            let (from, to) = (token.offset_from, token.offset_to);
            if from < at || to > passage.len() {
                continue;
            }
            escape_into(&passage[at..from], &mut out);
            out.push_str("<b>");
            escape_into(&passage[from..to], &mut out);
            out.push_str("</b>");
            at = to;
        }
        escape_into(&passage[at..], &mut out);
        out
    }
}

/// HTML-escapes `s` onto `out` (text content: `&`, `<`, `>`).
fn escape_into(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::config::Analyzer;
    use crate::text::schema::analyzer;

    #[test]
    fn passages_respect_the_limits_and_keep_every_word_in_order() {
        let sentence = "A contiguous growable array type, written as Vec<T>. ";
        let prose = format!("{}\nshort item\n{}", sentence.repeat(30), "x".repeat(500));
        let ps = passages(&prose);
        assert!(ps.iter().all(|p| p.chars().count() <= PASSAGE_CHARS));
        let total: usize = ps.iter().map(String::len).sum();
        assert!(total <= SOURCE_BYTES + PASSAGE_CHARS * 4);
        // Nothing reordered or lost before the budget: the words come back in order.
        let words: Vec<&str> = ps.iter().flat_map(|p| p.split(' ')).collect();
        let expected: Vec<&str> = prose.split_whitespace().collect();
        assert_eq!(words[..expected.len() - 1], expected[..expected.len() - 1]);
        assert!(ps.contains(&"short item".to_string()));
        // Sentences end passages when they can.
        assert!(ps[0].ends_with('.'), "{:?}", ps[0]);
    }

    #[test]
    fn the_source_budget_caps_long_prose() {
        let prose = "word ".repeat(10_000);
        let ps = passages(&prose);
        let total: usize = ps.iter().map(String::len).sum();
        assert!((SOURCE_BYTES..SOURCE_BYTES + PASSAGE_CHARS * 4).contains(&total));
    }

    #[test]
    fn encode_and_decode_round_trip() {
        let mut a = analyzer(Analyzer::EnStem);
        let prose =
            "Creates an empty vector.\nReserves capacity for at least additional more elements.";
        let encoded = encode(prose, &mut a);
        let decoded: Vec<(u64, &str)> = decode(&encoded).collect();
        assert_eq!(decoded.len(), 2);
        assert_eq!(
            decoded[1].1,
            "Reserves capacity for at least additional more elements."
        );
        // The signature holds the analysed (stemmed) terms, not the surface forms.
        assert_ne!(decoded[1].0 & term_bit("reserv"), 0);
        assert_ne!(decoded[1].0 & term_bit("capac"), 0);
        assert!(
            decode(&encoded[..encoded.len() - 1]).count() == 1,
            "a torn value stops"
        );
    }

    #[test]
    fn the_best_passage_wins_and_is_highlighted_exactly() {
        let mut a = analyzer(Analyzer::EnStem);
        let prose = "Creates an empty vector.\nThe vector will be able to hold at least capacity elements without reallocating: see with_capacity.\n<script> & more";
        let encoded = encode(prose, &mut a);
        let q = SnippetQuery::new([("capac".to_string(), 1.0), ("vector".to_string(), 0.1)]);
        let s = q.snippet(&encoded, &mut a).unwrap();
        assert_eq!(
            s,
            "The <b>vector</b> will be able to hold at least <b>capacity</b> elements without reallocating: see with_<b>capacity</b>."
        );
        // No match: the start of the prose, escaped.
        let none = SnippetQuery::new([("zebra".to_string(), 1.0)]);
        assert_eq!(
            none.snippet(&encoded, &mut a).unwrap(),
            "Creates an empty vector."
        );
        let esc = SnippetQuery::new([("script".to_string(), 1.0)]);
        assert_eq!(
            esc.snippet(&encoded, &mut a).unwrap(),
            "&lt;<b>script</b>&gt; &amp; more"
        );
        assert_eq!(q.snippet(&[], &mut a), None);
    }
}
