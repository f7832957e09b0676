"""One frame, nine inputs, each with its own size branch: compiled once at sizes above
every branch point, then served without guards (the deployment the audit checks).  Nine
guards, none implied by the declared sizes [2, oo): more findings than Dynamo's recompile
limit (8), so a replay that recompiled per finding would end up running eager."""
import torch


def f(a, b, c, d, e, g, h, i, j):
    out = []
    for t in (a, b, c, d, e, g, h, i, j):
        out.append(t * 2 if t.shape[0] > 16 else t + 1)
    return out


inputs = [torch.randn(17 + k) for k in range(9)]
for t in inputs:
    torch._dynamo.mark_dynamic(t, 0)
torch.compile(f, backend="eager")(*inputs)
