#!/usr/bin/env python3
"""Rank fusion on Cranfield for docs/EVALUATION.md: MAP and nDCG@10 of every fusion method
against its best input, with a paired randomization test over queries.

Ingests Cranfield into a temporary data directory, runs `rankd eval` (depth 100, judgment
variant A, the models' default field `all`) for each of the six first-phase models and for
`--model fusion` over (a) all six, (b) bm25f, lm, bm25prox and (c) the five single-field
models, with every method, and prints
a Markdown table. The best input is the input with the highest MAP (resp. nDCG@10); the test
is a two-sided paired randomization test (100,000 sign flips of the per-query differences).

Run from the crate root: bench/.venv/bin/python bench/fusion_eval.py [--binary target/release/rankd]
"""

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
CRANFIELD = ROOT.parent / "shared" / "data" / "cranfield"
MODELS = ["tfidf", "bm25", "bm25f", "f2exp", "lm", "bm25prox"]
METHODS = [("rrf", []), ("combsum", []), ("combsum", ["--fusion-norm", "zscore"]),
           ("combmnz", []), ("borda", []), ("condorcet", [])]
INPUT_SETS = [MODELS, ["bm25f", "lm", "bm25prox"], ["tfidf", "bm25", "f2exp", "lm", "bm25prox"]]
DEPTH = "100"


def evaluate(binary, data, *args):
    cmd = [binary, "eval", "--format", "cranfield", "--queries", str(CRANFIELD / "cran.qry"),
           "--qrels", str(CRANFIELD / "cranqrel"), "--depth", DEPTH, "--data-dir", str(data),
           "--json", "--per-query", *args]
    report = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    per_query = report["per_query"]
    qids = sorted(per_query)
    # Per query, MAP's term is AP.
    return {m: np.array([per_query[q]["ap" if m == "map" else m] for q in qids])
            for m in ("map", "ndcg@10")}


def paired_p(a, b, samples=100_000, seed=7):
    d = a - b
    rng = np.random.default_rng(seed)
    signs = rng.choice([-1.0, 1.0], size=(samples, d.size))
    observed = abs(d.mean())
    return float(((np.abs((signs * d).mean(axis=1)) >= observed - 1e-15).sum() + 1) / (samples + 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "rankd"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        subprocess.run([args.binary, "ingest", "--format", "cranfield", "--input", str(CRANFIELD),
                        "--data-dir", str(data), "--json"], check=True, capture_output=True)
        single = {m: evaluate(args.binary, data, "--model", m) for m in MODELS}
        print("| inputs | method | MAP | Δ MAP vs best input (p) | nDCG@10 | Δ nDCG@10 vs best input (p) |")
        print("|---|---|---|---|---|---|")
        for inputs in INPUT_SETS:
            best = {m: max(inputs, key=lambda x: single[x][m].mean()) for m in ("map", "ndcg@10")}
            label = ",".join(inputs)
            print(f"| {label} | best input | {single[best['map']]['map'].mean():.4f} ({best['map']}) "
                  f"| | {single[best['ndcg@10']]['ndcg@10'].mean():.4f} ({best['ndcg@10']}) | |")
            for method, flags in METHODS:
                fused = evaluate(args.binary, data, "--model", "fusion", "--inputs", label,
                                 "--fusion", method, *flags)
                cells = []
                for m in ("map", "ndcg@10"):
                    base = single[best[m]][m]
                    delta = fused[m].mean() - base.mean()
                    cells += [f"{fused[m].mean():.4f}", f"{delta:+.4f} ({paired_p(fused[m], base):.3g})"]
                name = method + ("".join(" " + f.lstrip("-") for f in flags))
                print(f"| {label} | {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
