"""On a CUDA GPU: proved divisibility reaches the Triton kernels that run, and widening holds
where the kernels are Triton (and under CUDA graphs).  Marked ``gpu``: deselected where
torch sees no CUDA device (``tests/conftest.py``); on a GPU machine ``./dev.sh test -m gpu``.
"""

from __future__ import annotations

import re

import pytest
import torch

import verishape
from verishape.fuzz.widen_check import run_sweep

from widen_corpus import CASES

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _code(compile_fn, fn, x):
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False):
        out, sources = run_and_get_code(compile_fn(fn, backend="inductor"), x)
    return out, "\n".join(sources)


def _checked(mod):
    def f(x):
        torch._check(x.shape[0] % mod == 0)
        return torch.relu(x) * 2 + 1
    return f


def test_a_proved_multiple_drops_the_mask_in_the_kernel_that_runs():
    x = torch.randn(256, 32, device="cuda")
    torch._dynamo.mark_dynamic(x, 0)
    fn = _checked(128)
    stock_out, stock = _code(torch.compile, fn, x)
    ours_out, ours = _code(verishape.compile, fn, x)
    torch.testing.assert_close(ours_out, fn(x))
    torch.testing.assert_close(stock_out, fn(x))
    assert "xindex < xnumel" in stock
    assert re.search(r"xmask = tl\.full\(.*True", ours), ours


def test_a_proved_multiple_of_16_marks_the_size_argument_divisible():
    """3*s with s % 16 == 0: no structural rule shows 16 | 3*s; the proof does, and the
    kernel's ``tt.divisibility`` list grows by the size argument."""
    x = torch.randn(160, 3, device="cuda")
    torch._dynamo.mark_dynamic(x, 0)
    fn = _checked(16)
    _, stock = _code(torch.compile, fn, x)
    _, ours = _code(verishape.compile, fn, x)

    def divisible(src: str) -> int:
        found = re.findall(r"tt\.divisibility', 16\]\]|\(\d+,\): \[\['tt\.divisibility', 16\]\]", src)
        return len(found)

    assert divisible(ours) > divisible(stock), (stock, ours)


@pytest.mark.parametrize("name", ["slice_max", "slice_max_dim", "diff_abs_max", "batch_max", "layer_norm",
                                  "sdpa_causal_flag", "transpose_contiguous", "mutates_input_slice",
                                  "padding_mask_from_lengths", "gather_argmax", "conv_batch", "returns_size_minus_one"])
def test_widening_with_triton_kernels_is_never_wrong(name):
    case = next(c for c in CASES if c.name == name)
    sweep = run_sweep(case.fn, case.make, case.sweep, backend="inductor", device="cuda")
    assert sweep.wrong == [], sweep.to_dict()


def test_a_reused_artifact_under_cuda_graphs_does_not_replay_another_size():
    """``mode="reduce-overhead"``: the generic artifact records a CUDA graph per size it
    runs at; the reuse at 1 must give batch 1's values, not a replay of batch 3's graph."""
    def f(x):
        return (x @ x.transpose(0, 1)).softmax(-1) @ x

    sweep = run_sweep(f, lambda n: [torch.randn(n, 16, generator=torch.Generator().manual_seed(n))],
                      [2, 3, 1, 3, 1, 4], backend="inductor", device="cuda", mode="reduce-overhead")
    assert sweep.wrong == [] and sweep.other_differences == [], sweep.to_dict()


#: programs an H200 refused at 1 on a question of Triton's codegen before issue 37 (persistent
#: reductions, tiling splits, the range tree, strides, pattern checks): with those questions
#: accounted for, each reuses the generic artifact at 1 with Triton kernels
TRITON_REFUSED = ["batch_max", "batch_argmax", "expand_batch", "sdpa_plain", "contiguous_of_contiguous", "bmm_self",
                  "manual_causal_softmax", "cumsum_last", "last_token", "transpose_contiguous", "channels_last",
                  "mutates_input", "gather_argmax", "full_sum_wide"]


@pytest.mark.parametrize("name", TRITON_REFUSED)
def test_programs_refused_on_a_triton_question_reuse_now(name):
    case = next(c for c in CASES if c.name == name)
    sweep = run_sweep(case.fn, case.make, case.sweep, backend="inductor", device="cuda")
    assert sweep.wrong == [], sweep.to_dict()
    assert sweep.reuses > 0, sweep.refusals


@pytest.mark.parametrize("sweep_kind", ["batch", "seq"])
def test_a_tiny_decoder_reuses_at_batch_one_and_at_the_decode_step_with_triton_kernels(sweep_kind):
    """GPT-2 (tiny config) at batch 1 and at sequence length 1 reuses the generic artifact
    on CUDA, within float tolerance of eager."""
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    model = GPT2Model(GPT2Config(n_layer=2, n_head=4, n_embd=32, vocab_size=128, n_positions=64)).eval().cuda()
    sizes = [(2, 8), (3, 8), (1, 8), (4, 8)] if sweep_kind == "batch" else [(2, 8), (2, 12), (2, 1), (2, 5)]

    def make(i):
        b, n = sizes[i]
        return [torch.randint(0, 128, (b, n), generator=torch.Generator().manual_seed(i)),
                torch.ones(b, n, dtype=torch.long)]

    def fn(ids, mask):
        # inference, as served, with a mask (the H200: with grad on, AOTAutograd compiles a
        # training graph, which widening leaves alone by design; without a mask, Hugging Face's
        # mask code takes another branch at batch 1, a Dynamo graph that differs at 1)
        with torch.no_grad():
            return model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state

    sweep = run_sweep(fn, make, list(range(len(sizes))), backend="inductor", device="cuda")
    assert sweep.wrong == [], sweep.to_dict()
    assert sweep.reuses >= 1, sweep.refusals
