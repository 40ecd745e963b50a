//! A document's language as rankd keeps it: the primary subtag of a BCP 47 language tag
//! (RFC 5646 §2.2.1), lowercase — `en-US` and `EN` are `en`, `zh-Hans-CN` is `zh`. Finer
//! subtags (region, script) are dropped: `lang=` filters and the requester's preference
//! (`Accept-Language`) match on the language alone, as a user reading English reads `en-GB`.
//!
//! A language travels as a `u64` code ([`code`]): its ASCII letters packed big-endian, so the
//! index's `lang` column holds it exactly, a `lang=` filter is one term, and shards and the
//! root compare the same numbers.

/// The primary language subtag of `tag`, lowercase: 2 or 3 ASCII letters (ISO 639-1/2/3).
/// `None` for an empty tag, a private-use or grandfathered one (`x-…`, `i-…`), `und`
/// (undetermined), `mul` (several languages) and anything that is not a language tag.
pub fn normalize(tag: &str) -> Option<String> {
    let primary = tag.trim().split(['-', '_']).next()?;
    let ok = (2..=3).contains(&primary.len()) && primary.bytes().all(|b| b.is_ascii_alphabetic());
    let primary = primary.to_ascii_lowercase();
    (ok && primary != "und" && primary != "mul").then_some(primary)
}

/// The `u64` a normalised language is stored and compared as (its letters, big-endian).
pub fn code(lang: &str) -> u64 {
    lang.bytes().fold(0u64, |c, b| c << 8 | u64::from(b))
}

/// The language [`code`] packed, or `None` for a value no language packs to.
pub fn from_code(code: u64) -> Option<String> {
    let bytes: Vec<u8> = code
        .to_be_bytes()
        .into_iter()
        .skip_while(|&b| b == 0)
        .collect();
    let text = String::from_utf8(bytes).ok()?;
    normalize(&text).filter(|l| *l == text)
}

/// The languages an `Accept-Language` header (RFC 9110 §12.5.4) asks for, most wanted first:
/// by descending `q` (equal ones in the header's order), each once, normalised; `*`, `q=0`
/// and tags that are not languages are passed over.
pub fn preferences(accept_language: &str) -> Vec<String> {
    let mut wanted: Vec<(f32, String)> = Vec::new();
    for item in accept_language.split(',') {
        let mut parts = item.split(';');
        let tag = parts.next().unwrap_or("").trim();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q="))
            .filter_map(|q| q.trim().parse::<f32>().ok())
            .next()
            .unwrap_or(1.0);
        let Some(lang) = normalize(tag) else { continue };
        if q > 0.0 && !wanted.iter().any(|(_, l)| *l == lang) {
            wanted.push((q, lang));
        }
    }
    wanted.sort_by(|a, b| b.0.total_cmp(&a.0));
    wanted.into_iter().map(|(_, lang)| lang).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_become_their_primary_subtag() {
        for (tag, want) in [
            ("en", Some("en")),
            ("EN-us", Some("en")),
            ("zh-Hans-CN", Some("zh")),
            ("pt_BR", Some("pt")),
            (" ja ", Some("ja")),
            ("haw", Some("haw")),
            ("", None),
            ("x-klingon", None),
            ("i-navajo", None),
            ("und", None),
            ("mul", None),
            ("english", None),
            ("e1", None),
        ] {
            assert_eq!(normalize(tag).as_deref(), want, "{tag:?}");
        }
    }

    #[test]
    fn codes_round_trip_and_differ() {
        for lang in ["en", "ja", "zh", "haw"] {
            assert_eq!(from_code(code(lang)).as_deref(), Some(lang));
        }
        assert_ne!(code("en"), code("es"));
        assert_eq!(code("en"), 0x656e);
        assert_eq!(from_code(0), None);
        assert_eq!(from_code(u64::MAX), None);
    }

    #[test]
    fn accept_language_lists_languages_by_quality() {
        let langs = |h: &str| preferences(h);
        assert_eq!(langs("ja,en-US;q=0.9,en;q=0.8"), ["ja", "en"]);
        assert_eq!(langs("fr;q=0.5, de-CH;q=0.7"), ["de", "fr"]);
        assert_eq!(langs("*, es;q=0.1"), ["es"]);
        assert_eq!(langs("ko;q=0, en;q=0.2"), ["en"]);
        assert_eq!(langs("pt, en, pt-BR;q=0.9"), ["pt", "en"]);
        assert!(langs("*").is_empty() && langs("").is_empty());
    }
}
