//! SimHash fingerprints of a document's visible text (SPEC §8; Charikar 2002), computed at
//! indexing and stored as a fast field, and the near-duplicate test of Manku, Jain and
//! Das Sarma (WWW 2007): fingerprints within 3 bits of each other.
//!
//! Written here rather than taken from a crate: the `simhash` crates hash single words with
//! std's `DefaultHasher`, whose output may change between Rust releases — fingerprints
//! stored in an index must not. This one hashes word 3-shingles with SipHash-1-3 under fixed
//! keys (the `siphasher` crate), which is stable.

use std::hash::Hasher;

use super::config::Analyzer;

/// Near-duplicates differ in at most this many of the 64 bits (Manku et al. 2007).
pub(crate) const NEAR_DUPLICATE_BITS: u32 = 3;

/// Words per shingle.
const SHINGLE: usize = 3;

/// The fixed 64-bit hash of what the index stores as keys and fingerprints: SipHash-1-3 with
/// keys (0, 0), stable across Rust releases (std's `DefaultHasher` is not).
pub(crate) fn stable_hasher() -> siphasher::sip::SipHasher13 {
    siphasher::sip::SipHasher13::new_with_keys(0, 0)
}

/// The hash of one shingle: [`stable_hasher`] over the words joined by single spaces.
fn shingle_hash(words: &[String]) -> u64 {
    let mut h = stable_hasher();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            h.write(b" ");
        }
        h.write(w.as_bytes());
    }
    h.finish()
}

/// The 64-bit SimHash of `text`: words are Unicode words lowercased (the `plain` analyzer),
/// each word 3-shingle (every occurrence) votes +1 on the bits its hash has set and −1 on the
/// others, and bit b of the fingerprint is set when its vote is positive. A text of one or
/// two words is one shingle; `None` for a text without words.
pub fn simhash(text: &str) -> Option<u64> {
    let words = super::schema::tokens(Analyzer::Plain, text);
    if words.is_empty() {
        return None;
    }
    let mut votes = [0i32; 64];
    let mut add = |h: u64| {
        for (b, v) in votes.iter_mut().enumerate() {
            *v += (((h >> b) & 1) as i32) * 2 - 1;
        }
    };
    if words.len() < SHINGLE {
        add(shingle_hash(&words));
    } else {
        for shingle in words.windows(SHINGLE) {
            add(shingle_hash(shingle));
        }
    }
    Some(
        votes
            .iter()
            .enumerate()
            .filter(|(_, &v)| v > 0)
            .fold(0u64, |f, (b, _)| f | (1 << b)),
    )
}

/// Bits in which two fingerprints differ.
pub fn distance(a: u64, b: u64) -> u32 {
    (a ^ b).count_ones()
}

/// Whether two fingerprints are near-duplicates (SPEC §8).
pub fn near_duplicates(a: u64, b: u64) -> bool {
    distance(a, b) <= NEAR_DUPLICATE_BITS
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition bit by bit, with the hash computed by a second route (one `write` of the
    /// joined string).
    fn brute_force(text: &str) -> u64 {
        let words = super::super::schema::tokens(Analyzer::Plain, text);
        let shingles: Vec<String> = if words.len() < SHINGLE {
            vec![words.join(" ")]
        } else {
            words.windows(SHINGLE).map(|w| w.join(" ")).collect()
        };
        let hashes: Vec<u64> = shingles
            .iter()
            .map(|s| {
                let mut h = siphasher::sip::SipHasher13::new_with_keys(0, 0);
                h.write(s.as_bytes());
                h.finish()
            })
            .collect();
        let mut fingerprint = 0u64;
        for b in 0..64 {
            let ones = hashes.iter().filter(|h| (*h >> b) & 1 == 1).count() as i64;
            let zeros = hashes.len() as i64 - ones;
            if ones > zeros {
                fingerprint |= 1 << b;
            }
        }
        fingerprint
    }

    #[test]
    fn fingerprints_follow_the_definition() {
        for text in [
            "one",
            "two words",
            "Read a file line by line with BufReader and lines()",
            "the the the the the",
            "Ünïcode wörds, punctuation! and MIXED case: 42 times",
        ] {
            assert_eq!(simhash(text), Some(brute_force(text)), "{text}");
        }
        assert_eq!(simhash(""), None);
        assert_eq!(simhash(" ,;. "), None);
    }

    #[test]
    fn case_and_punctuation_do_not_change_the_fingerprint() {
        assert_eq!(
            simhash("Struct HashMap: a hash map."),
            simhash("struct hashmap a HASH map")
        );
    }

    #[test]
    fn a_small_edit_of_a_long_text_stays_near_and_other_texts_do_not() {
        let base: String = (0..400).map(|i| format!("word{} ", i % 97)).collect();
        let edited = base.replacen("word5 ", "changed ", 1);
        let (a, b) = (simhash(&base).unwrap(), simhash(&edited).unwrap());
        assert!(near_duplicates(a, b), "distance {}", distance(a, b));
        let other: String = (0..400).map(|i| format!("term{} ", i % 89)).collect();
        let c = simhash(&other).unwrap();
        assert!(!near_duplicates(a, c), "distance {}", distance(a, c));
    }
}
