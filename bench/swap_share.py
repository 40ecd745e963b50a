#!/usr/bin/env python3
"""How large a share of first pages should RandPair randomise (`[events] swap_share`,
`crate::events::rand_pair`)? The semi-synthetic test (SPEC §11) at each share: `rankd
simulate-clicks --swap-share S` draws sessions from the LightGBM LETOR example's training labels
(PBM examination (1/k)^η, ε⁻ 0.1, ε⁺ 1.0, top 10), and for each share and seed reports

- what the users pay: the mean NDCG@10 of the pages they were shown (by the training file's
  labels), and its change against share 0 under the same seed (the same logging ranker), as
  a mean over the seeds (share 0 is always run first);
- what it buys: the largest error of the propensities `rankd eval-letor --train-clicks`
  estimates from those sessions (ranks 2..10, against the truth (1/k)^η), and the test NDCG@10
  of the model trained on them with IPS (the default click training).

Prints a Markdown table, medians over the seeds (min..max).

    python3 bench/swap_share.py --rankd target/release/rankd [--shares 0,0.02,0.05,0.1,0.2]
        [--seeds 3] [--sessions 100000] [--eta 1]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "letor-lightgbm")


def labels_by_query(path):
    """qid (1-based group number, as simulate-clicks writes it) → the rows' labels in file order."""
    rows = [int(l.split()[0]) for l in open(path) if l.strip()]
    sizes = [int(s) for s in open(path + ".query").read().split()]
    out, at = {}, 0
    for i, s in enumerate(sizes):
        out[str(i + 1)] = rows[at:at + s]
        at += s
    return out


def ndcg10(gains_shown, all_gains):
    dcg = lambda g: sum((2 ** x - 1) / math.log2(k + 2) for k, x in enumerate(g[:10]))
    ideal = dcg(sorted(all_gains, reverse=True))
    return dcg(gains_shown) / ideal if ideal > 0 else None


def shown_ndcg(sessions, labels):
    values = []
    for line in open(sessions):
        s = json.loads(line)
        g = labels[s["qid"]]
        v = ndcg10([g[r] for r in s["shown"]], g)
        if v is not None:
            values.append(v)
    return statistics.mean(values)


def run(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def spread(v, fmt="{:.4f}"):
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}..{fmt.format(max(v))})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rankd", required=True)
    ap.add_argument("--shares", default="0,0.02,0.05,0.1,0.2")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sessions", default="100000")
    ap.add_argument("--eta", default="1")
    args = ap.parse_args()
    train, test = os.path.join(DATA, "rank.train"), os.path.join(DATA, "rank.test")
    labels = labels_by_query(train)
    truth = [(1 / (k + 1)) ** float(args.eta) for k in range(10)]
    tmp = tempfile.mkdtemp()
    print(f"| swap share | shown NDCG@10 | its change (users' cost) | propensity error, ranks 2..10 | "
          f"IPS test NDCG@10 |   (η {args.eta}, {args.sessions} sessions, {args.seeds} seeds)")
    print("|---|---|---|---|---|")
    shares = args.shares.split(",")
    if float(shares[0]) != 0:
        shares.insert(0, "0")
    unswapped = []
    for share in shares:
        shown, error, ndcg = [], [], []
        for seed in range(1, args.seeds + 1):
            s = os.path.join(tmp, f"{share}-{seed}.jsonl")
            run([args.rankd, "simulate-clicks", "--letor", train, "--out", s,
                 "--sessions", args.sessions, "--eta", args.eta, "--swap-share", share,
                 "--seed", str(seed), "--json"])
            shown.append(shown_ndcg(s, labels))
            r = run([args.rankd, "eval-letor", "--train", train, "--test", test,
                     "--train-clicks", s, "--json"])
            p = r["propensities"]
            error.append(max(abs(p[k] - truth[k]) for k in range(1, min(10, len(p)))))
            ndcg.append(r["test"]["ndcg@10"])
            os.remove(s)
        if not unswapped:
            unswapped = shown
        change = statistics.mean(a - b for a, b in zip(shown, unswapped))
        print(f"| {share} | {spread(shown)} | {change:+.4f} | {spread(error, '{:.3f}')} | "
              f"{spread(ndcg)} |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
