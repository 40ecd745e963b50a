//! Per-query metrics (SPEC §4), each a pure function of one query's [`JudgedRanking`].
//!
//! `threshold` is the grade at or above which a document counts as relevant (trec_eval's
//! `-l`, default 1). Unjudged documents count as non-relevant. Every function returns a value
//! in [0, 1] and never NaN: where a ratio would be 0/0 (no relevant document), the result is 0
//! and the caller's convention ([`super::NoRelevant`]) decides what such a query is worth.

mod auc;
mod average_precision;
mod cascade;
mod dcg;
mod precision;

pub use auc::auc;
pub use average_precision::average_precision;
pub use cascade::{err_at, pfound_at, PFOUND_BREAK};
pub use dcg::{dcg, ndcg_at, Gain};
pub use precision::{precision_at, r_precision, recall_at, reciprocal_rank};

/// One query's ranking seen through its judgments: all any metric needs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JudgedRanking {
    /// Grade of each retrieved document, in rank order (index 0 = rank 1); `None` = unjudged.
    pub retrieved: Vec<Option<i32>>,
    /// Grades of every judged document of the query, retrieved or not.
    pub judged: Vec<i32>,
}

impl JudgedRanking {
    /// `R`: judged documents at or above `threshold`, retrieved or not.
    pub fn num_relevant(&self, threshold: i32) -> usize {
        self.judged.iter().filter(|&&g| g >= threshold).count()
    }

    /// Whether the document at each rank is relevant.
    fn relevant(&self, threshold: i32) -> impl Iterator<Item = bool> + '_ {
        self.retrieved
            .iter()
            .map(move |g| g.is_some_and(|g| g >= threshold))
    }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::JudgedRanking;

    /// A ranking where every retrieved document is judged with the given grade, plus
    /// `unretrieved` judged documents that the run missed.
    pub fn ranking(retrieved: &[i32], unretrieved: &[i32]) -> JudgedRanking {
        JudgedRanking {
            retrieved: retrieved.iter().map(|&g| Some(g)).collect(),
            judged: retrieved.iter().chain(unretrieved).copied().collect(),
        }
    }

    /// Small deterministic generator (SplitMix64) for randomized oracle tests.
    pub struct Rng(pub u64);
    impl Rng {
        pub fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        pub fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A random ranking: up to `max_len` retrieved docs with grades in -1..=3 or unjudged,
    /// and up to 5 unretrieved judged docs.
    pub fn random_ranking(rng: &mut Rng, max_len: u64) -> JudgedRanking {
        let len = rng.below(max_len + 1) as usize;
        let mut r = JudgedRanking::default();
        for _ in 0..len {
            match rng.below(6) {
                0 => r.retrieved.push(None),
                g => {
                    let g = g as i32 - 2;
                    r.retrieved.push(Some(g));
                    r.judged.push(g);
                }
            }
        }
        for _ in 0..rng.below(6) {
            r.judged.push(rng.below(5) as i32 - 1);
        }
        r
    }
}
