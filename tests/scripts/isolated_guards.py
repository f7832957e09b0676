"""Three guards in one frame: a branch whose two sides compute the same values (breaking
its guard alone is harmless), a branch whose sides differ, and a guard that divides by
``y.shape[0] - 2`` (it raises at y = 2, a size the declared space admits)."""
import torch


def f(x, y, z):
    a = x * 2 if x.shape[0] > 16 else x + x
    b = y * 2 if y.shape[0] > 16 else y + 1
    if z.shape[0] // (y.shape[0] - 2) >= 1:
        return a, b, z * 3
    return a, b, z


x, y, z = torch.randn(20), torch.randn(30), torch.randn(40)
for t in (x, y, z):
    torch._dynamo.mark_dynamic(t, 0)
torch.compile(f, backend="eager")(x, y, z)
