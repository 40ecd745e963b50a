//! SPEC §1.8's static and social scores, from a document's `published_at`, votes and rating:
//! exponential decay, Hacker News gravity, Reddit hot, the Wilson lower bound and the Bayesian
//! average. They are reranker features (`social.*`, `fresh.*`) and the keys of
//! `/search?sort=` (`crate::search::SortMode`).
//!
//! Each score exists only for documents carrying the fields it needs (`None` otherwise, a
//! missing feature, sorted after every document that has one):
//! - decay, `fresh`: `published_at`;
//! - Reddit hot: `published_at` (missing votes count as 0 up, 0 down);
//! - Hacker News gravity: `published_at` and at least one of `votes_up`, `votes_down`;
//! - Wilson: at least one vote;
//! - Bayesian average: `rating` and `rating_count`.
//!
//! Votes are net, `x = up − down`, where a formula has one count (Reddit's score, Hacker
//! News points). Ages are clamped at 0: a date in the future counts as now.

use crate::text::columns::SocialSignals;
use crate::text::config::SocialParams;

/// The clock the age-dependent scores read, in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Reddit's epoch, 2005-12-08 07:46:43 UTC, in Unix seconds (`_sorts.pyx`).
pub(crate) const REDDIT_EPOCH: i64 = 1_134_028_003;

/// The scores of one document at time `now` (Unix seconds).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) struct SocialScores {
    pub age_days: Option<f64>,
    /// `exp(−ln 2 · age / half-life)`.
    pub decay: Option<f64>,
    pub hot: Option<f64>,
    pub gravity: Option<f64>,
    pub wilson: Option<f64>,
    pub bayes: Option<f64>,
    /// `up − down`, where the document has votes.
    pub net_votes: Option<f64>,
}

/// Exponential decay ("Newton cooling", book eq. 7.3) with `α = ln 2 / half_life`.
pub fn decay(age_days: f64, half_life_days: f64) -> f64 {
    (-std::f64::consts::LN_2 * age_days / half_life_days).exp()
}

/// Hacker News gravity (book eq. 7.4): `(P − 1) / (age_hours + 2)^G`.
pub fn gravity(points: f64, age_hours: f64, g: f64) -> f64 {
    (points - 1.0) / (age_hours + 2.0).powf(g)
}

/// Reddit hot with the production code's sign placement (SPEC §1.8; `_sorts.pyx`, `_hot`):
/// `sgn(x)·log10(max(|x|, 1)) + (t − 1134028003) / 45000`, t the post time in seconds.
pub(crate) fn reddit_hot(net_votes: f64, posted: i64) -> f64 {
    let order = net_votes.abs().max(1.0).log10();
    let sign = if net_votes > 0.0 {
        1.0
    } else if net_votes < 0.0 {
        -1.0
    } else {
        0.0
    };
    sign * order + (posted - REDDIT_EPOCH) as f64 / 45000.0
}

/// The lower bound of the Wilson score interval of `up` positives in `n` trials (book
/// eq. 7.6–7.8), `None` for `n = 0`.
pub(crate) fn wilson_lower_bound(up: f64, n: f64, z: f64) -> Option<f64> {
    if n <= 0.0 {
        return None;
    }
    let p = up / n;
    let z2 = z * z;
    Some((p + z2 / (2.0 * n) - z * ((p * (1.0 - p) + z2 / (4.0 * n)) / n).sqrt()) / (1.0 + z2 / n))
}

/// The Bayesian (IMDb) average (book eq. 7.10): `(v·R + m·C) / (v + m)`. A mean of finite
/// R and C is finite, but `v·R` overflows for ratings near `f64::MAX` (one document rated
/// 1e300 by 10¹⁰ raters): then the same mean is taken as the convex combination
/// `w·R + (1 − w)·C`, `w = v / (v + m)`, kept between R and C.
pub(crate) fn bayesian_average(rating: f64, count: f64, prior_count: f64, global_mean: f64) -> f64 {
    let direct = (count * rating + prior_count * global_mean) / (count + prior_count);
    if direct.is_finite() || !(rating.is_finite() && global_mean.is_finite()) {
        return direct;
    }
    let total = count + prior_count;
    let w = if total > 0.0 { count / total } else { 1.0 };
    (w * rating + (1.0 - w) * global_mean).clamp(rating.min(global_mean), rating.max(global_mean))
}

/// The net votes `up − down` of a document (0 up, 0 down where absent), and whether it has
/// any vote field.
fn votes(s: &SocialSignals) -> (f64, f64, bool) {
    let up = s.votes_up.unwrap_or(0) as f64;
    let down = s.votes_down.unwrap_or(0) as f64;
    (up, down, s.votes_up.is_some() || s.votes_down.is_some())
}

/// Age in seconds at `now` (clamped at 0), where the document has a date.
fn age_seconds(s: &SocialSignals, now: i64) -> Option<f64> {
    s.published_at.map(|t| (now - t).max(0) as f64)
}

/// Reddit hot of a document with a date.
pub(crate) fn hot_of(s: &SocialSignals) -> Option<f64> {
    let (up, down, _) = votes(s);
    s.published_at.map(|t| reddit_hot(up - down, t))
}

/// Hacker News gravity of a document with a date and votes.
pub(crate) fn gravity_of(s: &SocialSignals, params: &SocialParams, now: i64) -> Option<f64> {
    let (up, down, has_votes) = votes(s);
    let age = age_seconds(s, now).filter(|_| has_votes)?;
    Some(gravity(up - down, age / 3600.0, params.gravity))
}

/// The Wilson lower bound of a document's up-vote share (at least one vote).
pub(crate) fn wilson_of(s: &SocialSignals, params: &SocialParams) -> Option<f64> {
    let (up, down, _) = votes(s);
    wilson_lower_bound(up, up + down, params.wilson_z)
}

/// The Bayesian average of a document with a rating and its count; `global_rating` is the
/// collection's count-weighted mean (C).
pub(crate) fn bayes_of(
    s: &SocialSignals,
    params: &SocialParams,
    global_rating: Option<f64>,
) -> Option<f64> {
    let (r, v) = (s.rating?, s.rating_count?);
    Some(bayesian_average(
        r,
        v as f64,
        params.bayes_prior_count,
        global_rating.unwrap_or(r),
    ))
}

impl SocialScores {
    /// The scores of a document with `signals` at `now`; `global_rating` is the collection's
    /// count-weighted mean rating (C), `None` when nothing is rated.
    pub fn of(
        signals: &SocialSignals,
        params: &SocialParams,
        now: i64,
        global_rating: Option<f64>,
    ) -> SocialScores {
        let (up, down, has_votes) = votes(signals);
        let age_days = age_seconds(signals, now).map(|s| s / 86_400.0);
        SocialScores {
            age_days,
            decay: age_days.map(|a| decay(a, params.half_life_days)),
            hot: hot_of(signals),
            gravity: gravity_of(signals, params, now),
            wilson: wilson_of(signals, params),
            bayes: bayes_of(signals, params, global_rating),
            net_votes: has_votes.then_some(up - down),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 30, N10: one valid document (rating 1e300 from 10¹⁰ raters) keeps its own key
    /// and the collection's mean finite, whatever C is.
    #[test]
    fn extreme_ratings_keep_the_bayesian_average_finite() {
        let mut sum = crate::text::columns::RatingSum::default();
        sum.add_rating(1e300, 10_000_000_000);
        sum.add_rating(4.0, 12);
        let c = sum.mean().unwrap();
        assert!(c.is_finite());
        for (r, v, m, c) in [
            (1e300, 1e10, 10.0, c),
            (1e300, 1e10, 10.0, 3.5),
            (f64::MAX, 1e10, 10.0, f64::MAX),
            (-f64::MAX, 1e10, 10.0, f64::MAX),
            (4.0, 12.0, 10.0, c),
        ] {
            let b = bayesian_average(r, v, m, c);
            assert!(b.is_finite(), "{r} {v} {m} {c}: {b}");
            assert!(r.min(c) <= b && b <= r.max(c), "{r} {v} {m} {c}: {b}");
        }
        // Ordinary values keep the formula's own rounding.
        assert_eq!(bayesian_average(4.0, 12.0, 10.0, 3.5), (48.0 + 35.0) / 22.0);
    }

    #[test]
    fn wilson_matches_the_published_intervals() {
        // Seed notes (book §7.4, corrected): 95% Wilson lower bounds 8/10 → 0.490,
        // 80/100 → 0.711, 1/1 → 0.207, 95/100 → 0.888.
        let lb = |up: f64, n: f64| wilson_lower_bound(up, n, 1.96).unwrap();
        assert!((lb(8.0, 10.0) - 0.490).abs() < 5e-4, "{}", lb(8.0, 10.0));
        assert!((lb(80.0, 100.0) - 0.711).abs() < 5e-4);
        assert!((lb(1.0, 1.0) - 0.207).abs() < 5e-4);
        assert!((lb(95.0, 100.0) - 0.888).abs() < 5e-4);
        assert_eq!(wilson_lower_bound(0.0, 0.0, 1.96), None);
    }

    #[test]
    fn reddit_hot_puts_the_sign_on_the_vote_term() {
        // The book's examples: (10000 up, 10001 down) → log term 0 but sign −1; (10, 0) → 1.
        let t = REDDIT_EPOCH + 45000;
        assert!((reddit_hot(10.0, t) - 2.0).abs() < 1e-12);
        assert!((reddit_hot(-1.0, t) - 1.0).abs() < 1e-12);
        assert!((reddit_hot(-100.0, t) - (-2.0 + 1.0)).abs() < 1e-12);
        // A net-negative post is not sent ~10^4 units down (the book's sign placement).
        assert!(reddit_hot(-1.0, t) > 0.5);
    }

    #[test]
    fn gravity_decay_and_bayes_by_hand() {
        // (10 − 1) / (22 + 2)^1.8
        assert!((gravity(10.0, 22.0, 1.8) - 9.0 / 24f64.powf(1.8)).abs() < 1e-15);
        assert!((decay(365.0, 365.0) - 0.5).abs() < 1e-15);
        // (2·5 + 10·3) / (2 + 10) = 40/12
        assert!((bayesian_average(5.0, 2.0, 10.0, 3.0) - 40.0 / 12.0).abs() < 1e-15);
    }

    #[test]
    fn scores_need_their_fields() {
        let p = SocialParams::default();
        let none = SocialScores::of(&SocialSignals::default(), &p, 0, None);
        assert_eq!(none, SocialScores::default());
        let dated = SocialSignals {
            published_at: Some(1_700_000_000),
            ..SocialSignals::default()
        };
        let s = SocialScores::of(&dated, &p, 1_700_000_000 + 86_400, None);
        assert_eq!(s.age_days, Some(1.0));
        assert!(s.hot.is_some() && s.gravity.is_none() && s.wilson.is_none());
        let future = SocialScores::of(&dated, &p, 1_600_000_000, None);
        assert_eq!(future.age_days, Some(0.0));
    }
}
