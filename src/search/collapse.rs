//! Collapsing (SPEC §8; Elasticsearch's field collapsing): a ranked list keeps the best hit of
//! each group and counts the hits each kept one hides.
//!
//! Groups are read from fast fields written at indexing (`crate::text::columns`): the page
//! key (the URL rewritten by the index configuration's page rules: translated copies of a
//! page share it), the URL's host, the JSONL `group` field, and near-duplicate text (SimHash
//! fingerprints within 3 bits, Manku et al. 2007). Several keys combine: a hit is hidden when
//! it shares any of them with a hit kept above it. A document without a key (no URL, no
//! `group`, no words) is never hidden by that key.
//!
//! Language versions of one page share its page key (the page rules, or `hreflang`). Within
//! such a group the requester's language wins, as a search engine serving `hreflang`
//! alternates shows the user's version in the group's place: a hit in a more preferred
//! language takes the place of the group's shown hit (its best hit at first), whatever their
//! scores. A hit of unknown language ranks after the preferred languages and before any
//! other (a site may mark its translations only). So an English query never sees a
//! translation where the English original is in the window.
//!
//! Near-duplicates are found by an exact scan of the kept hits (SPEC §8 allows it where the
//! set is small: a window holds at most 1000 hits, so at most 1000 × 1000 XOR-popcounts).

use std::collections::HashMap;
use std::fmt;

use crate::text::columns::CollapseKeys;
use crate::text::simhash;

/// What hits are grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CollapseKey {
    /// The page key (URL rewritten by `collapse.page_rules`).
    Page,
    /// The URL's host.
    Site,
    /// The JSONL `group` field.
    Group,
    /// SimHash within [`simhash::NEAR_DUPLICATE_BITS`] bits.
    NearDuplicate,
}

impl CollapseKey {
    pub const ALL: [CollapseKey; 4] = [
        CollapseKey::Page,
        CollapseKey::Site,
        CollapseKey::Group,
        CollapseKey::NearDuplicate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CollapseKey::Page => "page",
            CollapseKey::Site => "site",
            CollapseKey::Group => "group",
            CollapseKey::NearDuplicate => "near_duplicate",
        }
    }

    /// A comma-separated list of keys (`page,near_duplicate`); an empty list or `none` alone
    /// is no collapsing. Unknown or repeated names, and `none` beside a key, are refused,
    /// naming them.
    pub fn parse_list(text: &str) -> Result<Vec<CollapseKey>, String> {
        let names: Vec<&str> = text
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .collect();
        if names.contains(&"none") && names.len() > 1 {
            return Err(format!(
                "`none` (no collapsing) cannot be combined with other keys: `{text}`"
            ));
        }
        let mut keys = Vec::new();
        for name in names {
            if name == "none" {
                continue;
            }
            let key = CollapseKey::ALL
                .into_iter()
                .find(|k| k.name() == name)
                .ok_or_else(|| {
                    format!(
                        "cannot collapse on `{name}`: no such field (known: page, site, group, near_duplicate, none)"
                    )
                })?;
            if keys.contains(&key) {
                return Err(format!("`{name}` is given twice"));
            }
            keys.push(key);
        }
        Ok(keys)
    }
}

impl fmt::Display for CollapseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Walks `keys` (one per hit, best hit first) and returns the positions of the hits kept,
/// each with how many other hits of the window it hides (a hidden hit counts once, for the
/// first kept hit it matches), in the order of the groups' best hits. With `prefer`
/// (`crate::corpus::lang::code`s, most preferred first), a group formed by the page key shows
/// its first hit in the most preferred language in its place (module doc).
pub fn collapse(keys: &[CollapseKeys], by: &[CollapseKey], prefer: &[u64]) -> Vec<(usize, usize)> {
    let mut kept: Vec<(usize, usize)> = Vec::new();
    // How much a hit's language is wanted: its place in `prefer`; unknown, after those; a
    // language not listed, last.
    let rank = |k: &CollapseKeys| match k.lang {
        None => prefer.len(),
        Some(l) => prefer
            .iter()
            .position(|&p| p == l)
            .unwrap_or(prefer.len() + 1),
    };
    let by_page = by.contains(&CollapseKey::Page);
    // Exact keys: kept hit (index into `kept`) per (key kind, value).
    let mut owners: HashMap<(CollapseKey, u64), usize> = HashMap::new();
    let near = by.contains(&CollapseKey::NearDuplicate);
    let mut fingerprints: Vec<(u64, usize)> = Vec::new();
    for (position, k) in keys.iter().enumerate() {
        // The first kept hit sharing any key with this one.
        let mut owner: Option<usize> = None;
        for &key in by {
            if let Some(&o) = value_of(k, key).and_then(|v| owners.get(&(key, v))) {
                owner = Some(owner.map_or(o, |m| m.min(o)));
            }
        }
        if near {
            if let Some(h) = k.simhash {
                if let Some(&(_, o)) = fingerprints
                    .iter()
                    .find(|(f, _)| simhash::near_duplicates(*f, h))
                {
                    owner = Some(owner.map_or(o, |m| m.min(o)));
                }
            }
        }
        match owner {
            Some(o) => {
                kept[o].1 += 1;
                // The preferred version takes its page's place; the owner found by the page
                // key, so the hits are versions of one page.
                let shown = &keys[kept[o].0];
                if by_page
                    && !prefer.is_empty()
                    && k.page.is_some()
                    && k.page == shown.page
                    && rank(k) < rank(shown)
                {
                    kept[o].0 = position;
                    for &key in by {
                        if let Some(v) = value_of(k, key) {
                            owners.entry((key, v)).or_insert(o);
                        }
                    }
                    if near {
                        if let Some(h) = k.simhash {
                            fingerprints.push((h, o));
                        }
                    }
                }
            }
            None => {
                let o = kept.len();
                kept.push((position, 0));
                for &key in by {
                    if let Some(v) = value_of(k, key) {
                        owners.insert((key, v), o);
                    }
                }
                if near {
                    if let Some(h) = k.simhash {
                        fingerprints.push((h, o));
                    }
                }
            }
        }
    }
    kept
}

/// What [`collapse`] reads of `keys` when it collapses `by`: the other keys blanked, and the
/// language only with the page key (it picks a page's version). A shard sends its
/// candidates' keys so ([`crate::cluster::wire::QueryCall::collapse`]): the window's keys
/// are most of the bytes a collapsed first phase moves.
pub fn keys_read(keys: CollapseKeys, by: &[CollapseKey]) -> CollapseKeys {
    let has = |key| by.contains(&key);
    CollapseKeys {
        simhash: keys.simhash.filter(|_| has(CollapseKey::NearDuplicate)),
        page: keys.page.filter(|_| has(CollapseKey::Page)),
        site: keys.site.filter(|_| has(CollapseKey::Site)),
        group: keys.group.filter(|_| has(CollapseKey::Group)),
        lang: keys.lang.filter(|_| has(CollapseKey::Page)),
    }
}

/// A hit's exact key of kind `key` (near-duplicates have none: they are compared by distance).
fn value_of(k: &CollapseKeys, key: CollapseKey) -> Option<u64> {
    match key {
        CollapseKey::Page => k.page,
        CollapseKey::Site => k.site,
        CollapseKey::Group => k.group,
        CollapseKey::NearDuplicate => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(page: Option<u64>, simhash: Option<u64>) -> CollapseKeys {
        CollapseKeys {
            page,
            simhash,
            ..CollapseKeys::default()
        }
    }

    /// The definition, pair by pair: a hit is kept unless some kept hit above it shares a key.
    fn brute_force(keys: &[CollapseKeys], by: &[CollapseKey]) -> Vec<(usize, usize)> {
        let same = |a: &CollapseKeys, b: &CollapseKeys| {
            by.iter().any(|k| match k {
                CollapseKey::Page => a.page.is_some() && a.page == b.page,
                CollapseKey::Site => a.site.is_some() && a.site == b.site,
                CollapseKey::Group => a.group.is_some() && a.group == b.group,
                CollapseKey::NearDuplicate => match (a.simhash, b.simhash) {
                    (Some(x), Some(y)) => (x ^ y).count_ones() <= 3,
                    _ => false,
                },
            })
        };
        let mut kept: Vec<(usize, usize)> = Vec::new();
        for i in 0..keys.len() {
            match kept.iter_mut().find(|(j, _)| same(&keys[*j], &keys[i])) {
                Some(k) => k.1 += 1,
                None => kept.push((i, 0)),
            }
        }
        kept
    }

    #[test]
    fn keeps_the_best_of_each_group_and_counts_the_rest() {
        let list = [
            keys(Some(1), Some(0b0000)),
            keys(Some(2), Some(0xFFFF_0000)),
            keys(Some(1), None),
            keys(None, Some(0b0111)), // 3 bits from the first
            keys(None, Some(0b1111)), // 4 bits from the first: kept
            keys(None, None),
        ];
        assert_eq!(
            collapse(&list, &[CollapseKey::Page], &[]),
            [(0, 1), (1, 0), (3, 0), (4, 0), (5, 0)]
        );
        assert_eq!(
            collapse(&list, &[CollapseKey::Page, CollapseKey::NearDuplicate], &[]),
            [(0, 2), (1, 0), (4, 0), (5, 0)]
        );
        assert_eq!(collapse(&list, &[], &[]).len(), list.len());
    }

    #[test]
    fn agrees_with_a_brute_force_scan() {
        let mut state = 11u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 11
        };
        let by_sets: [&[CollapseKey]; 4] = [
            &[CollapseKey::NearDuplicate],
            &[CollapseKey::Page, CollapseKey::NearDuplicate],
            &[CollapseKey::Site, CollapseKey::Group],
            &CollapseKey::ALL,
        ];
        for _ in 0..50 {
            // Fingerprints near a few centres, so near-duplicates are common.
            let centres: Vec<u64> = (0..4).map(|_| next()).collect();
            let list: Vec<CollapseKeys> = (0..200)
                .map(|_| {
                    let c = centres[(next() % 4) as usize];
                    let flips = (0..(next() % 5)).fold(0u64, |f, _| f | 1 << (next() % 64));
                    CollapseKeys {
                        simhash: (next() % 10 != 0).then_some(c ^ flips),
                        page: (next() % 3 != 0).then(|| next() % 40),
                        site: (next() % 2 == 0).then(|| next() % 5),
                        group: (next() % 4 == 0).then(|| next() % 7),
                        lang: None,
                    }
                })
                .collect();
            for by in by_sets {
                assert_eq!(collapse(&list, by, &[]), brute_force(&list, by), "{by:?}");
            }
        }
    }

    /// A shard sends only the keys a collapse reads (`keys_read`): the same hits are kept,
    /// with the same counts and the same preferred versions, for every set of keys.
    #[test]
    fn the_keys_a_collapse_reads_are_all_it_needs() {
        let mut state = 5u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 11
        };
        let mut sets: Vec<Vec<CollapseKey>> = Vec::new();
        for mask in 1..16u32 {
            sets.push(
                CollapseKey::ALL
                    .into_iter()
                    .enumerate()
                    .filter(|(i, _)| mask & (1 << i) != 0)
                    .map(|(_, k)| k)
                    .collect(),
            );
        }
        for _ in 0..30 {
            let list: Vec<CollapseKeys> = (0..150)
                .map(|_| CollapseKeys {
                    simhash: (next() % 10 != 0).then(|| (next() % 4) << 40 | 1 << (next() % 64)),
                    page: (next() % 3 != 0).then(|| next() % 30),
                    site: (next() % 2 == 0).then(|| next() % 5),
                    group: (next() % 4 == 0).then(|| next() % 7),
                    lang: (next() % 4 != 0).then(|| next() % 3),
                })
                .collect();
            for by in &sets {
                let read: Vec<CollapseKeys> = list.iter().map(|&k| keys_read(k, by)).collect();
                for prefer in [&[][..], &[1], &[2, 0]] {
                    assert_eq!(
                        collapse(&read, by, prefer),
                        collapse(&list, by, prefer),
                        "{by:?}"
                    );
                }
                // What is not read is not sent: the page key alone sends no other key.
                assert_eq!(
                    read.iter()
                        .all(|k| k.simhash.is_none() && k.site.is_none() && k.group.is_none()),
                    by.as_slice() == [CollapseKey::Page],
                    "{by:?}"
                );
            }
        }
    }

    /// Versions of one page in several languages: the requester's takes the group's place,
    /// wherever it ranks in the window; other keys' groups keep their best hit.
    #[test]
    fn the_preferred_language_stands_for_its_page() {
        let (en, ja, ko) = (0x656e, 0x6a61, 0x6b6f);
        let version = |page: u64, lang: Option<u64>, site: u64| CollapseKeys {
            page: Some(page),
            site: Some(site),
            lang,
            ..CollapseKeys::default()
        };
        let list = [
            version(1, Some(ja), 10), // 0: Japanese version of page 1, best
            version(2, Some(en), 10), // 1
            version(1, Some(ko), 11), // 2: Korean version of page 1
            version(1, Some(en), 11), // 3: the English original of page 1
            version(3, Some(ja), 12), // 4: page 3 has no English version
            version(1, None, 13),     // 5: a version of unknown language
        ];
        let page = [CollapseKey::Page];
        assert_eq!(collapse(&list, &page, &[en]), [(3, 3), (1, 0), (4, 0)]);
        assert_eq!(collapse(&list, &page, &[ja, en]), [(0, 3), (1, 0), (4, 0)]);
        assert_eq!(collapse(&list, &page, &[ko, en]), [(2, 3), (1, 0), (4, 0)]);
        // Without preference the best hit stands; a language not listed (French) falls back
        // to the next one.
        assert_eq!(collapse(&list, &page, &[]), [(0, 3), (1, 0), (4, 0)]);
        let fr = 0x6672;
        assert_eq!(collapse(&list, &page, &[fr, en]), [(3, 3), (1, 0), (4, 0)]);
        // A version of unknown language ranks after the preferred ones, before the others.
        let without_english = &list[..3];
        let unknown = [list[0], list[2], list[5]];
        assert_eq!(collapse(without_english, &page, &[fr]), [(0, 1), (1, 0)]);
        assert_eq!(collapse(&unknown, &page, &[fr]), [(2, 2)]);
        // By site only, nothing is a version of anything: the best hit of each site stays.
        assert_eq!(
            collapse(&list, &[CollapseKey::Site], &[en]),
            [(0, 1), (2, 1), (4, 0), (5, 0)]
        );
    }

    #[test]
    fn key_lists_parse_and_bad_names_are_named() {
        assert_eq!(
            CollapseKey::parse_list("page, near_duplicate"),
            Ok(vec![CollapseKey::Page, CollapseKey::NearDuplicate])
        );
        assert_eq!(CollapseKey::parse_list("none"), Ok(vec![]));
        let e = CollapseKey::parse_list("page,author").unwrap_err();
        assert!(e.contains("`author`"), "{e}");
        assert!(CollapseKey::parse_list("page,page").is_err());
    }
}
