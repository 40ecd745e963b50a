#!/usr/bin/env python3
"""Writes NAME.contribs.tsv beside each XGBoost and LightGBM model of tests/fixtures/gbdt/:
the library's own TreeSHAP contributions of the model's fixture rows (XGBoost
`predict(pred_contribs=True)`, LightGBM `predict(pred_contrib=True)`), one row per line, the
features' contributions then the bias (the expected value), for tests/suite/gbdt_import.rs, which
checks rankd's path-dependent TreeSHAP against them (no Python needed there).

    bench/.venv/bin/pip install xgboost && bench/.venv/bin/python bench/gbdt_shap_fixtures.py
"""
import json
import os

import lightgbm as lgb
import numpy as np
import xgboost as xgb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "gbdt")


def rows(name):
    with open(os.path.join(OUT, f"{name}.rows.tsv")) as f:
        return np.array([[np.float32(v) for v in line.rstrip("\n").split("\t")]
                         for line in f if line.strip()], dtype=np.float32)


def main():
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    for m in manifest["models"]:
        name, library = m["name"], m["library"]
        x = rows(name)
        if library == "xgboost":
            booster = xgb.Booster()
            booster.load_model(os.path.join(OUT, f"{name}.json"))
            d = xgb.DMatrix(x, missing=np.nan, feature_names=booster.feature_names)
            contribs = booster.predict(d, pred_contribs=True)
        elif library == "lightgbm":
            booster = lgb.Booster(model_file=os.path.join(OUT, f"{name}.txt"))
            contribs = booster.predict(x, pred_contrib=True)
        else:
            continue
        with open(os.path.join(OUT, f"{name}.contribs.tsv"), "w") as f:
            for row in np.asarray(contribs, dtype=np.float64):
                f.write("\t".join(repr(float(v)) for v in row) + "\n")
        print(name, contribs.shape)


if __name__ == "__main__":
    main()
