//! The pairwise core: SIMD kernels and their scalar twins (SPEC §7).
//!
//! Three kernels, each in a portable scalar version (`scalar.rs`) and an x86-64 version written
//! once over the vector width (`generic.rs`, over `vector.rs`'s `Vector`) and run at two
//! widths (`sse.rs`: SSE4.1, 4 lanes; `avx2.rs`: AVX2 + FMA, 8 lanes), plus the exact sorted
//! algorithm for the one-sided Huber loss (`sorted.rs`):
//!
//! 1. [`score_block`]: `s = X·w` for a row-major `n × d` block (linear model, MLP first layer).
//! 2. [`pair_loss_grad`]: `Σ_i v_i Σ_j ℓ(s⁺_i − s⁻_j)` and its gradient w.r.t. every score.
//! 3. [`pair_counts`]: per-positive counts of negatives below / tied (AUC and AP numerators).
//!
//! The instruction set is chosen once per process ([`Isa::active`]): the best the CPU
//! supports, or the one named by `RANKD_SIMD=scalar|sse|avx2` (for tests and benchmarks).
//! The `*_with` functions take an explicit [`Isa`] / [`Kernel`] so tests can run every path.
//!
//! Numerics, stated once for the whole module:
//! - Scoring is **bit-for-bit identical** on every path: all paths add the products in the
//!   same order (16 strided partial sums, then a fixed reduction tree, see `scalar::dot`) and
//!   none uses FMA, so no rounding differs.
//! - Loss and gradient sums: per-pair terms are f32; the scalar twin sums them in f64, the
//!   SIMD paths sum blocks of at most 64 terms per lane in f32 and then carry on in f64. All
//!   terms have the same sign (see `loss.rs`), so the relative error of a SIMD sum is at most
//!   about 64·2⁻²⁴ ≈ 4e-6 on top of the per-term f32 rounding.
//! - Bad input is an error, never a panic or a NaN: scores and weights must be finite,
//!   weights non-negative, lengths consistent. A loss term too large for f32 (e.g. the
//!   squared hinge of a difference of 1e20) is +inf and makes the loss +inf, never NaN.

mod counts;
mod loss;
mod scalar;
mod sorted;

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod generic;
#[cfg(target_arch = "x86_64")]
mod sse;
#[cfg(target_arch = "x86_64")]
mod vector;

use std::sync::OnceLock;

pub use counts::PairCount;
pub use loss::Loss;

/// The Huber loss uses the sorted algorithm when `n⁺·n⁻ ≥ SORTED_CROSSOVER·(n⁺ + n⁻)`: the
/// all-pairs kernel costs ∝ n⁺·n⁻, the sorted one ∝ n⁺ + n⁻ (its log factor is small at
/// these sizes), so the ratio of the two decides, whatever the shape of the query. Measured
/// with `benches/pairwise.rs` (group `crossover`, queries 1:1 and 1:9); the table is in
/// docs/BENCHMARKS.md "Pairwise core".
pub const SORTED_CROSSOVER: usize = 80;

/// An instruction set a kernel can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Isa {
    /// Plain Rust loops; every architecture.
    Scalar,
    /// x86-64 SSE4.1 (128-bit lanes, no FMA).
    Sse41,
    /// x86-64 AVX2 with FMA (256-bit lanes).
    Avx2,
}

impl Isa {
    /// Every instruction set, slowest first.
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Sse41, Isa::Avx2];

    /// Whether this CPU can run the path.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Sse41 => std::arch::is_x86_feature_detected!("sse4.1"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The paths this CPU supports, slowest first.
    pub fn available() -> Vec<Isa> {
        Isa::ALL
            .into_iter()
            .filter(|isa| isa.is_available())
            .collect()
    }

    /// The best available path, or `RANKD_SIMD` if set to an available one. Decided once.
    pub fn active() -> Isa {
        static ACTIVE: OnceLock<Isa> = OnceLock::new();
        *ACTIVE.get_or_init(|| {
            let best = *Isa::available().last().unwrap_or(&Isa::Scalar);
            match std::env::var("RANKD_SIMD") {
                Err(_) => best,
                Ok(name) => match Isa::parse(&name) {
                    Some(isa) if isa.is_available() => isa,
                    _ => {
                        tracing::warn!(requested = %name, using = ?best,
                            "RANKD_SIMD names no instruction set this CPU supports \
                             (expected scalar, sse or avx2)");
                        best
                    }
                },
            }
        })
    }

    /// `scalar`, `sse` / `sse4.1`, `avx2` (case-insensitive).
    pub fn parse(name: &str) -> Option<Isa> {
        match name.trim().to_ascii_lowercase().as_str() {
            "scalar" => Some(Isa::Scalar),
            "sse" | "sse4.1" | "sse41" => Some(Isa::Sse41),
            "avx2" => Some(Isa::Avx2),
            _ => None,
        }
    }
}

/// How [`pair_loss_grad_with`] computes the loss: all pairs on an instruction set, or the
/// exact sorted algorithm (one-sided Huber only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    AllPairs(Isa),
    Sorted,
}

/// What was wrong with the input to a pairwise kernel.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PairwiseError {
    #[error("{what} has length {got}, expected {expected}")]
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{what}[{index}] is {value}, expected a finite number")]
    NonFinite {
        what: &'static str,
        index: usize,
        value: f32,
    },
    #[error("weight v[{index}] is {value}, expected a finite non-negative number")]
    BadWeight { index: usize, value: f32 },
    #[error("loss parameter {name} = {value} is out of range")]
    BadParameter { name: &'static str, value: f32 },
    #[error("row {row} scored {value}: the row holds a non-finite value or the dot product overflows f32")]
    NonFiniteScore { row: usize, value: f32 },
    #[error("the sorted algorithm exists only for the one-sided Huber loss, not {0:?}")]
    SortedNeedsHuber(Loss),
    #[error("this CPU cannot run the {0:?} path")]
    IsaUnavailable(Isa),
}

fn check_len(what: &'static str, got: usize, expected: usize) -> Result<(), PairwiseError> {
    if got == expected {
        Ok(())
    } else {
        Err(PairwiseError::LengthMismatch {
            what,
            expected,
            got,
        })
    }
}

fn check_finite(what: &'static str, values: &[f32]) -> Result<(), PairwiseError> {
    match first_non_finite(values) {
        None => Ok(()),
        Some(index) => Err(PairwiseError::NonFinite {
            what,
            index,
            value: values[index],
        }),
    }
}

/// Index of the first NaN or ±inf. The common all-finite case is one branch-free pass over
/// the exponent bits (all ones ⇔ not finite), which the compiler vectorises; an early-exit
/// search would cost a compare-and-branch per element, as much as scoring a short block.
pub(crate) fn first_non_finite(values: &[f32]) -> Option<usize> {
    const EXPONENT: u32 = 0x7f80_0000;
    let any = values
        .iter()
        .fold(false, |bad, v| bad | (v.to_bits() & EXPONENT == EXPONENT));
    if any {
        values.iter().position(|v| !v.is_finite())
    } else {
        None
    }
}

fn check_isa(isa: Isa) -> Result<(), PairwiseError> {
    if isa.is_available() {
        Ok(())
    } else {
        Err(PairwiseError::IsaUnavailable(isa))
    }
}

/// Scores a candidate block: `out[r] = Σ_k x[r·d + k] · w[k]` (SPEC §7 item 1), on the
/// active instruction set. `x` is row-major `n × d`. Every output is finite or the call
/// fails with [`PairwiseError::NonFiniteScore`] naming the first bad row (checking the n
/// outputs catches any NaN/inf in X without a second pass over the block).
pub fn score_block(
    x: &[f32],
    n: usize,
    d: usize,
    w: &[f32],
    out: &mut [f32],
) -> Result<(), PairwiseError> {
    score_block_with(Isa::active(), x, n, d, w, out)
}

/// [`score_block`] on an explicit instruction set.
pub fn score_block_with(
    isa: Isa,
    x: &[f32],
    n: usize,
    d: usize,
    w: &[f32],
    out: &mut [f32],
) -> Result<(), PairwiseError> {
    check_isa(isa)?;
    let cells = n.checked_mul(d).ok_or(PairwiseError::LengthMismatch {
        what: "x",
        expected: usize::MAX,
        got: x.len(),
    })?;
    check_len("x", x.len(), cells)?;
    check_len("w", w.len(), d)?;
    check_len("out", out.len(), n)?;
    check_finite("w", w)?;
    match isa {
        Isa::Scalar => scalar::score_block(x, d, w, out),
        #[cfg(target_arch = "x86_64")]
        Isa::Sse41 => sse::score_block(x, d, w, out),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::score_block(x, d, w, out),
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("check_isa admits only Scalar off x86-64"),
    }
    match first_non_finite(out) {
        None => Ok(()),
        Some(row) => Err(PairwiseError::NonFiniteScore {
            row,
            value: out[row],
        }),
    }
}

/// The loss `Σ_i v_i Σ_j ℓ(pos_i − neg_j)` of one query (SPEC §7 item 2) and its gradient:
/// `grad_pos[i] = ∂/∂pos_i`, `grad_neg[j] = ∂/∂neg_j` (both overwritten). `v` holds one
/// non-negative weight per positive (treated as constants, as SPEC §3.3 requires).
///
/// Picks the sorted algorithm for the Huber loss on queries above [`SORTED_CROSSOVER`], else
/// the all-pairs kernel on [`Isa::active`].
pub fn pair_loss_grad(
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    loss: Loss,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> Result<f64, PairwiseError> {
    let pairs = pos.len().saturating_mul(neg.len());
    let sorted_wins = matches!(loss, Loss::Huber { .. })
        && pairs >= SORTED_CROSSOVER.saturating_mul(pos.len() + neg.len());
    let kernel = if sorted_wins {
        Kernel::Sorted
    } else {
        Kernel::AllPairs(Isa::active())
    };
    pair_loss_grad_with(kernel, pos, neg, v, loss, grad_pos, grad_neg)
}

/// [`pair_loss_grad`] with an explicit kernel.
pub fn pair_loss_grad_with(
    kernel: Kernel,
    pos: &[f32],
    neg: &[f32],
    v: &[f32],
    loss: Loss,
    grad_pos: &mut [f64],
    grad_neg: &mut [f64],
) -> Result<f64, PairwiseError> {
    loss.validate()?;
    check_len("v", v.len(), pos.len())?;
    check_len("grad_pos", grad_pos.len(), pos.len())?;
    check_len("grad_neg", grad_neg.len(), neg.len())?;
    check_finite("pos", pos)?;
    check_finite("neg", neg)?;
    if let Some(index) = v.iter().position(|w| !(w.is_finite() && *w >= 0.0)) {
        return Err(PairwiseError::BadWeight {
            index,
            value: v[index],
        });
    }
    match kernel {
        Kernel::Sorted => match loss {
            Loss::Huber { tau } => Ok(sorted::huber_loss_grad(
                pos, neg, v, tau, grad_pos, grad_neg,
            )),
            other => Err(PairwiseError::SortedNeedsHuber(other)),
        },
        Kernel::AllPairs(isa) => {
            check_isa(isa)?;
            Ok(match isa {
                Isa::Scalar => scalar::pair_loss_grad(pos, neg, v, loss, grad_pos, grad_neg),
                #[cfg(target_arch = "x86_64")]
                Isa::Sse41 => sse::pair_loss_grad(pos, neg, v, loss, grad_pos, grad_neg),
                #[cfg(target_arch = "x86_64")]
                Isa::Avx2 => avx2::pair_loss_grad(pos, neg, v, loss, grad_pos, grad_neg),
                #[cfg(not(target_arch = "x86_64"))]
                _ => unreachable!("check_isa admits only Scalar off x86-64"),
            })
        }
    }
}

/// Pair counts for AUC / AP numerators (SPEC §7 item 3). For every positive,
/// `per_positive[i]` receives how many negatives score strictly below it and how many tie
/// with it; the return value is the total. Ties count ½ in [`PairCount::auc_numerator`];
/// `-0.0` ties `+0.0`. Infinite scores are ordered as usual; NaN is an error.
pub fn pair_counts(
    pos: &[f32],
    neg: &[f32],
    per_positive: &mut [PairCount],
) -> Result<PairCount, PairwiseError> {
    pair_counts_with(Isa::active(), pos, neg, per_positive)
}

/// [`pair_counts`] on an explicit instruction set.
pub fn pair_counts_with(
    isa: Isa,
    pos: &[f32],
    neg: &[f32],
    per_positive: &mut [PairCount],
) -> Result<PairCount, PairwiseError> {
    check_isa(isa)?;
    check_len("per_positive", per_positive.len(), pos.len())?;
    for (what, values) in [("pos", pos), ("neg", neg)] {
        if let Some(index) = values.iter().position(|s| s.is_nan()) {
            return Err(PairwiseError::NonFinite {
                what,
                index,
                value: values[index],
            });
        }
    }
    match isa {
        Isa::Scalar => scalar::pair_counts(pos, neg, per_positive),
        #[cfg(target_arch = "x86_64")]
        Isa::Sse41 => sse::pair_counts(pos, neg, per_positive),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => avx2::pair_counts(pos, neg, per_positive),
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("check_isa admits only Scalar off x86-64"),
    }
    Ok(per_positive
        .iter()
        .fold(PairCount::default(), |total, c| PairCount {
            below: total.below + c.below,
            ties: total.ties + c.ties,
        }))
}

/// This core's read throughput (GB/s) for a block of `bytes` bytes streamed once per pass:
/// the memory-side bound of [`score_block`], which reads each element of `X` once (2 flops per
/// 4 bytes, so the bound in GFLOP/s is GB/s ÷ 2). The block is cache-line aligned and stays in
/// whichever cache level it fits, as a block being scored does. `None` without AVX2 + FMA.
pub fn measured_read_gbs(bytes: usize) -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        if Isa::Avx2.is_available() {
            let block = aligned_vec::AVec::<f32>::from_iter(0, (0..bytes.div_ceil(4)).map(|_| 1.0));
            return Some(avx2::read_gbs(&block, 5));
        }
    }
    let _ = bytes;
    None
}

/// This CPU's single-core peak f32 FMA throughput in GFLOP/s, measured with a register-only
/// FMA loop (`None` without AVX2 + FMA). Benchmarks report block scoring as a share of it.
pub fn measured_peak_gflops() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        if Isa::Avx2.is_available() {
            return Some(avx2::peak_fma_gflops());
        }
    }
    None
}
