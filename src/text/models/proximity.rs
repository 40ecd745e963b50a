//! SPEC §1.7 term proximity (Tao & Zhai 2007): MinDist, Span, MinCover, and the additive
//! score `π = ln(α + exp(−MinDist))`, served as the `bm25prox` model (BM25 + π).

use tantivy::query::Explanation;
use tantivy::schema::Field;

use super::{Bm25, DocMatch, TextModel};

/// Proximity measures of one document, from the positions of each query term.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Proximity {
    /// Smallest distance between occurrences of two different matched terms; the document
    /// length when fewer than two distinct terms occur.
    pub min_dist: u32,
    /// Length of the shortest window covering every occurrence of every matched term
    /// (`last − first + 1`); 0 when nothing matched.
    pub span: u32,
    /// Length of the shortest window covering each matched term at least once; 0 when
    /// nothing matched.
    pub min_cover: u32,
    /// Distinct query terms that occur.
    pub matched: u32,
}

/// Computes the measures. `positions[t]` are the sorted positions of term `t`;
/// `doc_len` is the length used when MinDist is undefined.
///
/// Every occurrence is visited once in position order: a long page holds thousands of
/// occurrences of a query's terms, and this runs for every candidate of a reranking window.
pub fn proximity(positions: &[Vec<u32>], doc_len: u32) -> Proximity {
    let matched = positions.iter().filter(|p| !p.is_empty()).count();
    if matched == 0 {
        return Proximity {
            min_dist: doc_len,
            span: 0,
            min_cover: 0,
            matched: 0,
        };
    }
    let first = positions.iter().filter_map(|p| p.first()).min();
    let last = positions.iter().filter_map(|p| p.last()).max();
    let span = last.expect("a term matched") - first.expect("a term matched") + 1;
    let (min_dist, min_cover) = if positions.len() <= MERGE_UP_TO {
        merged_scan(positions, matched)
    } else {
        sorted_scan(positions, matched)
    };
    Proximity {
        min_dist: if matched < 2 {
            doc_len
        } else {
            min_dist.unwrap_or(doc_len)
        },
        span,
        min_cover,
        matched: matched as u32,
    }
}

/// Queries with at most this many terms merge the position lists on the fly; longer ones
/// sort all occurrences.
const MERGE_UP_TO: usize = 8;

/// MinDist (`None` when no two different terms occur) and MinCover in one k-way merge of the
/// sorted lists, without materialising the occurrences. Adjacent occurrences of different
/// terms realise MinDist; the shortest window covering every matched term and ending at an
/// occurrence starts at the latest occurrence, so far, of the term seen longest ago.
fn merged_scan(positions: &[Vec<u32>], matched: usize) -> (Option<u32>, u32) {
    let k = positions.len();
    let mut heads = [0usize; MERGE_UP_TO];
    // The latest position of each term so far (u32::MAX: not yet seen).
    let mut latest = [u32::MAX; MERGE_UP_TO];
    let (mut seen, mut min_dist, mut min_cover) = (0usize, None::<u32>, u32::MAX);
    let mut previous: Option<(u32, usize)> = None;
    loop {
        let mut best: Option<(u32, usize)> = None;
        for (t, ps) in positions.iter().enumerate() {
            if let Some(&p) = ps.get(heads[t]) {
                if best.is_none_or(|(bp, _)| p < bp) {
                    best = Some((p, t));
                }
            }
        }
        let Some((p, t)) = best else {
            break;
        };
        heads[t] += 1;
        if let Some((pp, pt)) = previous {
            if pt != t {
                min_dist = Some(min_dist.map_or(p - pp, |d| d.min(p - pp)));
            }
        }
        previous = Some((p, t));
        if latest[t] == u32::MAX {
            seen += 1;
        }
        latest[t] = p;
        if seen == matched {
            let start = latest[..k]
                .iter()
                .filter(|&&l| l != u32::MAX)
                .min()
                .expect("every matched term was seen");
            min_cover = min_cover.min(p - start + 1);
        }
    }
    (min_dist, min_cover)
}

/// The same measures for many terms: all occurrences sorted, then a two-pointer pass.
fn sorted_scan(positions: &[Vec<u32>], matched: usize) -> (Option<u32>, u32) {
    let mut occ: Vec<u64> = Vec::with_capacity(positions.iter().map(Vec::len).sum());
    for (t, ps) in positions.iter().enumerate() {
        occ.extend(ps.iter().map(|&p| (u64::from(p) << 32) | t as u64));
    }
    occ.sort_unstable();
    let (pos, term) = (
        |o: u64| (o >> 32) as u32,
        |o: u64| (o & 0xffff_ffff) as usize,
    );
    let min_dist = occ
        .windows(2)
        .filter(|w| term(w[0]) != term(w[1]))
        .map(|w| pos(w[1]) - pos(w[0]))
        .min();
    let mut count = vec![0u32; positions.len()];
    let (mut covered, mut left) = (0usize, 0usize);
    let mut min_cover = u32::MAX;
    for &o in &occ {
        let t = term(o);
        count[t] += 1;
        if count[t] == 1 {
            covered += 1;
        }
        while covered == matched {
            min_cover = min_cover.min(pos(o) - pos(occ[left]) + 1);
            let lt = term(occ[left]);
            count[lt] -= 1;
            if count[lt] == 0 {
                covered -= 1;
            }
            left += 1;
        }
    }
    (min_dist, min_cover)
}

/// π(q,d) = ln(α + exp(−MinDist)).
pub(crate) fn proximity_score(min_dist: u32, alpha: f32) -> f32 {
    (alpha + (-(min_dist as f32)).exp()).ln()
}

/// BM25 plus the proximity score π over the same field.
#[derive(Debug, Clone)]
pub struct Bm25Proximity {
    bm25: Bm25,
    alpha: f32,
}

impl Bm25Proximity {
    pub fn new(bm25: Bm25, alpha: f32) -> Self {
        Bm25Proximity { bm25, alpha }
    }

    fn pi(&self, m: &DocMatch) -> (Proximity, f32) {
        let p = proximity(m.positions, m.len[0]);
        (p, proximity_score(p.min_dist, self.alpha))
    }
}

impl TextModel for Bm25Proximity {
    fn name(&self) -> &'static str {
        "bm25prox"
    }
    fn fields(&self) -> &[Field] {
        self.bm25.fields()
    }
    fn terms(&self) -> &[String] {
        self.bm25.terms()
    }
    fn needs_positions(&self) -> bool {
        true
    }

    fn score(&self, m: &DocMatch) -> f32 {
        self.bm25.score(m) + self.pi(m).1
    }

    fn explain(&self, m: &DocMatch) -> Explanation {
        let (p, pi) = self.pi(m);
        let mut e = Explanation::new("bm25prox: bm25 + ln(alpha + exp(-MinDist))", self.score(m));
        e.add_detail(self.bm25.explain(m));
        let mut pe = Explanation::new("proximity pi", pi);
        pe.add_const("MinDist", p.min_dist as f32);
        pe.add_const("Span", p.span as f32);
        pe.add_const("MinCover", p.min_cover as f32);
        pe.add_const("alpha", self.alpha);
        e.add_detail(pe);
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_made_cases() {
        // "a x b x x a b": a at 0,5; b at 2,6.
        let p = proximity(&[vec![0, 5], vec![2, 6]], 7);
        assert_eq!(p.min_dist, 1); // a@5, b@6
        assert_eq!(p.span, 7); // 0..6
        assert_eq!(p.min_cover, 2); // [5,6]
        assert_eq!(p.matched, 2);

        // Three terms: a@0,12 b@10 c@3; the best window holding all three is [3, 12].
        let p = proximity(&[vec![0, 12], vec![10], vec![3]], 20);
        assert_eq!(p.min_dist, 2); // b@10, a@12
        assert_eq!(p.span, 13);
        assert_eq!(p.min_cover, 10);
    }

    #[test]
    fn single_term_and_no_match() {
        let p = proximity(&[vec![3, 9], vec![]], 50);
        assert_eq!(p.min_dist, 50); // fewer than two distinct terms: |d|
        assert_eq!(p.span, 7);
        assert_eq!(p.min_cover, 1);
        let p = proximity(&[vec![], vec![]], 50);
        assert_eq!((p.min_dist, p.span, p.min_cover, p.matched), (50, 0, 0, 0));
    }

    #[test]
    fn min_cover_agrees_with_brute_force() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for _ in 0..500 {
            let terms = rng.random_range(1..12);
            let positions: Vec<Vec<u32>> = (0..terms)
                .map(|_| {
                    let mut v: Vec<u32> = (0..rng.random_range(0..4))
                        .map(|_| rng.random_range(0..30))
                        .collect();
                    v.sort();
                    v.dedup();
                    v
                })
                .collect();
            // Distinct positions across terms (a position holds one token).
            let mut seen = std::collections::HashSet::new();
            let positions: Vec<Vec<u32>> = positions
                .into_iter()
                .map(|v| v.into_iter().filter(|p| seen.insert(*p)).collect())
                .collect();
            let got = proximity(&positions, 30);
            let matched: Vec<usize> = (0..terms).filter(|&t| !positions[t].is_empty()).collect();
            let (mut best_cover, mut best_dist) = (u32::MAX, u32::MAX);
            for lo in 0..30u32 {
                for hi in lo..30u32 {
                    let inside = |t: usize| positions[t].iter().any(|&p| p >= lo && p <= hi);
                    if !matched.is_empty() && matched.iter().all(|&t| inside(t)) {
                        best_cover = best_cover.min(hi - lo + 1);
                    }
                }
            }
            for &a in &matched {
                for &b in &matched {
                    if a != b {
                        for &pa in &positions[a] {
                            for &pb in &positions[b] {
                                best_dist = best_dist.min(pa.abs_diff(pb));
                            }
                        }
                    }
                }
            }
            if matched.is_empty() {
                assert_eq!(got.min_cover, 0);
            } else {
                assert_eq!(got.min_cover, best_cover, "{positions:?}");
                let all: Vec<u32> = positions.iter().flatten().copied().collect();
                let span = all.iter().max().unwrap() - all.iter().min().unwrap() + 1;
                assert_eq!(got.span, span, "{positions:?}");
            }
            assert_eq!(got.matched as usize, matched.len());
            let expected_dist = if matched.len() < 2 { 30 } else { best_dist };
            assert_eq!(got.min_dist, expected_dist, "{positions:?}");
        }
    }
}
