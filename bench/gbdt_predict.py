#!/usr/bin/env python3
"""LightGBM's own prediction speed for the GBDT scoring benchmark (issue 15), and the model
and rows rankd's criterion bench (benches/gbdt.rs, group gbdt_score/lightgbm_*) scores.

    python bench/gbdt_predict.py [--trees 1000] [--leaves 64] [--rows 100] [--reps 2000]

1. Trains LightGBM lambdarank on ../shared/data/letor-lightgbm/rank.train with TREES trees of
   LEAVES leaves (min_data_in_leaf 1, min_sum_hessian_in_leaf 0, so trees fill their leaves;
   num_threads 1, deterministic) and writes bench/out/gbdt_predict/model.txt.
2. Takes the first ROWS rows of rank.test as a dense float32 C-contiguous array
   (rows.tsv, tab-separated, repr of each float32 so rankd reads the same values) and
   LightGBM's raw scores of them (scores.txt; the criterion bench checks rankd's against
   them before timing).
   `--min-data-in-leaf` (default 1) and `--out DIR` choose the trees' shape and where they go.
3. Times, on one thread, the median over REPS calls of
   - `Booster.predict(X, raw_score=True, num_threads=1)` (Python API), and
   - the C call alone: `LGBM_BoosterPredictForMat` through ctypes on the same array
     (raw scores, `num_threads=1`), the cost LightGBM itself adds,
   and writes them to lightgbm_timing.json.
"""
import argparse
import ctypes
import json
import os
import statistics
import time

import lightgbm as lgb
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "letor-lightgbm")
OUT = os.path.join(ROOT, "bench", "out", "gbdt_predict")


def read_svmlight(path, width):
    """Dense float32 rows of an SVMlight file (1-based indices; `qid:` and comments ignored)."""
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


def median_seconds(fn, reps):
    for _ in range(min(50, reps)):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1e9


def c_predict(booster, x):
    """LGBM_BoosterPredictForMat on a row-major float32 array, raw scores, one thread."""
    lib = lgb.basic._LIB
    n, d = x.shape
    out = np.empty(n, dtype=np.float64)
    out_len = ctypes.c_int64(0)
    params = lgb.basic._c_str("num_threads=1")
    data_ptr = x.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
    out_ptr = out.ctypes.data_as(ctypes.POINTER(ctypes.c_double))

    def call():
        lgb.basic._safe_call(lib.LGBM_BoosterPredictForMat(
            booster._handle, data_ptr, ctypes.c_int(lgb.basic._C_API_DTYPE_FLOAT32),
            ctypes.c_int32(n), ctypes.c_int32(d), ctypes.c_int(1),
            ctypes.c_int(lgb.basic._C_API_PREDICT_RAW_SCORE), ctypes.c_int(0), ctypes.c_int(-1),
            params, ctypes.byref(out_len), out_ptr))
    return call, out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", type=int, default=1000)
    ap.add_argument("--leaves", type=int, default=64)
    ap.add_argument("--rows", type=int, default=100)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--min-data-in-leaf", type=int, default=1,
                    help="1 (default): trees fill their leaves and grow deep and uneven; "
                         "LightGBM's own default is 20")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    out_dir = args.out
    os.makedirs(out_dir, exist_ok=True)
    model_path = os.path.join(out_dir, "model.txt")
    params = {
        "objective": "lambdarank", "num_leaves": args.leaves, "learning_rate": 0.05,
        "min_data_in_leaf": args.min_data_in_leaf, "min_sum_hessian_in_leaf": 0.0, "max_bin": 255,
        "num_threads": 1, "deterministic": True, "seed": 1, "verbose": -1,
    }
    train = lgb.Dataset(os.path.join(DATA, "rank.train"), params={"max_bin": 255, "verbose": -1})
    booster = lgb.train(params, train, num_boost_round=args.trees)
    booster.save_model(model_path)
    booster = lgb.Booster(model_file=model_path)  # time the model as loaded from its file
    info = booster.dump_model()["tree_info"]
    leaves = [t["num_leaves"] for t in info]

    def depth(node):
        if "leaf_index" in node:
            return 0
        return 1 + max(depth(node["left_child"]), depth(node["right_child"]))
    depths = [depth(t["tree_structure"]) for t in info]

    x_all = read_svmlight(os.path.join(DATA, "rank.test"), booster.num_feature())
    x = np.ascontiguousarray(x_all[: args.rows], dtype=np.float32)
    with open(os.path.join(out_dir, "rows.tsv"), "w") as f:
        for row in x:
            f.write("\t".join(repr(float(v)) for v in row) + "\n")
    scores = booster.predict(x, raw_score=True, num_threads=1)
    with open(os.path.join(out_dir, "scores.txt"), "w") as f:
        f.write("\n".join(repr(float(s)) for s in scores) + "\n")

    python_api = median_seconds(lambda: booster.predict(x, raw_score=True, num_threads=1), args.reps)
    call, out = c_predict(booster, x)
    c_call = median_seconds(call, args.reps)
    assert np.array_equal(out, scores), "the C call and Booster.predict disagree"
    result = {
        "lightgbm_version": lgb.__version__,
        "trees": len(leaves), "mean_leaves": float(np.mean(leaves)),
        "mean_depth": float(np.mean(depths)), "max_depth": int(np.max(depths)),
        "min_data_in_leaf": args.min_data_in_leaf, "rows": int(x.shape[0]),
        "features": int(x.shape[1]), "reps": args.reps,
        "median_seconds_booster_predict": python_api,
        "median_seconds_c_call": c_call,
    }
    with open(os.path.join(out_dir, "lightgbm_timing.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
