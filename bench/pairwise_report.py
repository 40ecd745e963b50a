#!/usr/bin/env python3
"""Turn one or more runs of the pairwise benchmarks into the tables of docs/BENCHMARKS.md.

Each run directory holds a copy of `target/criterion` (criterion's median estimates) and
`numpy.json` (the output of bench/pairwise_numpy.py from the same run). Every figure in the
tables is the median over the runs of that run's median; ratios are taken within each run
first, then the median of the per-run ratios is reported.

    bench/.venv/bin/python bench/pairwise_report.py bench/out/run1 bench/out/run2 ...
"""

import json
import statistics
import sys
from pathlib import Path

# Nominal flops per pair of the Huber loss+gradient, counted on the AVX2 kernel: x = s⁺ − s⁻,
# t = 1 − x/τ (fma = 2), max, min, u − c, 2(u − c), c·c + … (fma = 2), two lane sums,
# Σ v·c into the negative's gradient (fma = 2): 12.
FLOPS_PER_PAIR = 12
HUBER_SIZES = ["10x90", "100x900", "1000x9000"]
KERNELS = ["scalar", "sse41", "avx2", "sorted"]


def median_ns(run: Path, group: str, function: str, param: str) -> float | None:
    path = run / "criterion" / group / function / param / "new" / "estimates.json"
    if not path.exists():
        return None
    return json.loads(path.read_text())["median"]["point_estimate"]


def pairs(size: str) -> int:
    a, b = size.split("x")
    return int(a) * int(b)


def per_run(runs, fn):
    values = [fn(run) for run in runs]
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(x, digits=2):
    return "—" if x is None else f"{x:.{digits}f}"


def main():
    runs = [Path(p) for p in sys.argv[1:]]
    if not runs:
        sys.exit(__doc__)
    peak = per_run(runs, lambda r: float((r / "criterion" / "peak_fma_gflops.txt").read_text()))
    print(f"Runs: {len(runs)}. Measured single-core peak f32 FMA: {fmt(peak, 1)} GFLOP/s.\n")

    print("All-pairs one-sided Huber loss + gradient (τ = 0.1), median time per call:\n")
    print("| n⁺ × n⁻ | kernel | time (µs) | Mpairs/s | GFLOP/s | × scalar | × numpy |")
    print("|---|---|---|---|---|---|---|")
    for size in HUBER_SIZES:
        for kernel in KERNELS + ["numpy"]:
            def t_ns(run, kernel=kernel):
                if kernel == "numpy":
                    numpy = json.loads((run / "numpy.json").read_text())
                    seconds = numpy["median_seconds"].get(size)
                    return None if seconds is None else seconds * 1e9
                return median_ns(run, "huber_loss_grad", kernel, size)

            t = per_run(runs, t_ns)
            if t is None:
                continue
            mpairs = pairs(size) / t * 1e3
            gflops = None if kernel == "sorted" else pairs(size) * FLOPS_PER_PAIR / t
            vs_scalar = per_run(runs, lambda r: ratio(t_ns(r, "scalar"), t_ns(r)))
            vs_numpy = per_run(runs, lambda r: ratio(t_ns(r, "numpy"), t_ns(r)))
            print(f"| {size} | {kernel} | {fmt(t / 1e3, 1)} | {fmt(mpairs, 0)} | {fmt(gflops)} "
                  f"| {fmt(vs_scalar)} | {fmt(vs_numpy, 1)} |")
        best = per_run(runs, lambda r: best_all_pairs_over_sorted(r, size))
        print(f"| {size} | sorted vs best all-pairs | | | | × {fmt(best)} | |")

    print("\nBlock scoring s = X·w, median time per call, share of the measured FMA peak and of")
    print("the block's read bound (its bytes streamed with nothing else to do, 2 flops per 4 bytes):\n")
    print("| n | d | block | path | time (µs) | GFLOP/s | % of peak | read bound (GFLOP/s) | % of read bound |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n in [24, 100, 1000]:
        for d in [32, 136, 300]:
            shape = f"n{n}_d{d}"
            bound = per_run(runs, lambda r: read_bound(r, shape))
            for isa in ["scalar", "sse41", "avx2"]:
                t = per_run(runs, lambda r: median_ns(r, "score_block", isa, shape))
                if t is None:
                    continue
                gflops = 2 * n * d / t
                # Shares of the peak and bound measured in the same run, then medians over runs.
                share = per_run(runs, lambda r: ratio(
                    200 * n * d / median_ns(r, "score_block", isa, shape),
                    float((r / "criterion" / "peak_fma_gflops.txt").read_text())))
                of_bound = per_run(runs, lambda r: ratio(
                    200 * n * d / median_ns(r, "score_block", isa, shape), read_bound(r, shape)))
                print(f"| {n} | {d} | {n * d * 4 / 1024:.0f} KiB | {isa} | {fmt(t / 1e3)} "
                      f"| {fmt(gflops)} | {fmt(share, 0)} | {fmt(bound)} | {fmt(of_bound, 0)} |")

    print("\nCrossover, sorted vs best all-pairs kernel (time ratio all-pairs / sorted):\n")
    print("| n⁺ × n⁻ | n⁺n⁻/(n⁺+n⁻) | all-pairs (µs) | sorted (µs) | all-pairs / sorted |")
    print("|---|---|---|---|---|")
    for ratio_neg in [1, 9]:
        for n_pos in [16, 32, 64, 96, 128, 192, 256]:
            n_neg = ratio_neg * n_pos
            size = f"{n_pos}x{n_neg}"
            t_all = per_run(runs, lambda r: median_ns(r, "crossover", "allpairs", size))
            t_sorted = per_run(runs, lambda r: median_ns(r, "crossover", "sorted", size))
            speedup = per_run(runs, lambda r: ratio(
                median_ns(r, "crossover", "allpairs", size),
                median_ns(r, "crossover", "sorted", size)))
            balance = n_pos * n_neg / (n_pos + n_neg)
            print(f"| {size} | {balance:.0f} | {fmt(t_all and t_all / 1e3, 1)} "
                  f"| {fmt(t_sorted and t_sorted / 1e3, 1)} | {fmt(speedup)} |")


def read_bound(run, shape):
    """The block's read bound in GFLOP/s (GB/s ÷ 2), or None for runs without it."""
    path = run / "criterion" / "score_block_read_gbs.json"
    if not path.exists():
        return None
    gbs = json.loads(path.read_text()).get(shape)
    return None if gbs is None else gbs / 2


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def best_all_pairs_over_sorted(run, size):
    times = [median_ns(run, "huber_loss_grad", k, size) for k in ["scalar", "sse41", "avx2"]]
    times = [t for t in times if t is not None]
    return ratio(min(times, default=None), median_ns(run, "huber_loss_grad", "sorted", size))


if __name__ == "__main__":
    main()
