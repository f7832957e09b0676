import torch


def f(x, y):
    b = x.shape[0]
    z = x.view(b // 2, 2, -1).sum(1)
    w = torch.cat([z, z], 0)[: b // 2]
    if b > 4:
        w = w * 2
    return torch.nn.functional.pad(w, (1, 1)) + y[: b // 2].unsqueeze(1)


x = torch.randn(8, 3)
y = torch.randn(8)
torch._dynamo.mark_dynamic(x, 0)
torch._dynamo.mark_dynamic(y, 0)
print(torch.compile(f, backend="aot_eager")(x, y).shape)
