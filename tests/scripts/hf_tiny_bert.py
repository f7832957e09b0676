"""A tiny BERT (random weights, built offline from a config) called twice through
``torch.compile`` with different batch sizes; ``input_ids``, ``attention_mask`` and
``token_type_ids`` share the batch symbol, and its LayerNorm reads a float ``eps``."""

import torch
from transformers import BertConfig, BertModel

torch.manual_seed(0)
config = BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                    vocab_size=100, max_position_embeddings=64)
model = BertModel(config).eval()
compiled = torch.compile(model, backend="eager")


def call(batch: int, seq: int) -> torch.Tensor:
    ids = torch.randint(0, 100, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    types = torch.zeros(batch, seq, dtype=torch.long)
    with torch.no_grad():
        return compiled(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state


print(call(2, 8).shape, call(3, 8).shape)
