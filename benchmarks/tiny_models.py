"""The tiny Hugging Face models the real-model benchmarks compile (GPT-2, BERT, LLaMA, T5,
BART, DistilBERT, ViT, and a torch-only toy), built offline from configs with random
weights, each with the inputs it takes at a (batch, sequence length).  Shared by
``real_models.py`` and the benchmarks built on it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

VOCAB = 128


@dataclasses.dataclass
class ModelCase:
    """One model to compile: the module, how to build its inputs for (batch, seq), and
    whether a sequence sweep makes sense for it."""

    name: str
    module: Any
    inputs: Callable[[int, int], dict[str, Any]]
    seq_sweep: bool = True


# ------------------------------------------------------------------ the models (tiny configs, offline)


def _text_inputs(*, token_types: bool = False, decoder: bool = False,
                 use_cache: bool | None = False) -> Callable[[int, int], dict[str, Any]]:
    import torch

    def make(batch: int, seq: int) -> dict[str, Any]:
        g = torch.Generator().manual_seed(1000 * batch + seq)
        out: dict[str, Any] = {"input_ids": torch.randint(0, VOCAB, (batch, seq), generator=g),
                               "attention_mask": torch.ones(batch, seq, dtype=torch.long)}
        if token_types:
            out["token_type_ids"] = torch.zeros(batch, seq, dtype=torch.long)
        if decoder:
            out["decoder_input_ids"] = torch.randint(0, VOCAB, (batch, seq), generator=g)
        if use_cache is not None:
            out["use_cache"] = use_cache
        return out

    return make


def _vit_inputs(batch: int, seq: int) -> dict[str, Any]:
    import torch

    g = torch.Generator().manual_seed(batch)
    return {"pixel_values": torch.randn(batch, 3, 32, 32, generator=g)}


def _toy() -> ModelCase:
    """No transformers needed: embedding, attention-like batched matmul and a masked
    softmax, so that batch and sequence sizes both reach views, broadcasts and sdpa."""
    import torch

    class Toy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(VOCAB, 16)
            self.proj = torch.nn.Linear(16, 48)
            self.out = torch.nn.Linear(16, 16)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            b, s = input_ids.shape
            h = self.emb(input_ids)
            q, k, v = self.proj(h).view(b, s, 3, 2, 8).permute(2, 0, 3, 1, 4)
            mask = attention_mask[:, None, None, :].to(torch.bool)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            return self.out(a.transpose(1, 2).reshape(b, s, 16))

    make = _text_inputs(use_cache=None)
    return ModelCase("toy", Toy().eval(), make)


def _gpt2() -> ModelCase:
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=VOCAB, n_positions=64, bos_token_id=0,
                     eos_token_id=0, attn_implementation="sdpa")
    return ModelCase("gpt2", GPT2Model(cfg).eval(), _text_inputs())


def _bert() -> ModelCase:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                     vocab_size=VOCAB, max_position_embeddings=64, attn_implementation="sdpa")
    return ModelCase("bert", BertModel(cfg).eval(), _text_inputs(token_types=True, use_cache=None))


def _llama() -> ModelCase:
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                      intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64, bos_token_id=0,
                      eos_token_id=0, pad_token_id=0, attn_implementation="sdpa")
    return ModelCase("llama", LlamaModel(cfg).eval(), _text_inputs())


def _llama1b() -> ModelCase:
    """Llama 3.2 1B's configuration (16 layers, width 2048, grouped-query attention, its
    vocabulary) with random weights: where one Inductor compile costs what it costs users
    (issue 49), not a tiny width.  About 5 GB in float32."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, hidden_size=2048,
                      intermediate_size=8192, vocab_size=128256, max_position_embeddings=2048, rope_theta=500000.0,
                      tie_word_embeddings=True, bos_token_id=0, eos_token_id=0, pad_token_id=0,
                      attn_implementation="sdpa")
    with torch.device("meta"):
        module = LlamaModel(cfg)
    module = module.to_empty(device="cpu")
    with torch.no_grad():
        g = torch.Generator().manual_seed(0)
        for p in module.parameters():
            p.normal_(0.0, 0.02, generator=g)
        module.rotary_emb.__init__(cfg)  # its buffers (inv_freq) are computed, not random
    return ModelCase("llama1b", module.eval(), _text_inputs())


def _t5() -> ModelCase:
    from transformers import T5Config, T5Model

    cfg = T5Config(num_layers=2, num_decoder_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64,
                   vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
                   attn_implementation="sdpa")
    return ModelCase("t5", T5Model(cfg).eval(), _text_inputs(decoder=True))


def _bart() -> ModelCase:
    from transformers import BartConfig, BartModel

    cfg = BartConfig(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                     d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=VOCAB,
                     max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                     decoder_start_token_id=2, forced_eos_token_id=2, attn_implementation="sdpa")
    return ModelCase("bart", BartModel(cfg).eval(), _text_inputs())


def _distilbert() -> ModelCase:
    from transformers import DistilBertConfig, DistilBertModel

    cfg = DistilBertConfig(n_layers=2, n_heads=2, dim=32, hidden_dim=64, vocab_size=VOCAB,
                           max_position_embeddings=64, attn_implementation="sdpa")
    return ModelCase("distilbert", DistilBertModel(cfg).eval(), _text_inputs(use_cache=None))


def _vit() -> ModelCase:
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                    image_size=32, patch_size=8, attn_implementation="sdpa")
    return ModelCase("vit", ViTModel(cfg, add_pooling_layer=False).eval(), _vit_inputs, seq_sweep=False)


def on_device(case: ModelCase, device: str) -> ModelCase:
    """``case`` with its module and every input tensor moved to ``device``."""
    if device == "cpu":
        return case
    import torch

    def inputs(batch: int, seq: int) -> dict[str, Any]:
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in case.inputs(batch, seq).items()}

    return dataclasses.replace(case, module=case.module.to(device), inputs=inputs)


MODELS: dict[str, Callable[[], ModelCase]] = {
    "gpt2": _gpt2, "bert": _bert, "llama": _llama, "t5": _t5, "bart": _bart, "distilbert": _distilbert,
    "vit": _vit, "toy": _toy, "llama1b": _llama1b,
}
HF_MODELS = ("gpt2", "bert", "llama", "t5", "bart", "distilbert", "vit")
