#!/usr/bin/env python3
"""Writes tests/fixtures/gbdt/: tree models trained by the real XGBoost 3.x and LightGBM 4.7,
rows to score, and each library's own scores of those rows, for tests/suite/gbdt_import.rs (which
needs no Python). Also the expected scores of the hand-written RankLib model
(ranklib_lambdamart.xml, written from RankLib's documented format; there is no RankLib here),
computed by an independent reference evaluator below that does RankLib's float arithmetic.

    python bench/gbdt_fixtures.py        # xgboost==3.*, lightgbm==4.7.*, numpy

Training data: 4 features with exact ties (values on a coarse grid), zeros (a third of them,
some -0.0), NaN (feature 1, one in eight), graded labels 0..3 in queries of 20 rows.
Rows scored: for every split of the model, the row's split feature exactly on the threshold
(as float32: XGBoost's threshold itself; for LightGBM's float64 threshold the largest float32
not above it) and one float32 step below and above, the other features random; plus rows of
±0, 1e-36, NaN and random values. Every model is scored on its own rows; files:

    NAME.{json,txt}     the model as the library saved it
    NAME.rows.tsv       float32 rows, tab-separated (repr of the float32 value; `nan`)
    NAME.scores.txt     the library's raw scores (XGBoost: output_margin=True, float32;
                        LightGBM: raw_score=True, float64), one per row
    manifest.json       names, libraries, versions, and for each model the feature names
                        the test binds by (null: by position)
"""
import json
import os
import xml.etree.ElementTree as ET

import lightgbm as lgb
import numpy as np
import xgboost as xgb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "gbdt")
NAMES = ["bm25", "pagerank", "url_depth", "title_match"]


def training_data(seed=7, n=400):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 4)).astype(np.float32)
    x[:, 2] = np.round(x[:, 2] * 8) / 8  # ties: a coarse grid
    x[rng.random(n) < 0.33, 0] = 0.0
    x[rng.random(n) < 0.1, 0] = -0.0
    x[rng.random(n) < 0.3, 3] = 0.0
    x[rng.random(n) < 0.125, 1] = np.nan
    signal = 2 * x[:, 0] + np.nan_to_num(x[:, 1], nan=0.3) + x[:, 2] - (x[:, 3] == 0) * 0.5
    y = np.clip(np.floor(signal + rng.normal(0, 0.3, n)), 0, 3).astype(np.float32)
    groups = [20] * (n // 20)
    return x, y, groups


def f32_at_or_below(t):
    v = np.float32(t)
    if float(v) > t:
        v = np.nextafter(v, np.float32(-np.inf), dtype=np.float32)
    return v


def probe_rows(splits, seed, width=4):
    """Rows that put each split's feature exactly on, just below and just above its threshold."""
    rng = np.random.default_rng(seed)
    rows = []
    for feature, t32 in splits:
        for v in (np.nextafter(t32, np.float32(-np.inf), dtype=np.float32), t32,
                  np.nextafter(t32, np.float32(np.inf), dtype=np.float32)):
            r = rng.random(width).astype(np.float32)
            r[feature] = v
            rows.append(r)
    specials = [0.0, -0.0, 1e-36, -1e-36, 1e-35, np.nan, 0.5, 1.0, 2.0]
    for _ in range(40):
        r = rng.random(width).astype(np.float32)
        for j in range(width):
            if rng.random() < 0.4:
                r[j] = np.float32(specials[rng.integers(len(specials))])
        rows.append(r)
    return np.array(rows, dtype=np.float32)


def xgb_splits(path):
    model = json.load(open(path))
    out = set()
    for tree in model["learner"]["gradient_booster"]["model"]["trees"]:
        for i, left in enumerate(tree["left_children"]):
            if left != -1:
                out.add((tree["split_indices"][i], np.float32(tree["split_conditions"][i])))
    return sorted(out)


def lgb_splits(path):
    out = set()
    for tree in lgb.Booster(model_file=path).dump_model()["tree_info"]:
        stack = [tree["tree_structure"]]
        while stack:
            node = stack.pop()
            if "split_feature" in node:
                out.add((node["split_feature"], f32_at_or_below(float(node["threshold"]))))
                stack += [node["left_child"], node["right_child"]]
    return sorted(out)


def write_rows(name, rows, scores):
    with open(os.path.join(OUT, name + ".rows.tsv"), "w") as f:
        for r in rows:
            f.write("\t".join("nan" if np.isnan(v) else repr(float(v)) for v in r) + "\n")
    with open(os.path.join(OUT, name + ".scores.txt"), "w") as f:
        f.write("\n".join(repr(float(s)) for s in scores) + "\n")


def xgboost_models(x, y, groups):
    made = []
    specs = [
        ("xgb_rank_ndcg", {"objective": "rank:ndcg", "tree_method": "hist", "max_depth": 3}, True),
        ("xgb_rank_map", {"objective": "rank:map", "tree_method": "hist", "max_depth": 3}, True),
        ("xgb_reg_exact_unnamed", {"objective": "reg:squarederror", "tree_method": "exact",
                                   "max_depth": 4}, False),
        ("xgb_binary_logistic", {"objective": "binary:logistic", "tree_method": "hist",
                                 "max_depth": 3}, True),
    ]
    for name, params, named in specs:
        label = (y >= 2).astype(np.float32) if params["objective"] == "binary:logistic" else y
        if params["objective"] == "rank:map":
            label = (y >= 2).astype(np.float32)
        d = xgb.DMatrix(x, label, feature_names=NAMES if named else None)
        if params["objective"].startswith("rank:"):
            d.set_group(groups)
        booster = xgb.train({**params, "eta": 0.3, "seed": 1, "nthread": 1}, d, num_boost_round=10)
        path = os.path.join(OUT, name + ".json")
        booster.save_model(path)
        rows = probe_rows(xgb_splits(path), seed=len(made) + 1)
        scores = booster.predict(xgb.DMatrix(rows, feature_names=NAMES if named else None),
                                 output_margin=True)
        write_rows(name, rows, scores)
        made.append({"name": name, "library": "xgboost", "file": name + ".json",
                     "feature_names": NAMES if named else None})
    return made


def lightgbm_models(x, y, groups):
    made = []
    no_nan = np.nan_to_num(x, nan=0.25)
    specs = [
        # NaN in the data: missing type NaN on feature 1.
        ("lgb_lambdarank", {"objective": "lambdarank"}, x, True),
        # zero_as_missing: missing type Zero (|x| <= 1e-35 and NaN take the default side).
        ("lgb_zero_as_missing", {"objective": "regression", "zero_as_missing": True}, x, True),
        # No NaN in training: missing type None (a NaN at prediction compares as 0.0).
        ("lgb_none_unnamed", {"objective": "regression"}, no_nan, False),
    ]
    for name, params, data, named in specs:
        ds = lgb.Dataset(data, y, group=groups if params["objective"] == "lambdarank" else None,
                         feature_name=NAMES if named else "auto",
                         params={"zero_as_missing": params.get("zero_as_missing", False),
                                 "verbose": -1, "min_data_in_bin": 1})
        booster = lgb.train({**params, "num_leaves": 8, "learning_rate": 0.2, "min_data_in_leaf": 5,
                             "num_threads": 1, "deterministic": True, "seed": 1, "verbose": -1},
                            ds, num_boost_round=12)
        path = os.path.join(OUT, name + ".txt")
        booster.save_model(path)
        rows = probe_rows(lgb_splits(path), seed=100 + len(made))
        scores = lgb.Booster(model_file=path).predict(rows, raw_score=True)
        write_rows(name, rows, scores)
        made.append({"name": name, "library": "lightgbm", "file": name + ".txt",
                     "feature_names": NAMES if named else None})
    return made


def ranklib_xml(path):
    """The <ensemble> element (RankLib's `##` header lines are not XML)."""
    with open(path) as f:
        return ET.fromstring("".join(l for l in f if not l.startswith("##")))


def ranklib_reference(path, rows):
    """RankLib's Ensemble.eval with Java float arithmetic: s += tree(x) * weight, in float;
    a split goes left iff x[id - 1] <= threshold, a NaN value read as 0 (RankLib's DataPoint
    stores NaN as unknown and reads unknown as 0: checked with RankLib 2.10 itself, see
    bench/gbdt_ranklib_fixture.py)."""
    root = ranklib_xml(path)
    out = []
    for r in rows:
        s = np.float32(0.0)
        for tree in root.findall("tree"):
            w = np.float32(float(tree.get("weight")))
            node = tree.find("split")
            while node.find("output") is None:
                fid = int(node.find("feature").text)
                thr = np.float32(float(node.find("threshold").text))
                x = np.float32(0.0) if np.isnan(r[fid - 1]) else r[fid - 1]
                side = "left" if x <= thr else "right"
                node = [c for c in node.findall("split") if c.get("pos") == side][0]
            leaf = np.float32(float(node.find("output").text))
            s = np.float32(s + np.float32(leaf * w))
        out.append(s)
    return out


def ranklib_model():
    path = os.path.join(OUT, "ranklib_lambdamart.xml")
    splits = []
    for split in ranklib_xml(path).iter("split"):
        if split.find("feature") is not None:
            splits.append((int(split.find("feature").text) - 1,
                           np.float32(float(split.find("threshold").text))))
    rows = probe_rows(sorted(set(splits)), seed=200, width=5)
    write_rows("ranklib_lambdamart", rows, ranklib_reference(path, rows))
    return [{"name": "ranklib_lambdamart", "library": "ranklib", "file": "ranklib_lambdamart.xml",
             "feature_names": None}]


def main():
    os.makedirs(OUT, exist_ok=True)
    x, y, groups = training_data()
    models = xgboost_models(x, y, groups) + lightgbm_models(x, y, groups) + ranklib_model()
    manifest = {"xgboost": xgb.__version__, "lightgbm": lgb.__version__, "numpy": np.__version__,
                "models": models}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    main()
