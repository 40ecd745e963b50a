#!/usr/bin/env python3
"""rankd's click models against clax (PyPI `clax-models`, JAX) on the same simulated log.

Issue 32, deliverable 2: "checked against an independent implementation on the same simulated
log ... log-likelihood and perplexity to 1e-6 relative where the model is the same; recovered
position bias vs the simulator's truth".

1. `rankd simulate-clicks` draws sessions from the LETOR example's labels (PBM, examination
   (1/k)^η, the semi-synthetic protocol of SPEC §11).
2. `rankd click-model --parameters DIR --json` fits PBM, UBM, cascade and DBN by EM on the first
   80 % of the sessions and reports the log-likelihood per impression and the per-rank
   perplexity on the rest.
3. Each fitted model's parameters are loaded into clax's model of the same name (its embedding
   tables set to the logits of rankd's probabilities; a pair rankd never saw gets rankd's
   prior 0.5), and clax's own conditional click log-probabilities give the log-likelihood and
   the conditional perplexity on the same held-out sessions, in float64. They must agree to
   1e-6 relative.
4. Fitting itself: clax trains its PBM by gradient descent (Adam, full batch, 3000 steps) on
   the same training sessions; rankd's EM without a prior (`--prior 0,0`, 1000 iterations)
   must reach a training log-likelihood at least as high, less 1e-4: both maximise the same
   likelihood, by different methods.

Cascade is not compared: clax's `CascadeModel` scores a click at rank k by the joint
probability of no click above and a click at k, where the chain rule needs the conditional
(α_k); the models agree on which sessions are likely but not on the likelihood's value.

The `clax` package is imported without its `Trainer` (which needs PyTorch only for data
loading): the models need only jax and flax.

    bench/.venv/bin/python bench/click_models_crosscheck.py --rankd target/release/rankd
"""

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
LETOR = os.path.join(HERE, "..", "..", "shared", "data", "letor-lightgbm", "rank.train")


def import_clax():
    spec = importlib.util.find_spec("clax")
    if spec is None:
        sys.exit("clax-models is not installed (bench/requirements-clicks.txt)")
    pkg = types.ModuleType("clax")
    pkg.__path__ = list(spec.submodule_search_locations)
    sys.modules["clax"] = pkg
    import jax

    jax.config.update("jax_enable_x64", True)
    from clax.models.pbm import PositionBasedModel
    from clax.models.ubm import UserBrowsingModel
    from clax.models.dbn import DynamicBayesianNetwork

    return PositionBasedModel, UserBrowsingModel, DynamicBayesianNetwork


def read_sessions(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def logit(p):
    return math.log(p) - math.log1p(-p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rankd", default=os.path.join(HERE, "..", "target", "release", "rankd"))
    ap.add_argument("--sessions", type=int, default=20000)
    ap.add_argument("--eta", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=1e-6)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import numpy as np
    import jax.numpy as jnp
    from flax import nnx

    PBM, UBM, DBN = import_clax()
    work = tempfile.mkdtemp(prefix="rankd-clicks-")
    sessions_path = os.path.join(work, "sessions.jsonl")
    subprocess.run(
        [args.rankd, "simulate-clicks", "--letor", LETOR, "--out", sessions_path,
         "--sessions", str(args.sessions), "--eta", str(args.eta), "--seed", str(args.seed),
         "--json"],
        check=True, stdout=subprocess.DEVNULL)
    params_dir = os.path.join(work, "params")
    out = subprocess.run(
        [args.rankd, "click-model", "--sessions", sessions_path, "--parameters", params_dir,
         "--json"],
        check=True, capture_output=True, text=True).stdout
    report = json.loads(out)
    sessions = read_sessions(sessions_path)
    keep = report["train_sessions"]
    train, test = sessions[:keep], sessions[keep:]
    depth = max(len(s["shown"]) for s in sessions)

    def batch(rows, pair_index):
        n = len(rows)
        ids = np.zeros((n, depth), dtype=np.int64)
        clicks = np.zeros((n, depth), dtype=np.int64)
        mask = np.zeros((n, depth), dtype=bool)
        positions = np.zeros((n, depth), dtype=np.int64)
        for i, s in enumerate(rows):
            clicked = set(s["clicks"])
            for k, row in enumerate(s["shown"]):
                ids[i, k] = pair_index.get((s["qid"], str(row)), 0)
                clicks[i, k] = int(row in clicked)
                mask[i, k] = True
                positions[i, k] = k + 1
        return {"query_doc_ids": jnp.array(ids), "clicks": jnp.array(clicks),
                "mask": jnp.array(mask), "positions": jnp.array(positions)}

    def set_table(param, values):
        """Embedding parameter with `values` as probabilities (index 0: rankd's prior)."""
        param.baseline.value = jnp.zeros((1,), dtype=jnp.float64)
        table = np.array([[logit(v)] for v in values], dtype=np.float64)
        param.embeddings.embedding.value = jnp.array(table)

    def metrics(cond_log_probs, b):
        lp = np.asarray(cond_log_probs, dtype=np.float64)
        c = np.asarray(b["clicks"]).astype(bool)
        m = np.asarray(b["mask"])
        lnp = np.where(c, lp, np.log(-np.expm1(np.minimum(lp, -1e-300))))
        ll = lnp[m].mean()
        per_rank = []
        for k in range(lp.shape[1]):
            col = m[:, k]
            if col.any():
                per_rank.append(2 ** (-(lnp[col, k] / math.log(2)).mean()))
        return ll, per_rank, float(np.mean(per_rank))

    results = []
    failures = []
    for m in report["models"]:
        name = m["model"]
        if name == "cascade":
            continue
        with open(os.path.join(params_dir, f"{name}.json")) as f:
            p = json.load(f)
        pair_index = {(q["query"], q["doc"]): i + 1 for i, q in enumerate(p["pairs"])}
        attractiveness = [0.5] + [q["attractiveness"] for q in p["pairs"]]
        rngs = nnx.Rngs(0)
        if name == "pbm":
            model = PBM(positions=depth, query_doc_pairs=len(p["pairs"]), rngs=rngs)
            set_table(model.examination, [0.5] + [row[0] for row in p["examination"]])
        elif name == "ubm":
            model = UBM(positions=depth, query_doc_pairs=len(p["pairs"]), rngs=rngs)
            # clax: index position·depth + last clicked position (0: none); rankd: row k
            # (rank k + 1), distance d = rank − last clicked rank.
            table = [0.5] * ((depth + 1) ** 2 + 1)
            for k, row in enumerate(p["examination"]):
                for d0, theta in enumerate(row):
                    last = (k + 1) - (d0 + 1)
                    table[(k + 1) * depth + last] = theta
            set_table(model.examination, table)
        else:
            model = DBN(query_doc_pairs=len(p["pairs"]), rngs=rngs)
            set_table(model.satisfaction, [0.5] + [q["satisfaction"] for q in p["pairs"]])
            model.continuation.weight.value = jnp.array([logit(p["continuation"])])
        set_table(model.attraction, attractiveness)
        b = batch(test, pair_index)
        ll, per_rank, ppl = metrics(model.predict_conditional_clicks(b), b)
        ours = m["test"]
        rel_ll = abs(ll - ours["log_likelihood"]) / abs(ours["log_likelihood"])
        rel_ppl = max(abs(a - o) / o for a, o in zip(per_rank, ours["perplexity_at"]))
        row = {"model": name, "rankd_log_likelihood": ours["log_likelihood"],
               "clax_log_likelihood": ll, "relative_difference": rel_ll,
               "rankd_perplexity": ours["perplexity"], "clax_perplexity": ppl,
               "worst_relative_difference_per_rank": rel_ppl}
        results.append(row)
        if not (rel_ll <= args.tolerance and rel_ppl <= args.tolerance):
            failures.append(name)

    # Fitting: clax's PBM by gradient descent against rankd's EM, on the training sessions.
    import optax

    # Maximum likelihood (no prior) to convergence: what gradient descent on the likelihood
    # approaches.
    mle_dir = os.path.join(work, "mle")
    mle = json.loads(subprocess.run(
        [args.rankd, "click-model", "--sessions", sessions_path, "--model", "pbm",
         "--prior", "0,0", "--iterations", "1000", "--parameters", mle_dir, "--json"],
        check=True, capture_output=True, text=True).stdout)
    with open(os.path.join(mle_dir, "pbm.json")) as f:
        p = json.load(f)
    pair_index = {(q["query"], q["doc"]): i + 1 for i, q in enumerate(p["pairs"])}
    b = batch(train, pair_index)
    model = PBM(positions=depth, query_doc_pairs=len(p["pairs"]), rngs=nnx.Rngs(args.seed))
    optimizer = nnx.Optimizer(model, optax.adam(0.05), wrt=nnx.Param)

    @nnx.jit
    def step(model, optimizer, b):
        # Negative log-likelihood per impression, as rankd reports it.
        def nll(mdl):
            return mdl.compute_loss(b, aggregate=False).sum() / b["mask"].sum()

        loss, grads = nnx.value_and_grad(nll)(model)
        optimizer.update(model, grads)
        return loss

    for _ in range(3000):
        step(model, optimizer, b)
    clax_train_ll, _, _ = metrics(model.predict_conditional_clicks(b), b)
    em = mle["models"][0]
    # The fitted examination, relative to rank 1, against the simulator's (1/k)^η.
    truth = [(1.0 / k) ** args.eta for k in range(1, depth + 1)]
    fit = {"rankd_em_train_log_likelihood": em["train_log_likelihood"],
           "clax_adam_train_log_likelihood": clax_train_ll,
           "examination_truth": truth,
           "examination_rankd_pbm": em["examination_relative"]}
    if em["train_log_likelihood"] < clax_train_ll - 1e-4:
        failures.append("pbm fit")

    summary = {"sessions": args.sessions, "eta": args.eta, "seed": args.seed,
               "parity": results, "fit": fit, "failures": failures}
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for r in results:
            print(f"{r['model']:<4} test LL rankd {r['rankd_log_likelihood']:.10f} "
                  f"clax {r['clax_log_likelihood']:.10f} (rel {r['relative_difference']:.1e}); "
                  f"perplexity rankd {r['rankd_perplexity']:.8f} clax {r['clax_perplexity']:.8f} "
                  f"(worst rank rel {r['worst_relative_difference_per_rank']:.1e})")
        print(f"pbm fit: EM train LL {fit['rankd_em_train_log_likelihood']:.6f}, "
              f"clax Adam {fit['clax_adam_train_log_likelihood']:.6f}")
        print("examination truth   " + " ".join(f"{t:.3f}" for t in truth))
        print("examination rankd   " + " ".join(f"{t:.3f}" for t in fit["examination_rankd_pbm"]))
        print("FAILED: " + ", ".join(failures) if failures else "all agree")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
