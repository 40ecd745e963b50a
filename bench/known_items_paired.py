#!/usr/bin/env python3
"""Trees against the linear model on the Rust-docs known items, paired (issue 15).

    python bench/known_items_paired.py --data DATA [--seeds 1,2,3] [--rankd target/release/rankd]

DATA is a demo data directory (`rankd demo --no-serve --data-dir DATA`): its index, link
scores and the known-item judgments the demo derived (DATA/known-items/{train,test}.*). On
that one index, for every seed, `rankd train --queries train.queries --qrels train.qrels`
trains a reranker of each kind with the defaults of training on the index (`--model linear`,
`--model gbdt`), and `rankd eval --model bm25f --rerank MODEL --per-query` scores the held-out
test queries. Because every model reranks the same BM25F windows of the same index, the
comparison is paired per query: the reciprocal rank of each test query, averaged over
seeds, gbdt minus linear, with a paired t-test over the queries and one over the seeds'
MRRs. (Comparing separate demo builds adds the builds' own spread: multi-threaded indexing
orders documents differently, which moves ties at the window's edge.)

Prints a markdown table and the tests; `--json` prints the numbers instead.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

from scipy import stats

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def t_test(diffs):
    """Paired t-test of mean(diffs) = 0: (mean, t, two-sided p)."""
    res = stats.ttest_1samp(diffs, 0.0)
    return statistics.fmean(diffs), float(res.statistic), float(res.pvalue)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out.stdout


def per_query_rr(args, data, model_file):
    ki = os.path.join(data, "known-items")
    cmd = [args.rankd, "eval", "--queries", os.path.join(ki, "test.queries"),
           "--qrels", os.path.join(ki, "test.qrels"), "--model", "bm25f",
           "--per-query", "--json", "--data-dir", data]
    if model_file:
        cmd += ["--rerank", model_file]
    report = json.loads(run(cmd))
    return {q: v["rr"] for q, v in report["per_query"].items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--rankd", default=os.path.join(ROOT, "target", "release", "rankd"))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    ki = os.path.join(args.data, "known-items")
    base = per_query_rr(args, args.data, None)
    rr = {}  # kind -> seed -> qid -> rr
    seconds = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ["linear", "gbdt"]:
            rr[kind], seconds[kind] = {}, []
            for seed in seeds:
                out = os.path.join(tmp, f"{kind}-{seed}.json")
                started = time.perf_counter()
                run([
                    args.rankd, "train", "--queries", os.path.join(ki, "train.queries"),
                    "--qrels", os.path.join(ki, "train.qrels"), "--data-dir", args.data,
                    "--model", kind, "--seed", str(seed), "--out", out, "--json"])
                seconds[kind].append(time.perf_counter() - started)
                rr[kind][seed] = per_query_rr(args, args.data, out)
    qids = sorted(base)
    mean_over_seeds = {k: {q: statistics.fmean(rr[k][s][q] for s in seeds) for q in qids} for k in rr}
    mrr = {k: [statistics.fmean(rr[k][s][q] for q in qids) for s in seeds] for k in rr}
    per_query = t_test([mean_over_seeds["gbdt"][q] - mean_over_seeds["linear"][q] for q in qids])
    per_seed = t_test([g - l for g, l in zip(mrr["gbdt"], mrr["linear"])])
    result = {
        "queries": len(qids), "seeds": seeds,
        "bm25f_mrr": statistics.fmean(base.values()),
        "linear_mrr": mrr["linear"], "gbdt_mrr": mrr["gbdt"],
        "train_seconds": seconds,
        "gbdt_minus_linear_per_query": {"mean": per_query[0], "t": per_query[1], "p": per_query[2]},
        "gbdt_minus_linear_per_seed": {"mean": per_seed[0], "t": per_seed[1], "p": per_seed[2]},
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"{len(qids)} held-out known-item queries, seeds {seeds}; MRR per seed")
    print("| reranker | MRR per seed | mean | `rankd train` s (mean, features included) |")
    print("|---|---|---|---|")
    print(f"| none (BM25F) | — | {result['bm25f_mrr']:.4f} | — |")
    for k in ["linear", "gbdt"]:
        print(f"| {k} | {', '.join(f'{m:.4f}' for m in mrr[k])} | {statistics.fmean(mrr[k]):.4f} "
              f"| {statistics.fmean(seconds[k]):.1f} |")
    print(f"gbdt − linear, paired over queries (RR averaged over seeds): {per_query[0]:+.4f} "
          f"(t {per_query[1]:.2f}, p {per_query[2]:.3f})")
    print(f"gbdt − linear, paired over seeds (MRR): {per_seed[0]:+.4f} "
          f"(t {per_seed[1]:.2f}, p {per_seed[2]:.3f})")


if __name__ == "__main__":
    main()
