#!/usr/bin/env python3
"""Which Beta prior on pair attractiveness predicts held-out clicks best (rankd click-model).

Three session logs drawn from the LETOR example by `rankd simulate-clicks` (PBM, η = 1 with
10^4 and 3·10^4 sessions, η = 2 with 10^4), each split 80/20 in file order by `rankd
click-model`; for every prior and EM iteration count, the held-out log-likelihood per
impression of each model, and PBM's examination relative to rank 1 beside the truth (1/k)^η.

    python3 bench/click_models_prior.py --rankd target/release/rankd
"""

import argparse
import json
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
LETOR = os.path.join(HERE, "..", "..", "shared", "data", "letor-lightgbm", "rank.train")
LOGS = [("eta1-1e4", 10000, 1.0, 1), ("eta1-3e4", 30000, 1.0, 3), ("eta2-1e4", 10000, 2.0, 2)]
PRIORS = ["0,0", "1,1", "0.5,2", "1,4", "0.5,4", "1,9"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rankd", default=os.path.join(HERE, "..", "target", "release", "rankd"))
    ap.add_argument("--iterations", default="50,100")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="rankd-prior-")
    for name, n, eta, seed in LOGS:
        path = os.path.join(work, f"{name}.jsonl")
        subprocess.run([args.rankd, "simulate-clicks", "--letor", LETOR, "--out", path,
                        "--sessions", str(n), "--eta", str(eta), "--seed", str(seed), "--json"],
                       check=True, stdout=subprocess.DEVNULL)
        truth = " ".join(f"{(1 / k) ** eta:.3f}" for k in range(1, 11))
        print(f"\n{name} (η = {eta}, {n} sessions); examination truth {truth}")
        print(f"{'prior':>6} {'iter':>4} {'pbm':>9} {'ubm':>9} {'cascade':>9} {'dbn':>9}"
              "  PBM examination relative to rank 1")
        for prior in PRIORS:
            for it in args.iterations.split(","):
                out = subprocess.run(
                    [args.rankd, "click-model", "--sessions", path, f"--prior={prior}",
                     "--iterations", it, "--json"],
                    check=True, capture_output=True, text=True).stdout
                r = json.loads(out)
                ll = {m["model"]: m["test"]["log_likelihood"] for m in r["models"]}
                exam = " ".join(f"{e:.3f}" for e in r["models"][0]["examination_relative"])
                print(f"{prior:>6} {it:>4} {ll['pbm']:9.5f} {ll['ubm']:9.5f} "
                      f"{ll['cascade']:9.5f} {ll['dbn']:9.5f}  {exam}")


if __name__ == "__main__":
    main()
