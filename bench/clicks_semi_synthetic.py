#!/usr/bin/env python3
"""Learning from clicks, the semi-synthetic test (SPEC §11; docs/EVALUATION.md, "Learning from
clicks"): for each fold, η, session count and seed, `rankd simulate-clicks` draws sessions from
the training labels and `rankd eval-letor --train-clicks` trains with IPS, with unbiased
LambdaMART (`--debias pairwise`, SPEC §11, Hu et al. 2019) and naively; the full-information
model trains on the labels. Prints a Markdown table of test NDCG@10 (mean ± standard deviation
over seeds), the propensity estimates, and pairwise's learned click biases t⁺ against the
truth. t⁺ is learned as (L_k/L_1)^{1/(p+1)} with p = 2, so where the bias is identified t⁺ is
(1/k^η)^{1/3}, not 1/k^η: both the cube of t⁺ and the truth are printed.

`--click-labels binary,graded` compares the two ways clicks become training groups (SPEC §11,
"Inverse propensity scoring"; `src/user_clicks/ips.rs`) on the same sessions, for IPS and naive
alike: one group per clicked document weighted by its Σ c/θ̂ (`binary`), or one group per query
whose shown rows are labelled with their estimated click rates (1/N_q)·Σ c/θ̂ (`graded`). Every
IPS and naive run names its construction (`--click-labels`), so the columns do not depend on
rankd's default.

Folds: `lightgbm` is the example's own split (rank.train / rank.test); `resplit` pools both
files (251 queries) and holds out a seeded fifth of the queries (seed 7) as its test set.

    python3 bench/clicks_semi_synthetic.py --rankd target/release/rankd [--seeds 5]
    python3 bench/clicks_semi_synthetic.py --rankd target/release/rankd --propensity-models pbm \
        --no-pairwise --click-labels binary,graded
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "letor-lightgbm")


def read_groups(path):
    rows = open(path).read().splitlines()
    sizes = [int(s) for s in open(path + ".query").read().split()]
    groups, at = [], 0
    for s in sizes:
        groups.append(rows[at:at + s])
        at += s
    return groups


def write_groups(path, groups):
    with open(path, "w") as f:
        for g in groups:
            f.write("\n".join(g) + "\n")
    with open(path + ".query", "w") as f:
        f.write("\n".join(str(len(g)) for g in groups) + "\n")


def folds(tmp):
    train, test = os.path.join(DATA, "rank.train"), os.path.join(DATA, "rank.test")
    yield "lightgbm", train, test
    pooled = read_groups(train) + read_groups(test)
    order = list(range(len(pooled)))
    random.Random(7).shuffle(order)
    held = set(order[: len(pooled) // 5])
    a, b = os.path.join(tmp, "resplit.train"), os.path.join(tmp, "resplit.test")
    write_groups(a, [g for i, g in enumerate(pooled) if i not in held])
    write_groups(b, [g for i, g in enumerate(pooled) if i in held])
    yield "resplit", a, b


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rankd", required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--etas", default="1,2")
    ap.add_argument("--sessions", default="10000,100000")
    ap.add_argument("--propensity-models", default="pbm,regression-em",
                    help="the click models IPS takes its propensities from, one column each")
    ap.add_argument("--no-pairwise", action="store_true",
                    help="leave out unbiased LambdaMART (--debias pairwise)")
    ap.add_argument("--folds", default="lightgbm,resplit")
    ap.add_argument("--noise-floors", default="none",
                    help="IPS columns per --noise-floor (none: plain IPS; estimate: the affine "
                         "correction with the floor estimated from the sessions), compared in "
                         "the same run; the estimated floor is printed against the truth, 0.1")
    ap.add_argument("--objective", default=None,
                    help="the objective IPS and naive train (default: eval-letor's, stable AP "
                         "trees); pairwise always trains lambda-ndcg trees")
    ap.add_argument("--click-labels", default="binary",
                    help="the constructions IPS and naive train (binary: one group per clicked "
                         "document; graded: one group per query, click rates as labels), one "
                         "column set each; graded takes no noise floor")
    ap.add_argument("--verbose", action="store_true", help="every seed's numbers on stderr")
    args = ap.parse_args()
    floors = args.noise_floors.split(",")
    labels = args.click_labels.split(",")
    # One IPS column set per (propensity model, noise floor, labels); plain names when only one
    # floor or one construction. The noise floor applies to binary labels only.
    models = [(m, f, lab) for m in args.propensity_models.split(",") for f in floors
              for lab in labels if not (lab == "graded" and f != "none")]

    def name(mfl):
        parts = [mfl[0]] + ([f"noise floor {mfl[1]}"] if len(floors) > 1 else []) \
            + ([f"{mfl[2]} labels"] if len(labels) > 1 else [])
        return ", ".join(parts)
    naive_name = lambda lab: "naive" if len(labels) == 1 else f"naive, {lab} labels"
    tmp = tempfile.mkdtemp()
    ips_cols = " | ".join(f"IPS ({name(m)}) | IPS ({name(m)}) / full | propensities ({name(m)}, rank 1..5)"
                          + (" | estimated noise floor (truth 0.1)" if m[1] == "estimate" else "")
                          for m in models)
    pw_cols = "" if args.no_pairwise else " pairwise | pairwise / full | t⁺ (rank 1..5) | (t⁺)³ (rank 1..5) |"
    naive_cols = " | ".join(naive_name(lab) for lab in labels)
    print(f"| fold | η | sessions | full information | {ips_cols} |{pw_cols} {naive_cols} | "
          "truth (rank 1..5) |")
    print("|---|---|---|---|" + "".join("---|---|---|" + ("---|" if m[1] == "estimate" else "")
                                        for m in models)
          + ("" if args.no_pairwise else "---|---|---|---|")
          + "---|" * len(labels) + "---|")
    for fold, train, test in folds(tmp):
        if fold not in args.folds.split(","):
            continue
        full = run([args.rankd, "eval-letor", "--train", train, "--test", test, "--json"])["test"]["ndcg@10"]
        for eta in args.etas.split(","):
            for n in args.sessions.split(","):
                ips = {m: [] for m in models}
                props = {m: [] for m in models}
                floor = {m: [] for m in models}
                naive = {lab: [] for lab in labels}
                pairwise, t_plus = [], []
                for seed in range(1, args.seeds + 1):
                    s = os.path.join(tmp, f"{fold}-{eta}-{n}-{seed}.jsonl")
                    run([args.rankd, "simulate-clicks", "--letor", train, "--out", s, "--sessions", n,
                         "--eta", eta, "--seed", str(seed), "--json"])
                    base = [args.rankd, "eval-letor", "--train", train, "--test", test,
                            "--train-clicks", s, "--json"]
                    chosen = ["--objective", args.objective] if args.objective else []
                    for model in models:
                        r = run(base + chosen + ["--debias", "ips", "--propensity-model", model[0],
                                                 "--noise-floor", model[1],
                                                 "--click-labels", model[2]])
                        ips[model].append(r["test"]["ndcg@10"])
                        props[model].append(r["propensities"])
                        floor[model].append(r.get("noise_floor"))
                    for lab in labels:
                        naive[lab].append(run(base + chosen + ["--debias", "none", "--click-labels",
                                                               lab])["test"]["ndcg@10"])
                    if not args.no_pairwise:
                        r = run(base + ["--debias", "pairwise"])
                        pairwise.append(r["test"]["ndcg@10"])
                        t_plus.append(r["position_bias"]["t_plus"])
                    os.remove(s)
                    if args.verbose:
                        print(f"  {fold} η {eta} {n} seed {seed}: "
                              + " ".join(f"IPS ({name(mo)}) {ips[mo][-1]:.4f}" for mo in models)
                              + " " + " ".join(f"{naive_name(lab)} {naive[lab][-1]:.4f}"
                                               for lab in labels),
                              file=sys.stderr, flush=True)
                m = lambda v: f"{statistics.mean(v):.4f} ± {statistics.stdev(v) if len(v) > 1 else 0:.4f}"
                truth = [(1 / (k + 1)) ** float(eta) for k in range(5)]
                cols = []
                for model in models:
                    mean_props = [statistics.mean(p[k] for p in props[model]) for k in range(5)]
                    cols.append(f"{m(ips[model])} | {statistics.mean(ips[model]) / full:.3f} | "
                                f"{' '.join(f'{p:.3f}' for p in mean_props)}"
                                + (f" | {m(floor[model])}" if model[1] == "estimate" else ""))
                if not args.no_pairwise:
                    mean_t = [statistics.mean(t[k] for t in t_plus) for k in range(5)]
                    cols.append(f"{m(pairwise)} | {statistics.mean(pairwise) / full:.3f} | "
                                f"{' '.join(f'{t:.3f}' for t in mean_t)} | "
                                f"{' '.join(f'{t ** 3:.3f}' for t in mean_t)}")
                print(f"| {fold} | {eta} | {n} | {full:.4f} | {' | '.join(cols)} | "
                      f"{' | '.join(m(naive[lab]) for lab in labels)} | "
                      f"{' '.join(f'{t:.3f}' for t in truth)} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
