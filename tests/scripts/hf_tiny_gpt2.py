"""A tiny GPT-2 (random weights, built offline from a config) called twice through
``torch.compile`` with different batch sizes: the second call recompiles dynamically,
and ``input_ids`` and ``attention_mask`` share the batch (and sequence) symbol."""

import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
config = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=100, n_positions=64)
model = GPT2LMHeadModel(config).eval()
compiled = torch.compile(model, backend="eager")


def call(batch: int, seq: int) -> torch.Tensor:
    ids = torch.randint(0, 100, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    with torch.no_grad():
        return compiled(input_ids=ids, attention_mask=mask).logits


print(call(2, 8).shape, call(3, 8).shape)
