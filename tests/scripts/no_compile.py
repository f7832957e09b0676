import torch
print(torch.ones(2) * 3)
