#!/usr/bin/env python3
"""numpy peer for the pairwise core benchmark (issue 3, SPEC §7).

The all-pairs one-sided Huber loss and its gradient, vectorised the way a numpy user would
write it (float32, one (n+ x n-) difference matrix), on the same sizes and the same kind of
inputs as `benches/pairwise.rs` (scores in (0, 1), tau = 0.1). Prints one JSON object:
median seconds per call over several timed repeats, per size.

Run single-threaded so it compares with rankd's single-threaded kernels:

    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 bench/.venv/bin/python bench/pairwise_numpy.py

It also checks its own gradient against a float64 finite difference on a small query and
exits non-zero if that fails, so a wrong peer cannot produce a flattering ratio.
"""

import json
import statistics
import sys
import timeit

import numpy as np

TAU = np.float32(0.1)
SIZES = [(10, 90), (100, 900), (1000, 9000)]


def huber_loss_grad(pos, neg, v, tau):
    """Return (loss, grad_pos, grad_neg) of sum_i v_i sum_j l(pos_i - neg_j)."""
    x = pos[:, None] - neg[None, :]
    t = 1 - x / tau
    u = np.maximum(t, 0)
    c = np.minimum(u, 1)  # l'(x) = -(2/tau) c
    # float32 throughout (numpy's pairwise summation keeps that accurate): the fastest
    # natural numpy form, so the comparison does not flatter rankd.
    loss = float(v @ (c * c + 2 * (u - c)).sum(axis=1))
    grad_pos = -(2 / tau) * v * c.sum(axis=1)
    grad_neg = (2 / tau) * (v @ c)
    return loss, grad_pos, grad_neg


def huber_f64(x, tau):
    return np.where(x < 0, 1 - 2 * x / tau, np.where(x < tau, (1 - x / tau) ** 2, 0.0))


def self_check():
    rng = np.random.default_rng(0)
    pos, neg = rng.uniform(0, 1, 7), rng.uniform(0, 1, 11)
    v = rng.uniform(0.1, 1, 7)
    tau = 0.1
    _, gp, gn = huber_loss_grad(pos.astype(np.float32), neg.astype(np.float32),
                                v.astype(np.float32), np.float32(tau))

    def total(p, n):
        return float(v @ huber_f64(p[:, None] - n[None, :], tau).sum(axis=1))

    h = 1e-6
    for i in range(len(pos)):
        e = np.zeros_like(pos)
        e[i] = h
        fd = (total(pos + e, neg) - total(pos - e, neg)) / (2 * h)
        if abs(fd - gp[i]) > 1e-3 * max(1.0, abs(fd)):
            sys.exit(f"numpy peer gradient wrong: grad_pos[{i}] {gp[i]} vs fd {fd}")
    for j in range(len(neg)):
        e = np.zeros_like(neg)
        e[j] = h
        fd = (total(pos, neg + e) - total(pos, neg - e)) / (2 * h)
        if abs(fd - gn[j]) > 1e-3 * max(1.0, abs(fd)):
            sys.exit(f"numpy peer gradient wrong: grad_neg[{j}] {gn[j]} vs fd {fd}")


def main():
    self_check()
    rng = np.random.default_rng(1)
    results = {"numpy": np.__version__, "tau": float(TAU), "median_seconds": {}}
    for n_pos, n_neg in SIZES:
        pos = rng.uniform(0, 1, n_pos).astype(np.float32)
        neg = rng.uniform(0, 1, n_neg).astype(np.float32)
        v = rng.uniform(0.01, 1, n_pos).astype(np.float32)
        timer = timeit.Timer(lambda: huber_loss_grad(pos, neg, v, TAU))
        number, _ = timer.autorange()
        runs = [t / number for t in timer.repeat(repeat=7, number=number)]
        results["median_seconds"][f"{n_pos}x{n_neg}"] = statistics.median(runs)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
