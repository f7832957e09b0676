"""Compile three programs with verishape and print, as JSON, what was installed and how
the answers were found.  The proof store tests run it twice against one store: the second
(warm) run must ask the solver nothing and install exactly the same artifacts."""

import json
import logging

import torch

from verishape import solvers
import verishape
from verishape.compiler.frames import envs_for
from verishape.proofs.result import BY_BOUNDS

logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")


def heads(x, y):
    # guard decisions (b // 2, b > 4) and guard minimization
    b = x.shape[0]
    z = x.view(b // 2, 2, -1).sum(1)
    if b > 4:
        z = z * 2
    return z + y[: b // 2].unsqueeze(1)


def mul_ge(x):
    # a data-dependent branch the torch._check facts decide
    a, b = x[0].item(), x[1].item()
    torch._check(a >= 0)
    torch._check(b >= 1)
    if a * b >= a:
        return torch.ones(a * b)[:a] * 2
    return torch.zeros(1)


def aligned(x):
    # divisibility from a checked fact
    n = x.shape[0]
    torch._check(n % 8 == 0)
    if n % 4 == 0:
        return x.view(n // 4, 4).sum(1)
    return x


def describe(fn):
    out = []
    for env in envs_for(fn.__code__):
        log = env.verishape_log
        out.append({
            "guards": [str(g.expr) for g in env.guards],
            "asserts": sorted(str(ra.expr) for ras in env.deferred_runtime_asserts.values() for ra in ras),
            "installed": [[str(g) for g in (m.kept if m.applied else m.stock)] for m in log.minimizations],
            "decisions": [[str(r.obligation.goal), r.decided, r.result.status] for r in log.records],
            "from_store": [r.result.from_store for r in log.proofs()],
            "by_bounds": [r.result.reason == BY_BOUNDS for r in log.proofs()],
            "summary": log.summary(),
        })
    return out


torch.manual_seed(0)
x8, y8 = torch.randn(8, 3), torch.randn(8)
torch._dynamo.mark_dynamic(x8, 0)
torch._dynamo.mark_dynamic(y8, 0)
x16 = torch.arange(16.0)
torch._dynamo.mark_dynamic(x16, 0)
runs = [
    (heads, (x8, y8), {}),
    (mul_ge, (torch.tensor([3, 2]),), {"fullgraph": True}),
    (aligned, (x16,), {}),
]
report = {"frames": {}, "outputs": {}}
for fn, args, kwargs in runs:
    out = verishape.compile(fn, backend="aot_eager", **kwargs)(*args)
    report["outputs"][fn.__name__] = out.tolist()
    report["frames"][fn.__name__] = describe(fn)
stats = solvers.default_prover().stats
report["solver_calls"] = stats.solver_calls
report["store_hits"] = stats.store_hits
report["explain"] = verishape.explain(verishape.compile(heads, backend="aot_eager"))
print("REPORT " + json.dumps(report))
