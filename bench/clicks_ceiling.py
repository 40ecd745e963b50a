#!/usr/bin/env python3
"""Where the gap between click training and the full-information model comes from (issue 32;
docs/EVALUATION.md, "Learning from clicks: where the gap to 95 % comes from").

On the LightGBM LETOR example, all with the default LETOR trees:

1. *full information*: `eval-letor` on the training labels (graded 0..4);
2. *binary labels*: the same, every grade ≥ 1 made 1;
3. *the IPS construction at infinite data*: sessions in which every document of every query is
   shown alone at rank 1 (propensity 1, no position bias, nothing unseen) and clicked in
   exactly round(100·p) of 100 sessions, p the simulator's click probability
   `ε⁻ + (ε⁺ − ε⁻)(2^y − 1)/15` (SPEC §11) — what IPS click training converges to with
   unlimited sessions; with ε⁻ = 0.1 (the protocol's) and ε⁻ = 0;
4. the same with other weights than the click probability: √p, one per grade step
   (10, 40, 60, 80, 100 clicks for grades 0..4), and binary (relevant 100, not 10); and with
   the affine (noise-floor) correction applied with the true floor: each of the 100
   impressions contributes c − ε⁻, i.e. round(100·p) − 10 clicks at ε⁻ = 0.1 — the bound of
   what `--noise-floor estimate` can give (`--only-affine` runs just that row, plain IPS,
   ε⁻ = 0 and full information, each over the trainer's seeds, on `--fold lightgbm` or
   `resplit`, the split of bench/clicks_semi_synthetic.py); `--only-affine` also trains the
   graded construction (`--click-labels graded`: one group per query, each row labelled with
   its click rate) on the ε⁻ = 0.1 sessions;
5. *relabelled from the click model*: PBM fitted (`rankd click-model`) to 10⁵ simulated
   sessions (η = 1, seeds 1..5), each pair's attractiveness γ̂ turned into a grade
   (`min(4, ⌊5γ̂⌋)`, or 4·γ̂ scaled to the query's range), and the graded trees trained on those
   labels — one group per query, as the full-information model trains.

    python3 bench/clicks_ceiling.py --rankd target/release/rankd
    python3 bench/clicks_ceiling.py --rankd target/release/rankd --only-affine --fold resplit
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "letor-lightgbm")
TRAIN, TEST = os.path.join(DATA, "rank.train"), os.path.join(DATA, "rank.test")


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def queries():
    """(qid as simulate-clicks names it, [grade per row]) per query, in file order."""
    rows = open(TRAIN).read().splitlines()
    sizes = [int(s) for s in open(TRAIN + ".query").read().split()]
    at = 0
    for i, s in enumerate(sizes):
        yield str(i + 1), [int(float(r.split()[0])) for r in rows[at:at + s]]
        at += s


def write_labels(path, label_of):
    """The training file with each row's label replaced by label_of(qid, row, grade)."""
    rows = open(TRAIN).read().splitlines()
    out, at = [], 0
    for qid, grades in queries():
        for d, y in enumerate(grades):
            out.append(f"{label_of(qid, d, y)} {rows[at + d].split(' ', 1)[1]}")
        at += len(grades)
    open(path, "w").write("\n".join(out) + "\n")
    shutil.copy(TRAIN + ".query", path + ".query")


def write_oracle(path, clicks_of):
    """One-document sessions: each row shown alone 100 times, clicked clicks_of(grade) times."""
    with open(path, "w") as f:
        for qid, grades in queries():
            for d, y in enumerate(grades):
                c = clicks_of(y)
                for i in range(100):
                    f.write(json.dumps({"qid": qid, "shown": [d], "clicks": [d] if i < c else []})
                            + "\n")


def ndcg(rankd, train, extra=()):
    return run([rankd, "eval-letor", "--train", train, "--test", TEST, "--json", *extra])[
        "test"]["ndcg@10"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rankd", required=True)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--fold", default="lightgbm", choices=["lightgbm", "resplit"],
                    help="the example's own split, or bench/clicks_semi_synthetic.py's resplit")
    ap.add_argument("--only-affine", action="store_true",
                    help="only full information, plain IPS, eps- 0 and the affine correction's "
                         "ceiling, each over the trainer's seeds 1..--seeds")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    global TRAIN, TEST
    sys.path.insert(0, os.path.dirname(__file__))
    from clicks_semi_synthetic import folds
    TRAIN, TEST = next((tr, te) for f, tr, te in folds(tmp) if f == args.fold)
    full = ndcg(args.rankd, TRAIN)
    print(f"full information (graded labels): {full:.4f}")
    p = lambda y, eps: eps + (1 - eps) * (2 ** y - 1) / 15
    affine = lambda y: round(100 * p(y, 0.1)) - 10
    if args.only_affine:
        # The trees move by ±0.02 NDCG@10 with any small change of the weights (rounding, a
        # common factor), so each row is the mean over the trainer's seeds 1..--seeds, and the
        # share is of the full-information model's mean over the same seeds.
        seeds = [str(s) for s in range(1, args.seeds + 1)]
        fulls = [ndcg(args.rankd, TRAIN, ["--seed", sd]) for sd in seeds]
        print(f"full information, trainer seeds 1..{args.seeds}: {statistics.mean(fulls):.4f} ± "
              f"{statistics.stdev(fulls):.4f}")
        for name, clicks_of, labels in [
            ("click probability, eps- 0.1 (the protocol)", lambda y: round(100 * p(y, 0.1)),
             "binary"),
            ("click probability, eps- 0", lambda y: round(100 * p(y, 0.0)), "binary"),
            ("eps- 0.1, affine correction with the true floor", affine, "binary"),
            ("click probability, eps- 0.1, graded labels", lambda y: round(100 * p(y, 0.1)),
             "graded"),
        ]:
            s = os.path.join(tmp, "oracle.jsonl")
            write_oracle(s, clicks_of)
            r = [ndcg(args.rankd, TRAIN, ["--train-clicks", s, "--noise-floor", "none",
                                          "--click-labels", labels, "--seed", sd])
                 for sd in seeds]
            print(f"IPS construction at infinite data, {name}: {statistics.mean(r):.4f} ± "
                  f"{statistics.stdev(r):.4f} ({statistics.mean(r) / statistics.mean(fulls):.3f}); "
                  f"seeds {' '.join(f'{x:.4f}' for x in r)}", flush=True)
        shutil.rmtree(tmp)
        return
    binary = os.path.join(tmp, "binary.train")
    write_labels(binary, lambda q, d, y: int(y > 0))
    print(f"binary labels (grade >= 1): {ndcg(args.rankd, binary):.4f}")

    oracles = [
        ("click probability, eps- 0.1 (the protocol)", lambda y: round(100 * p(y, 0.1))),
        ("click probability, eps- 0", lambda y: round(100 * p(y, 0.0))),
        ("eps- 0.1, affine correction with the true floor (c - 0.1 per impression)", affine),
        ("sqrt of the click probability", lambda y: round(100 * math.sqrt(p(y, 0.1)))),
        ("one step per grade", lambda y: [10, 40, 60, 80, 100][y]),
        ("binary (relevant 100, not 10)", lambda y: 100 if y > 0 else 10),
    ]
    for name, clicks_of in oracles:
        s = os.path.join(tmp, "oracle.jsonl")
        write_oracle(s, clicks_of)
        r = ndcg(args.rankd, TRAIN, ["--train-clicks", s, "--noise-floor", "none",
                                     "--click-labels", "binary"])
        print(f"IPS construction at infinite data, weights = {name}: {r:.4f} ({r / full:.3f})",
              flush=True)

    schemes = {
        "floor(5 gamma)": lambda g, lo, hi: min(4, int(5 * g)),
        "4 gamma scaled to the query's range": lambda g, lo, hi: round(4 * (g - lo) / (hi - lo))
        if hi > lo else 0,
    }
    got = {k: [] for k in schemes}
    for seed in range(1, args.seeds + 1):
        s, other = os.path.join(tmp, "s.jsonl"), os.path.join(tmp, "other.jsonl")
        for path, sd in ((s, seed), (other, seed % args.seeds + 1)):
            run([args.rankd, "simulate-clicks", "--letor", TRAIN, "--out", path, "--sessions",
                 "100000", "--eta", "1", "--seed", str(sd), "--json"])
        params = os.path.join(tmp, "pbm")
        shutil.rmtree(params, ignore_errors=True)
        subprocess.run([args.rankd, "click-model", "--sessions", s, "--test", other, "--model",
                        "pbm", "--parameters", params], check=True, capture_output=True)
        pairs = json.load(open(os.path.join(params, "pbm.json")))["pairs"]
        gamma = {(x["query"], int(x["doc"])): x["attractiveness"] for x in pairs}
        for name, scheme in schemes.items():
            def label_of(q, d, y):
                known = [g for (qq, _), g in gamma.items() if qq == q]
                lo, hi = (min(known), max(known)) if known else (0.0, 0.0)
                return scheme(gamma.get((q, d), lo), lo, hi)
            relabelled = os.path.join(tmp, "relabelled.train")
            write_labels(relabelled, label_of)
            got[name].append(ndcg(args.rankd, relabelled))
    for name, v in got.items():
        print(f"graded trees on PBM attractiveness relabelled as {name} (10^5 sessions, eta 1, "
              f"{args.seeds} seeds): {statistics.mean(v):.4f} ± {statistics.stdev(v):.4f} "
              f"({statistics.mean(v) / full:.3f})")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
