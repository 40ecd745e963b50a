//! Rank fusion (SPEC §6): several ranked lists of one query become one.
//!
//! Reciprocal Rank Fusion, CombSUM and CombMNZ over min–max or z-score normalised scores,
//! Borda for partial lists, their weighted variants, and Condorcet (Copeland) for short lists.
//! The same code fuses the engine's first-phase lists (`model=fusion` on `/search`, in
//! `rankd eval`) and TREC run files (`rankd fuse`): it is generic over the document key.
//!
//! Where conventions differ between implementations this follows `ranx` (PyPI), the peer the
//! cross-check compares against (`bench/fusion_crosscheck.py`), and says so:
//! - a list's rank positions are its order (rank 1 first); callers order tied scores first
//!   (the engine by its own tie-break, run files by trec_eval's rule: doc id descending);
//! - min–max divides by `max(max − min, 1e-9)`, so a list whose scores are all equal (or a
//!   list of one) normalises to all 0; z-score divides by `max(σ, 1e-9)` with the population σ;
//! - a document missing from a list adds 0 to CombSUM and RRF and is not counted by CombMNZ;
//!   weighted CombMNZ is ranx's `wmnz`: (Σ of its scores) × (Σ of the weights of the lists
//!   that hold it);
//! - Borda gives the document at rank r of a list `n + 1 − r` points, n the size of the union
//!   of the lists, and every document the list misses the mean of the remaining points,
//!   `(n − len + 1) / 2` (ranx's `bordafuse`; SPEC §6's "unlisted 0" is the other convention);
//! - Condorcet orders by Copeland score (pairwise majority wins − losses: x beats y when more
//!   lists put x above y than y above x; a list holding neither abstains) and scores the
//!   fused list `n − position`, as ranx's `condorcet` does. ranx sorts with the majority
//!   relation as a comparator, which depends on its input order when the relation has
//!   cycles or ties; where it is a strict total order both give the same list.
//!
//! Fused scores are compared in f64; ties keep the order in which the documents first appear
//! scanning the lists rank by rank (best rank first, then list order), so results are
//! deterministic.

use std::collections::HashMap;
use std::fmt;
use std::hash::Hash;

use crate::eval::kendall_tau_b;

/// RRF's k when none is given (Cormack, Clarke and Büttcher 2009).
pub(crate) const DEFAULT_RRF_K: f64 = 60.0;
/// The most documents Condorcet fuses for one query: it compares every pair (O(n²·lists)).
pub(crate) const MAX_CONDORCET_DOCS: usize = 5000;

/// The largest weight an input may get (larger ones would overflow fused scores to ∞, which
/// JSON cannot carry).
pub(crate) const MAX_WEIGHT: f64 = 1e6;
/// The largest RRF k. Past it `k + rank` no longer tells the ranks of a list apart in any
/// useful way (at 1e308 every document scores the same), so a larger k is a mistake.
pub(crate) const MAX_RRF_K: f64 = 1e6;

/// A fusion method (SPEC §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Rrf,
    CombSum,
    CombMnz,
    Borda,
    Condorcet,
}

impl Method {
    pub const ALL: [Method; 5] = [
        Method::Rrf,
        Method::CombSum,
        Method::CombMnz,
        Method::Borda,
        Method::Condorcet,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Method::Rrf => "rrf",
            Method::CombSum => "combsum",
            Method::CombMnz => "combmnz",
            Method::Borda => "borda",
            Method::Condorcet => "condorcet",
        }
    }

    /// Whether the method reads scores (and so normalises them) rather than ranks.
    pub fn uses_scores(self) -> bool {
        matches!(self, Method::CombSum | Method::CombMnz)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Method {
    type Err = FusionError;
    fn from_str(s: &str) -> Result<Self, FusionError> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| FusionError::UnknownMethod(s.to_string()))
    }
}

/// How CombSUM and CombMNZ normalise each list's scores before adding them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Norm {
    /// `(s − min) / max(max − min, 1e-9)`.
    #[default]
    MinMax,
    /// `(s − mean) / max(σ, 1e-9)`, σ the population standard deviation.
    ZScore,
    /// `s / max(√(Σ s²), 1e-9)` (SPEC §10; hybrid search's second normalisation).
    L2,
}

impl std::str::FromStr for Norm {
    type Err = FusionError;
    fn from_str(s: &str) -> Result<Self, FusionError> {
        match s {
            "minmax" => Ok(Norm::MinMax),
            "zscore" => Ok(Norm::ZScore),
            "l2" => Ok(Norm::L2),
            other => Err(FusionError::UnknownNorm(other.to_string())),
        }
    }
}

impl fmt::Display for Norm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Norm::MinMax => "minmax",
            Norm::ZScore => "zscore",
            Norm::L2 => "l2",
        })
    }
}

/// Why a fusion cannot be set up; every variant is the caller's input.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FusionError {
    #[error("unknown fusion method `{0}` (known: rrf, combsum, combmnz, borda, condorcet)")]
    UnknownMethod(String),
    #[error("unknown normalisation `{0}` (known: minmax, zscore, l2)")]
    UnknownNorm(String),
    #[error("fusion needs at least two input lists, got {0}")]
    TooFewInputs(usize),
    #[error("{given} weights for {inputs} inputs: give one weight per input")]
    WeightCount { given: usize, inputs: usize },
    #[error("weight {index} is {value}: weights must be positive numbers up to {MAX_WEIGHT}")]
    BadWeight { index: usize, value: f64 },
    #[error("k must be a number in [0, {MAX_RRF_K}], got {0}")]
    BadK(f64),
    #[error("k applies to rrf only, not to {0}")]
    KWithoutRrf(Method),
    #[error("normalisation applies to combsum and combmnz, which read scores; {0} reads ranks")]
    NormWithRanks(Method),
    #[error("condorcet compares every pair of documents: {0} documents exceed its limit of {MAX_CONDORCET_DOCS}; use shorter lists or another method")]
    TooManyForCondorcet(usize),
}

/// A fusion method with its parameters, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Fusion {
    pub method: Method,
    /// RRF's k.
    pub k: f64,
    /// CombSUM's and CombMNZ's normalisation.
    pub norm: Norm,
    /// One weight per input (all 1 when not given).
    pub weights: Vec<f64>,
}

impl Fusion {
    /// Checks the parameters for `inputs` lists. `k` applies to RRF only, `norm` to the
    /// score-based methods; condorcet takes no weights.
    pub fn new(
        method: Method,
        inputs: usize,
        k: Option<f64>,
        norm: Option<Norm>,
        weights: Option<Vec<f64>>,
    ) -> Result<Self, FusionError> {
        if inputs < 2 {
            return Err(FusionError::TooFewInputs(inputs));
        }
        if let Some(k) = k {
            if method != Method::Rrf {
                return Err(FusionError::KWithoutRrf(method));
            }
            if !(0.0..=MAX_RRF_K).contains(&k) {
                return Err(FusionError::BadK(k));
            }
        }
        if norm.is_some() && !method.uses_scores() {
            return Err(FusionError::NormWithRanks(method));
        }
        let weights = match weights {
            None => vec![1.0; inputs],
            Some(w) => {
                if w.len() != inputs {
                    return Err(FusionError::WeightCount {
                        given: w.len(),
                        inputs,
                    });
                }
                if let Some((index, &value)) = w
                    .iter()
                    .enumerate()
                    .find(|(_, v)| !(v.is_finite() && **v > 0.0 && **v <= MAX_WEIGHT))
                {
                    return Err(FusionError::BadWeight {
                        index: index + 1,
                        value,
                    });
                }
                w
            }
        };
        Ok(Fusion {
            method,
            k: k.unwrap_or(DEFAULT_RRF_K),
            norm: norm.unwrap_or_default(),
            weights,
        })
    }

    /// [`Fusion::new`] from the method's and normalisation's names, as front ends receive
    /// them (`rrf`, `minmax`, ...).
    pub fn from_names(
        method: &str,
        inputs: usize,
        k: Option<f64>,
        norm: Option<&str>,
        weights: Option<Vec<f64>>,
    ) -> Result<Self, FusionError> {
        let norm = norm.map(str::parse::<Norm>).transpose()?;
        Fusion::new(method.parse()?, inputs, k, norm, weights)
    }

    /// Fuses one query's lists, each in rank order (rank 1 first) with its scores; a key must
    /// not repeat within a list. Returns the fused list, best first.
    pub fn fuse<K: Clone + Eq + Hash>(
        &self,
        lists: &[Vec<(K, f64)>],
    ) -> Result<Vec<(K, f64)>, FusionError> {
        assert_eq!(lists.len(), self.weights.len(), "one list per input");
        // The union, in order of first appearance rank by rank: the tie-break order.
        let mut slot: HashMap<&K, usize> = HashMap::new();
        let mut keys: Vec<&K> = Vec::new();
        let depth = lists.iter().map(Vec::len).max().unwrap_or(0);
        for r in 0..depth {
            for list in lists {
                if let Some((key, _)) = list.get(r) {
                    slot.entry(key).or_insert_with(|| {
                        keys.push(key);
                        keys.len() - 1
                    });
                }
            }
        }
        let n = keys.len();
        let mut fused = vec![0.0f64; n];
        match self.method {
            Method::Rrf => {
                for (list, w) in lists.iter().zip(&self.weights) {
                    for (r, (key, _)) in list.iter().enumerate() {
                        fused[slot[key]] += w * (1.0 / (self.k + (r + 1) as f64));
                    }
                }
            }
            Method::CombSum | Method::CombMnz => {
                let mut weight_sum = vec![0.0f64; n];
                for (list, w) in lists.iter().zip(&self.weights) {
                    let normalised = normalise(self.norm, list);
                    for ((key, _), s) in list.iter().zip(normalised) {
                        let i = slot[key];
                        if self.method == Method::CombSum {
                            fused[i] += w * s;
                        } else {
                            fused[i] += s;
                            weight_sum[i] += w;
                        }
                    }
                }
                if self.method == Method::CombMnz {
                    for (f, w) in fused.iter_mut().zip(weight_sum) {
                        *f *= w;
                    }
                }
            }
            Method::Borda => {
                let mut listed = vec![false; n];
                for (list, w) in lists.iter().zip(&self.weights) {
                    listed.iter_mut().for_each(|l| *l = false);
                    for (r, (key, _)) in list.iter().enumerate() {
                        let i = slot[key];
                        fused[i] += w * (n - r) as f64;
                        listed[i] = true;
                    }
                    let unranked = (n - list.len() + 1) as f64 / 2.0;
                    for (f, _) in fused.iter_mut().zip(&listed).filter(|(_, &l)| !l) {
                        *f += w * unranked;
                    }
                }
            }
            Method::Condorcet => {
                if n > MAX_CONDORCET_DOCS {
                    return Err(FusionError::TooManyForCondorcet(n));
                }
                let order = copeland_order(lists, &slot, n);
                for (position, &i) in order.iter().enumerate() {
                    fused[i] = (n - position) as f64;
                }
            }
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| fused[b].total_cmp(&fused[a]).then(a.cmp(&b)));
        Ok(order
            .into_iter()
            .map(|i| (keys[i].clone(), fused[i]))
            .collect())
    }
}

/// Each score of `list` normalised (SPEC §6, ranx's `min-max` and `zmuv`).
fn normalise<K>(norm: Norm, list: &[(K, f64)]) -> Vec<f64> {
    if list.is_empty() {
        return Vec::new();
    }
    let scores = list.iter().map(|(_, s)| *s);
    match norm {
        Norm::MinMax => {
            let min = scores.clone().fold(f64::INFINITY, f64::min);
            let max = scores.clone().fold(f64::NEG_INFINITY, f64::max);
            let denominator = (max - min).max(1e-9);
            scores.map(|s| (s - min) / denominator).collect()
        }
        Norm::ZScore => {
            let n = list.len() as f64;
            let mean = scores.clone().sum::<f64>() / n;
            let variance = scores.clone().map(|s| (s - mean) * (s - mean)).sum::<f64>() / n;
            let denominator = variance.sqrt().max(1e-9);
            scores.map(|s| (s - mean) / denominator).collect()
        }
        Norm::L2 => {
            let denominator = scores.clone().map(|s| s * s).sum::<f64>().sqrt().max(1e-9);
            scores.map(|s| s / denominator).collect()
        }
    }
}

/// The union (slots `0..n`) in Copeland order: most pairwise majority wins minus losses
/// first, ties in slot order.
fn copeland_order<K: Eq + Hash>(
    lists: &[Vec<(K, f64)>],
    slot: &HashMap<&K, usize>,
    n: usize,
) -> Vec<usize> {
    // rank[l][i]: position of slot i in list l, usize::MAX when the list misses it.
    let ranks: Vec<Vec<usize>> = lists
        .iter()
        .map(|list| {
            let mut rank = vec![usize::MAX; n];
            for (r, (key, _)) in list.iter().enumerate() {
                rank[slot[key]] = r;
            }
            rank
        })
        .collect();
    let mut copeland = vec![0i64; n];
    for x in 0..n {
        for y in x + 1..n {
            let (mut for_x, mut for_y) = (0usize, 0usize);
            for rank in &ranks {
                match rank[x].cmp(&rank[y]) {
                    std::cmp::Ordering::Less => for_x += 1,
                    std::cmp::Ordering::Greater => for_y += 1,
                    std::cmp::Ordering::Equal => {} // both missing: the list abstains
                }
            }
            match for_x.cmp(&for_y) {
                std::cmp::Ordering::Greater => {
                    copeland[x] += 1;
                    copeland[y] -= 1;
                }
                std::cmp::Ordering::Less => {
                    copeland[y] += 1;
                    copeland[x] -= 1;
                }
                std::cmp::Ordering::Equal => {}
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| copeland[b].cmp(&copeland[a]).then(a.cmp(&b)));
    order
}

/// Kendall τ_b between an input list and the fused list over the fused list's documents
/// (the union of the inputs; SPEC §6, book §23.3.10): the input's order by rank, the documents
/// it misses tied below all of its own; `None` where undefined (fewer than two documents, or
/// one side all tied).
pub fn agreement<K: Eq + Hash>(input: &[(K, f64)], fused: &[(K, f64)]) -> Option<f64> {
    let rank: HashMap<&K, usize> = input.iter().enumerate().map(|(r, (k, _))| (k, r)).collect();
    let xs: Vec<f64> = fused
        .iter()
        .map(|(k, _)| rank.get(k).map_or(f64::NEG_INFINITY, |&r| -(r as f64)))
        .collect();
    let ys: Vec<f64> = fused.iter().map(|(_, s)| *s).collect();
    kendall_tau_b(&xs, &ys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(items: &[(&'static str, f64)]) -> Vec<(&'static str, f64)> {
        items.to_vec()
    }

    fn fused(f: &Fusion, lists: &[Vec<(&'static str, f64)>]) -> Vec<(&'static str, f64)> {
        f.fuse(lists).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    // Two lists worked by hand: a = [d1, d2, d3] scores 3, 2, 1; b = [d3, d4] scores 10, 4.
    fn two_lists() -> Vec<Vec<(&'static str, f64)>> {
        vec![
            list(&[("d1", 3.0), ("d2", 2.0), ("d3", 1.0)]),
            list(&[("d3", 10.0), ("d4", 4.0)]),
        ]
    }

    #[test]
    fn rrf_adds_reciprocal_ranks() {
        let f = Fusion::new(Method::Rrf, 2, None, None, None).unwrap();
        let out = fused(&f, &two_lists());
        // d3: 1/63 + 1/61; d1: 1/61; d4: 1/62; d2: 1/62 (tie: d2 appears first, rank 2 of a).
        assert_eq!(out[0].0, "d3");
        assert!(close(out[0].1, 1.0 / 63.0 + 1.0 / 61.0));
        assert_eq!(
            out.iter().map(|x| x.0).collect::<Vec<_>>(),
            ["d3", "d1", "d2", "d4"]
        );
        assert!(close(out[2].1, 1.0 / 62.0) && close(out[3].1, 1.0 / 62.0));
        let w = Fusion::new(Method::Rrf, 2, Some(0.0), None, Some(vec![1.0, 2.0])).unwrap();
        let out = fused(&w, &two_lists());
        assert_eq!(out[0], ("d3", 1.0 / 3.0 + 2.0));
    }

    #[test]
    fn combsum_and_combmnz_on_min_max_scores() {
        let s = Fusion::new(Method::CombSum, 2, None, None, None).unwrap();
        let out: HashMap<_, _> = fused(&s, &two_lists()).into_iter().collect();
        // a normalised: 1, 0.5, 0; b normalised: 1, 0.
        assert!(close(out["d1"], 1.0) && close(out["d2"], 0.5));
        assert!(close(out["d3"], 1.0) && close(out["d4"], 0.0));
        let m = Fusion::new(Method::CombMnz, 2, None, None, None).unwrap();
        let out: HashMap<_, _> = fused(&m, &two_lists()).into_iter().collect();
        assert!(close(out["d3"], 2.0) && close(out["d1"], 1.0) && close(out["d4"], 0.0));
        // Weighted MNZ as ranx's wmnz: Σ scores × Σ weights of the lists holding the document.
        let wm = Fusion::new(Method::CombMnz, 2, None, None, Some(vec![2.0, 3.0])).unwrap();
        let out: HashMap<_, _> = fused(&wm, &two_lists()).into_iter().collect();
        assert!(close(out["d3"], 5.0) && close(out["d1"], 2.0) && close(out["d2"], 1.0));
    }

    #[test]
    fn z_scores_use_the_population_deviation() {
        let s = Fusion::new(Method::CombSum, 2, None, Some(Norm::ZScore), None).unwrap();
        let out: HashMap<_, _> = fused(&s, &two_lists()).into_iter().collect();
        // a: mean 2, σ = sqrt(2/3); b: mean 7, σ 3.
        let sa = (2.0f64 / 3.0).sqrt();
        assert!(close(out["d1"], 1.0 / sa));
        assert!(close(out["d3"], -1.0 / sa + 1.0));
        assert!(close(out["d4"], -1.0));
    }

    #[test]
    fn equal_scores_normalise_to_zero() {
        let s = Fusion::new(Method::CombSum, 2, None, None, None).unwrap();
        let lists = vec![list(&[("x", 5.0), ("y", 5.0)]), list(&[("z", 1.0)])];
        assert!(fused(&s, &lists).iter().all(|(_, v)| *v == 0.0));
    }

    #[test]
    fn borda_gives_missing_documents_the_mean_of_the_remaining_points() {
        let f = Fusion::new(Method::Borda, 2, None, None, None).unwrap();
        let out: HashMap<_, _> = fused(&f, &two_lists()).into_iter().collect();
        // n = 4. a: d1 4, d2 3, d3 2, d4 (4−3+1)/2 = 1. b: d3 4, d4 3, d1 and d2 (4−2+1)/2.
        assert!(close(out["d1"], 5.5) && close(out["d2"], 4.5));
        assert!(close(out["d3"], 6.0) && close(out["d4"], 4.0));
    }

    #[test]
    fn condorcet_follows_the_majority_and_scores_by_position() {
        let lists = vec![
            list(&[("a", 0.0), ("b", 0.0), ("c", 0.0)]),
            list(&[("b", 0.0), ("a", 0.0), ("c", 0.0)]),
            list(&[("a", 0.0), ("c", 0.0), ("b", 0.0)]),
        ];
        let f = Fusion::new(Method::Condorcet, 3, None, None, None).unwrap();
        assert_eq!(fused(&f, &lists), [("a", 3.0), ("b", 2.0), ("c", 1.0)]);
    }

    #[test]
    fn condorcet_matches_a_brute_force_copeland_count() {
        // Pseudo-random partial lists over 12 documents: the Copeland scores by definition.
        let docs: Vec<&'static str> =
            vec!["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as usize
        };
        for _ in 0..20 {
            let lists: Vec<Vec<(&str, f64)>> = (0..4)
                .map(|_| {
                    let mut d = docs.clone();
                    for i in (1..d.len()).rev() {
                        d.swap(i, next() % (i + 1));
                    }
                    d.truncate(3 + next() % 9);
                    d.into_iter().map(|x| (x, 0.0)).collect()
                })
                .collect();
            let f = Fusion::new(Method::Condorcet, 4, None, None, None).unwrap();
            let out = fused(&f, &lists);
            let pos = |l: &Vec<(&str, f64)>, x: &str| l.iter().position(|(k, _)| *k == x);
            let beats = |x: &str, y: &str| {
                let (mut fx, mut fy) = (0, 0);
                for l in &lists {
                    match (pos(l, x), pos(l, y)) {
                        (Some(a), Some(b)) if a < b => fx += 1,
                        (Some(_), Some(_)) => fy += 1,
                        (Some(_), None) => fx += 1,
                        (None, Some(_)) => fy += 1,
                        (None, None) => {}
                    }
                }
                fx > fy
            };
            let copeland = |x: &str| -> i64 {
                out.iter()
                    .map(|(y, _)| i64::from(beats(x, y)) - i64::from(beats(y, x)))
                    .sum()
            };
            for w in out.windows(2) {
                assert!(copeland(w[0].0) >= copeland(w[1].0));
            }
            assert_eq!(out.len() as f64, out[0].1);
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        use FusionError::*;
        assert_eq!("rfr".parse::<Method>(), Err(UnknownMethod("rfr".into())));
        assert_eq!(
            Fusion::new(Method::Rrf, 1, None, None, None),
            Err(TooFewInputs(1))
        );
        assert!(matches!(
            Fusion::new(Method::Rrf, 2, None, None, Some(vec![1.0])),
            Err(WeightCount {
                given: 1,
                inputs: 2
            })
        ));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e308] {
            assert!(matches!(
                Fusion::new(Method::CombSum, 2, None, None, Some(vec![1.0, bad])),
                Err(BadWeight { index: 2, .. })
            ));
        }
        assert!(matches!(
            Fusion::new(Method::Rrf, 2, Some(-1.0), None, None),
            Err(BadK(_))
        ));
        assert!(matches!(
            Fusion::new(Method::Borda, 2, Some(60.0), None, None),
            Err(KWithoutRrf(Method::Borda))
        ));
        assert!(matches!(
            Fusion::new(Method::Rrf, 2, None, Some(Norm::MinMax), None),
            Err(NormWithRanks(Method::Rrf))
        ));
    }

    #[test]
    fn agreement_is_one_for_the_same_order_and_ties_missing_documents() {
        let input = list(&[("a", 3.0), ("b", 2.0), ("c", 1.0)]);
        assert_eq!(agreement(&input, &input), Some(1.0));
        let reversed = list(&[("c", 3.0), ("b", 2.0), ("a", 1.0)]);
        assert_eq!(agreement(&input, &reversed), Some(-1.0));
        // d and e are missing from the input: tied below it.
        let fused = list(&[("a", 5.0), ("b", 4.0), ("c", 3.0), ("d", 2.0), ("e", 1.0)]);
        let tau = agreement(&input, &fused).unwrap();
        assert!(tau > 0.9 && tau < 1.0, "{tau}");
    }
}
