"""Static shapes at ten sizes: Dynamo stops recompiling after its limit (8) and runs the
later calls eagerly; those calls are never compiled, so never audited."""
import torch


def f(x):
    return x * x.shape[0]


compiled = torch.compile(f, backend="eager", dynamic=False)
for n in range(2, 12):
    compiled(torch.randn(n))
