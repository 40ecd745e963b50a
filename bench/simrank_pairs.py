#!/usr/bin/env python3
"""Independent Monte Carlo check of single SimRank values on a graph file (Hollins layout or
edge list, as graph_scores reads): s(a,b) = E[C^tau], tau the first meeting time of two
independent reverse random walks from a and b (Jeh & Widom's random surfer-pairs model), each
step taken only while a coin with P(continue) = C says so, so a sample is 1 or 0.

Usage: python3 bench/simrank_pairs.py FILE A:B [A:B ...] [--samples 200000] [--seed 1]
Prints s(a,b) with a 99.9% Hoeffding half-width; compare with `graph_scores similar`.
"""
import math
import random
import sys


def read_in_links(path):
    inn = {}
    with open(path) as f:
        first = f.readline().split()
        hollins = len(first) == 3 and all(t.isdigit() for t in first)
        if hollins:
            n = int(first[0])
            for _ in range(n):
                f.readline()
        else:
            f.seek(0)
        for line in f:
            parts = line.split()
            if len(parts) < 2 or line.startswith("#"):
                continue
            s, t = parts[0], parts[1]
            if s != t:
                inn.setdefault(t, set()).add(s)
    return {k: sorted(v) for k, v in inn.items()}


def simrank_pair(inn, a, b, c, samples, rng):
    if a == b:
        return 1.0
    met = 0
    for _ in range(samples):
        x, y = a, b
        while rng.random() < c:
            ix, iy = inn.get(x), inn.get(y)
            if not ix or not iy:
                break
            x, y = rng.choice(ix), rng.choice(iy)
            if x == y:
                met += 1
                break
    return met / samples


def main():
    args = sys.argv[1:]
    samples, seed = 200_000, 1
    if "--samples" in args:
        i = args.index("--samples")
        samples = int(args[i + 1])
        del args[i:i + 2]
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i:i + 2]
    path, pairs = args[0], args[1:]
    inn = read_in_links(path)
    rng = random.Random(seed)
    half = math.sqrt(math.log(2 / 1e-3) / (2 * samples))
    for pair in pairs:
        a, b = pair.split(":")
        s = simrank_pair(inn, a, b, 0.8, samples, rng)
        print(f"s({a},{b}) = {s:.4f} ± {half:.4f}")


if __name__ == "__main__":
    main()
