#!/usr/bin/env python3
"""Checks rankd's XGBoost export with the real XGBoost (issue 15): rankd trains trees on the
LightGBM LETOR example, writes them with `--export-xgboost`, and XGBoost loads that file and
predicts rank.test; its margins must equal rankd's own test scores.

    python bench/gbdt_export_check.py [--rankd target/release/rankd] [--flags '...']

Tolerance: rankd sums f64 leaves, XGBoost sums the exported f32 leaves in f32, so scores may
differ by the rounding of T leaves (~T·2⁻²⁴ of the leaves' magnitude); a row sent down the
wrong branch anywhere would differ by a whole leaf value. Prints the largest difference and
exits 1 above 1e-5 (relative to the mean |leaf| sum of a row).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import xgboost as xgb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "letor-lightgbm")


def read_svmlight(path, width):
    rows = []
    with open(path) as f:
        for line in f:
            items = line.split("#")[0].split()
            if not items:
                continue
            row = np.zeros(width, dtype=np.float32)
            for item in items[1:]:
                if not item.startswith("qid:"):
                    k, v = item.split(":")
                    row[int(k) - 1] = np.float32(float(v))
            rows.append(row)
    return np.array(rows, dtype=np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rankd", default=os.path.join(ROOT, "target", "release", "rankd"))
    ap.add_argument("--flags", default="--trees 100 --leaves 31 --min-data-in-leaf 50 "
                                        "--min-sum-hessian 5 --row-fraction 0.9")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    model, scores_path = os.path.join(tmp, "m.json"), os.path.join(tmp, "s.txt")
    out = subprocess.run([args.rankd, "eval-letor", "--train", os.path.join(DATA, "rank.train"),
                          "--test", os.path.join(DATA, "rank.test"), "--model", "gbdt", "--json",
                          "--export-xgboost", model, "--write-scores", scores_path]
                         + args.flags.split(), check=True, capture_output=True, text=True).stdout
    ours = np.array([float(l) for l in open(scores_path) if l.strip()])
    booster = xgb.Booster(model_file=model)
    names = booster.feature_names
    x = read_svmlight(os.path.join(DATA, "rank.test"), len(names))
    theirs = booster.predict(xgb.DMatrix(x, feature_names=names), output_margin=True)
    trees = json.load(open(model))["learner"]["gradient_booster"]["model"]["trees"]
    leaf_scale = np.mean([np.mean(np.abs([c for c, l in zip(t["split_conditions"], t["left_children"]) if l == -1]))
                          for t in trees]) * len(trees)
    diff = np.abs(ours - theirs.astype(np.float64))
    worst = float(diff.max() / leaf_scale)
    print(json.dumps({"xgboost": xgb.__version__, "rows": len(ours), "trees": len(trees),
                      "max_abs_difference": float(diff.max()), "relative_to_leaf_sum": worst,
                      "rankd_test": json.loads(out)["test"]["ndcg@10"]}))
    sys.exit(0 if worst <= 1e-5 else 1)


if __name__ == "__main__":
    main()
