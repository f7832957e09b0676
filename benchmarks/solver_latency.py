"""Solver latency on guard-shaped queries.

Builds a fixed, seeded corpus of the questions a ShapeEnv asks (divisibility of products,
range facts, duck-size equalities, floor-division bounds, view reshapes), asks each one
cold and then again (the cache), and reports p50/p99 latency, status counts and the cache
hit rate as JSON.

    python benchmarks/solver_latency.py [--n 300] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

import sympy
from torch.utils._sympy import functions as tf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from verishape import solvers  # noqa: E402

S = [sympy.Symbol(f"s{i}", integer=True, positive=True) for i in range(4)]
U = [sympy.Symbol(f"u{i}", integer=True, nonnegative=True) for i in range(3)]


def _query(rng: random.Random) -> tuple[sympy.Basic, list[sympy.Basic]]:
    a, b, c = rng.sample(S, 3)
    u, v = rng.sample(U, 2)
    k = rng.choice([2, 4, 8, 16, 32, 64, 128])
    m = rng.choice([2, 3, 4, 8, 16, 64, 4096])
    shape = rng.randrange(10)
    if shape == 0:  # divisibility of a product, given a divisibility fact
        return sympy.Eq(tf.Mod(32 * a, m), 0), [sympy.Eq(tf.Mod(a, k), 0)]
    if shape == 1:  # view/reshape tower
        n = a * b + a * c
        return sympy.Eq(tf.Mod(n, tf.FloorDiv(n, 2)), 0), [sympy.Eq(tf.Mod(n, 2), 0), sympy.Ge(n, 4)]
    if shape == 2:  # range guard implied by others
        return sympy.Le(a, k * 2), [sympy.Le(a, k), sympy.Ge(b, 2)]
    if shape == 3:  # duck sizing / equality chains
        return sympy.Eq(a, c), [sympy.Eq(a, b), sympy.Eq(b, c)]
    if shape == 4:  # unbacked product bound
        return sympy.Le(u * v, k * k), [sympy.Le(u, k), sympy.Le(v, k)]
    if shape == 5:  # floor division bound
        return sympy.Le(tf.FloorDiv(u + v, 2), tf.Max(u, v)), []
    if shape == 6:  # transitivity over three unbacked sizes
        w = U[2]
        return sympy.Le(u, w + k), [sympy.Le(u, v), sympy.Le(v, w)]
    if shape == 7:  # a guard that is not implied (refuted)
        return sympy.Gt(a, k), [sympy.Ge(a, 2)]
    if shape == 8:  # nonlinear monotonicity
        return sympy.Ge(u * a, u), [sympy.Ge(a, 1)]
    # modular indexing range
    return sympy.Lt(tf.ModularIndexing(u, k, m), m), []


def run(n: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    corpus = [_query(rng) for _ in range(n)]
    prover = solvers.Prover(store=None)  # the solver itself, not the proof store
    cold: list[float] = []
    statuses: dict[str, int] = {}
    for goal, prem in corpus:
        t = time.perf_counter()
        r = prover.prove(goal, prem)
        dt = time.perf_counter() - t
        if not r.cached:
            cold.append(dt)
        statuses[r.status] = statuses.get(r.status, 0) + 1
    warm: list[float] = []
    for goal, prem in corpus:
        t = time.perf_counter()
        prover.prove(goal, prem)
        warm.append(time.perf_counter() - t)

    def pct(xs: list[float], p: float) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3

    return {
        "benchmark": "solver_latency",
        "queries": 2 * n,
        "distinct_cold_queries": len(cold),
        "statuses_first_pass": statuses,
        "cold_ms": {"p50": pct(cold, 0.5), "p99": pct(cold, 0.99), "mean": statistics.mean(cold) * 1e3,
                    "max": max(cold) * 1e3},
        "warm_ms": {"p50": pct(warm, 0.5), "p99": pct(warm, 0.99)},
        "cache_hit_rate": prover.stats.hit_rate,
        "solver_time_s": prover.stats.solver_time_s,
        "limits": {"rlimit": prover.limits.rlimit, "timeout_ms": prover.limits.timeout_ms},
        "machine": platform.machine(),
        "python": platform.python_version(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="number of queries in the corpus (each asked twice)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the report here")
    args = ap.parse_args()
    report = run(args.n, args.seed)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
