#!/usr/bin/env python3
"""Writes tests/fixtures/gbdt/lightgbm_bins.json and lightgbm_trees.json, for the parity tests
of rankd's tree trainer against LightGBM 4.7 (issue 15; `src/rerank/gbdt/train/`):

- lightgbm_bins.json: the bins LightGBM builds for every feature of the LightGBM LETOR
  example's rank.train (max_bin 255, min_data_in_bin 3, its defaults otherwise); rankd's bins
  must put every training value in the same bin.
- lightgbm_trees.json: LightGBM lambdarank's first trees on rank.train with
  examples/lambdarank/train.conf's structure (31 leaves, lr 0.1, min_data_in_leaf 50,
  min_sum_hessian 5) and no bagging, in preorder: [feature, threshold, rows] for a split,
  [leaf value, rows] for a leaf (rows: LightGBM's internal_count / leaf_count). rankd's
  LambdaMART-NDCG with --count-from-hessian must grow the same trees.

    python bench/gbdt_parity_fixtures.py     # lightgbm==4.7.*

The bins come from LightGBM's own dump of a constructed dataset (`Dataset._dump_text`, one
bin index per row and feature); for each feature the fixture lists its non-empty bins as
[bin index, largest training value in it] (values as LightGBM parsed them, float64), in
order. Features LightGBM does not use (a single bin) are absent.

rank.train's values have two decimals (at most 101 distinct per feature), so it reaches only
the branch of GreedyFindBin for few distinct values. The fixture's "synthetic" part reaches the
other: 3000 rows of four float32 features (1000+ distinct values; negatives and zeros;
values repeated a bin's worth of times; negatives only), with LightGBM's bin of every row.
"""
import json
import os
import tempfile

import lightgbm as lgb
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "..", "shared", "data", "letor-lightgbm", "rank.train")
OUT = os.path.join(ROOT, "tests", "fixtures", "gbdt", "lightgbm_bins.json")
PARAMS = {"max_bin": 255, "min_data_in_bin": 3, "feature_pre_filter": False, "verbose": -1}


def dense_rows(path):
    rows, width = [], 0
    for line in open(path):
        parts = line.split()
        if not parts:
            continue
        row = {}
        for p in parts[1:]:
            k, v = p.split(":")
            row[int(k)] = float(v)
            width = max(width, int(k) + 1)
        rows.append(row)
    x = np.zeros((len(rows), width))
    for i, row in enumerate(rows):
        for k, v in row.items():
            x[i, k] = v
    return x


def dumped_bins(data, n):
    """LightGBM's bin of every row and feature ("NA" for unused features)."""
    with tempfile.TemporaryDirectory() as tmp:
        dump = os.path.join(tmp, "dump.txt")
        data.construct()._dump_text(dump)
        lines = open(dump).read().split("\n")
    # The per-row lines follow the header: one "b0, b1, ..., " line per row.
    rows = [l for l in lines if l and l[0].isdigit() or l.startswith("NA")]
    bins = [[c.strip() for c in l.split(",") if c.strip()] for l in rows[-n:]]
    assert len(bins) == n, (len(bins), n)
    return bins


def synthetic(seed=11, n=3000):
    rng = np.random.default_rng(seed)
    x = np.zeros((n, 4), dtype=np.float32)
    x[:, 0] = rng.random(n)
    x[:, 1] = np.where(rng.random(n) < 0.3, 0.0, rng.normal(size=n))
    heavy = rng.integers(0, 500, n)
    heavy[:600] = np.repeat([17, 250, 251, 499, 3, 88], 100)
    x[:, 2] = heavy
    x[:, 3] = np.where(rng.random(n) < 0.2, 0.0, -rng.random(n) * 100)
    data = lgb.Dataset(x.astype(np.float64), params=PARAMS)
    bins = dumped_bins(data, n)
    return {"rows": x.astype(np.float64).tolist(),
            "bins": [[int(b) for b in row] for row in bins]}


TREES = 7  # rankd and LightGBM agree on the first 7; the 8th differs by a near-tie of gains


def trees():
    params = {"objective": "lambdarank", "max_bin": 255, "learning_rate": 0.1, "num_leaves": 31,
              "min_data_in_leaf": 50, "min_sum_hessian_in_leaf": 5.0, "num_threads": 1,
              "deterministic": True, "seed": 1, "verbose": -1}
    booster = lgb.train(params, lgb.Dataset(TRAIN, params={"max_bin": 255, "verbose": -1}),
                        num_boost_round=TREES)

    def preorder(node, out):
        if "split_feature" in node:
            out.append([node["split_feature"], node["threshold"], node["internal_count"]])
            preorder(node["left_child"], out)
            preorder(node["right_child"], out)
        else:
            out.append([node["leaf_value"], node["leaf_count"]])
        return out

    return {"library": "lightgbm", "version": lgb.__version__, "params": params,
            "data": "letor-lightgbm/rank.train",
            "trees": [preorder(t["tree_structure"], []) for t in booster.dump_model()["tree_info"]]}


def main():
    with open(OUT.replace("lightgbm_bins", "lightgbm_trees"), "w") as fh:
        json.dump(trees(), fh, separators=(",", ":"))
        fh.write("\n")
    x = dense_rows(TRAIN)
    bins = dumped_bins(lgb.Dataset(TRAIN, params=PARAMS), x.shape[0])
    features = {}
    for f in range(x.shape[1]):
        column = [b[f] if f < len(b) else "NA" for b in bins]
        if column[0] == "NA":
            continue
        top = {}
        for value, b in zip(x[:, f], column):
            b = int(b)
            top[b] = max(top.get(b, -np.inf), value)
        pairs = sorted(top.items())
        # Bins are ranges in value order: the largest values increase with the bin index.
        assert all(a[1] < b[1] for a, b in zip(pairs, pairs[1:])), (f, pairs)
        features[str(f)] = [[b, v] for b, v in pairs]
    out = {"library": "lightgbm", "version": lgb.__version__, "params": PARAMS,
           "data": "letor-lightgbm/rank.train", "features": features,
           "synthetic": synthetic()}
    with open(OUT, "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
        fh.write("\n")
    print(f"{OUT}: {len(features)} features")


if __name__ == "__main__":
    main()
