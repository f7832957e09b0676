"""A LayerNorm and a Dropout compiled with ``dynamic=True``: their ``eps`` and ``p`` are
traced as float symbols and guarded by value; those are not shape guards."""
import torch

model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8), torch.nn.Dropout(0.1)).eval()
torch.compile(model, backend="eager", dynamic=True)(torch.randn(4, 8))
