#!/usr/bin/env python3
"""Objectives compared by 5-fold cross-validation (`rankd cv`) on judgments over an index, with
per-query paired tests:

    cargo build --release
    # Rust-docs known items (derived as docs/EVALUATION.md does: `rankd known-items --max 3000
    # --seed 1`), the demo's cross-validation settings:
    rankd demo --no-serve --data-dir DATA
    bench/.venv/bin/python bench/cv_objectives.py --data-dir DATA [--lrs 0.002,0.005,0.02]
    # Cranfield (variant A judgments), with the Cranfield section's settings:
    bench/.venv/bin/python bench/cv_objectives.py --data-dir CRAN --name cranfield \
        --queries ../shared/data/cranfield/cran.qry --qrels ../shared/data/cranfield/cranqrel \
        --format cranfield --lrs 0.001,0.003,0.01 --cv-flags=--select

- runs `rankd cv` (linear model, epochs 300, patience 30, seed 1, plus --cv-flags) once per
  objective x learning rate, writing each cross-validated reranked run;
- scores every run per query with pytrec_eval (AP and reciprocal rank; an independent
  implementation of trec_eval's measures; files read, and Cranfield's relevance codes mapped,
  by bench/trec_crosscheck.py's readers, not by rankd) and tests each objective against the first (stable AP with
  the paper's weighting) at the same learning rate with a paired randomization test over
  queries (100 000 sign flips).
Prints a markdown table; writes runs and JSON to bench/out/cv-objectives/NAME/.
"""
import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytrec_eval

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from trec_crosscheck import cranfield_qrels, read_qrels, read_run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# An objective with extra flags is written "name:flags" (e.g. the demo's stable AP, t = 0).
OBJECTIVES = ["stable-ap", "stable-ap:--weight-t 0", "ranknet", "smooth-ap", "soprc"]


def paired_p(a, b, samples=100_000, seed=1):
    """Two-sided paired randomization test of mean(a - b) = 0 (random sign flips)."""
    d = np.asarray(a) - np.asarray(b)
    observed = abs(d.mean())
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, samples, 10_000):
        signs = rng.choice([-1.0, 1.0], size=(min(10_000, samples - start), len(d)))
        hits += int((np.abs((signs * d).mean(axis=1)) >= observed - 1e-15).sum())
    return (hits + 1) / (samples + 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--rankd", default=os.path.join(ROOT, "target", "release", "rankd"))
    ap.add_argument("--lrs", default="0.002,0.005,0.02")
    ap.add_argument("--objectives", default=",".join(OBJECTIVES),
                    help="comma-separated; the first is the baseline of the paired tests")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--name", default="known-items", help="output subdirectory")
    ap.add_argument("--queries", help="judged queries (default: derive the Rust-docs known items)")
    ap.add_argument("--qrels")
    ap.add_argument("--format", default="trec", choices=["trec", "cranfield"])
    ap.add_argument("--cv-flags", default="", help="extra `rankd cv` flags for every run")
    args = ap.parse_args()
    out_dir = os.path.join(ROOT, "bench", "out", "cv-objectives", args.name)
    os.makedirs(out_dir, exist_ok=True)
    if args.queries:
        queries, qrels_path = args.queries, args.qrels
    else:
        queries, qrels_path = os.path.join(out_dir, "ki.q"), os.path.join(out_dir, "ki.qrels")
        subprocess.run([args.rankd, "known-items", "--queries-out", queries, "--qrels-out",
                        qrels_path, "--max", "3000", "--seed", "1"], check=True,
                       capture_output=True)
    # Cranfield's relevance codes mapped by the cross-check's own reader (variant A), not rankd.
    qrels = cranfield_qrels("A") if args.format == "cranfield" else read_qrels(qrels_path)
    lrs = args.lrs.split(",")
    objectives = args.objectives.split(",")

    def cv(job):
        objective, lr = job
        name, _, flags = objective.partition(":")
        run = os.path.join(out_dir, f"run-{objective.replace(' ', '').replace(':', '')}-{lr}.txt")
        out = subprocess.run([args.rankd, "cv", "--queries", queries, "--qrels", qrels_path,
                              "--format", args.format, "--data-dir", args.data_dir, "--model",
                              "linear", "--objective", name, "--lr", lr, "--epochs", "300",
                              "--patience", "30", "--seed", "1", "--run", run, "--json"]
                             + flags.split() + args.cv_flags.split(),
                             check=True, capture_output=True, text=True).stdout
        return job, json.loads(out), run

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(cv, [(o, lr) for o in objectives for lr in lrs]))

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"map", "recip_rank"})
    per_query, rows = {}, []
    for (objective, lr), report, run in results:
        scored = evaluator.evaluate(read_run(run))
        # Queries with no document in the run (none expected) count 0, as trec_eval -c.
        per_query[(objective, lr)] = {
            m: [scored.get(q, {}).get(m, 0.0) for q in sorted(qrels)] for m in ("map", "recip_rank")}
        rows.append((objective, lr, report))
    with open(os.path.join(out_dir, "cv_objectives.json"), "w") as f:
        json.dump({"rankd": [{"objective": o, "lr": lr, **r} for o, lr, r in rows],
                   "per_query": {f"{o} {lr}": v for (o, lr), v in per_query.items()}}, f)

    print("| objective (linear) | lr | MAP | MRR | nDCG@10 | MAP − stable AP (p) | MRR − stable AP (p) | "
          "pytrec_eval MAP |")
    print("|---|---|---|---|---|---|---|---|")
    for objective, lr, report in rows:
        m = report["reranked"]
        mine, base = per_query[(objective, lr)], per_query.get((objectives[0], lr))
        diff = ""
        if base is not None and objective != objectives[0]:
            cells = []
            for metric in ("map", "recip_rank"):
                delta = np.mean(mine[metric]) - np.mean(base[metric])
                cells.append(f"{delta:+.4f} ({paired_p(mine[metric], base[metric]):.3g})")
            diff = " | ".join(cells)
        else:
            diff = "— | —"
        print(f"| {objective} | {lr} | {m['map']:.4f} | {m['mrr']:.4f} | {m['ndcg@10']:.4f} | {diff} | "
              f"{np.mean(mine['map']):.4f} |")
    base = results[0][1]["baseline"]
    print(f"| BM25F (first phase) | — | {base['map']:.4f} | {base['mrr']:.4f} | {base['ndcg@10']:.4f} | | | |")


if __name__ == "__main__":
    main()
