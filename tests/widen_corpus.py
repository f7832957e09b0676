"""An adversarial corpus for batch-1 widening: programs written to make a reused artifact
wrong at size 1 (or at a size derived from it that becomes 0 or 1).

Each program is swept over a size that reaches 1 after two generic sizes (automatic
dynamic: the first call compiles static, the second dynamic) and compared with eager by
:func:`verishape.fuzz.widen_check.run_sweep` on both backends (``tests/test_widen_corpus.py``,
``benchmarks/widen_corpus.py``).  The groups name what each program attacks.  ``REUSES``
lists, per backend, programs that must keep reusing at 1 (breadth that must not be lost
while soundness is tightened).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from widen_corpus_base import CASES, SWEEP, Case, _randn, case, cube, image, rows, seq  # noqa: F401 - the corpus's API


# ---------------------------------------------------------------------------- empty and size-1 reductions


@case("empty reduction", rows)
def slice_max(x):
    return x[1:].max()


@case("empty reduction", rows)
def slice_max_dim(x):
    return torch.max(x[1:], 0)


@case("empty reduction", rows)
def diff_abs_max(x):
    return torch.diff(x, dim=0).abs().max()


@case("empty reduction", seq)
def seq_slice_max(h):
    return h[:, 1:].max(dim=1)


@case("empty reduction", rows)
def slice_argmin(x):
    return x[:-1].argmin(0)


@case("empty reduction", rows)
def slice_sum(x):
    return x[1:].sum(0)


@case("empty reduction", rows)
def slice_prod_all(x):
    return x[1:].prod()


@case("empty reduction", rows)
def slice_mean(x):
    return x[1:].mean(0)


@case("empty reduction", rows)
def slice_std(x):
    return x[1:].std(0)


@case("empty reduction", rows)
def slice_logsumexp(x):
    return torch.logsumexp(x[1:], 0)


@case("empty reduction", rows)
def slice_any(x):
    return (x[1:] > 0).any(0)


@case("empty reduction", seq)
def narrow_amax(h):
    return h.narrow(1, 0, h.shape[1] - 1).amax(1)


@case("size-1 reduction", rows)
def batch_max(x):
    return x.max(0).values


@case("size-1 reduction", rows)
def batch_argmax(x):
    return x.argmax(0)


@case("size-1 reduction", rows)
def batch_std(x):
    return x.std(0)


@case("size-1 reduction", rows)
def batch_var_mean(x):
    return torch.var_mean(x, 0)


@case("size-1 reduction", seq)
def seq_softmax_sum(h):
    return F.softmax(h, 1).sum(1)


@case("size-1 reduction", rows)
def full_sum_wide(x):
    return x.repeat(1, 1024).sum()


@case("size-1 reduction", rows)
def cumsum_last(x):
    return x.cumsum(0)[-1]


@case("size-1 reduction", rows)
def median_batch(x):
    return x.median(0).values


# ---------------------------------------------------------------------------- layout


@case("layout", cube)
def transpose_contiguous(x):
    return x.transpose(0, 1).contiguous() * 2


@case("layout", cube)
def permute_out(x):
    return x.permute(2, 0, 1) + 1


@case("layout", seq)
def seq_transpose_reshape(h):
    return h.transpose(1, 2).reshape(h.shape[0], -1)


@case("layout", cube)
def reshape_merge(x):
    return x.reshape(-1, 4).sum(1)


@case("layout", rows)
def view_as_columns(x):
    return x.reshape(4, -1)


@case("layout", image)
def channels_last(x):
    return x.contiguous(memory_format=torch.channels_last) + 1


@case("layout", image)
def conv_batch(x):
    w = torch.ones(2, 3, 3, 3)
    return F.conv2d(x, w, padding=1)


@case("layout", rows)
def expand_batch(x):
    return x[:, :1].expand(-1, 4) * x


@case("layout", cube)
def unflatten_batch(x):
    return x.flatten(0, 1).unflatten(0, (x.shape[0], 3))


# ---------------------------------------------------------------------------- aliasing and mutation


@case("aliasing", rows)
def returns_input_view(x):
    return x[1:], x.sum()


@case("aliasing", rows)
def returns_transposed_input(x):
    return x.t()


@case("aliasing", rows)
def mutates_input(x):
    x.mul_(2)
    return x.sum(1)


@case("aliasing", rows)
def mutates_input_slice(x):
    x[1:] += 1
    return x


@case("aliasing", rows)
def mutates_first_row(x):
    x[0] = 0
    return x * 2


@case("aliasing", cube, (lambda n: (3,)))
def writes_a_buffer_reads_a_reshape(x, buf):
    # the graph writes a buffer (a static cache) and reads a reshape of another input, a
    # view at 1 and a copy otherwise (Gemma 2's decode step): by value the same
    buf.add_(1)
    return x.transpose(0, 1).reshape(3, -1).sum(0)


@case("aliasing", lambda n: (n, 2, 5, 4), lambda n: (n, 2, 1, 4))
def writes_a_batch_value_at_an_index(x, v):
    # torch's indexing drops a value's leading dimensions of size 1 before index_put (a
    # static sliding-window cache's update at batch 1): index_put broadcasts them back
    y = x.clone()
    y[:, :, torch.tensor([1])] = v
    return y * 2


@case("aliasing", lambda n: (n, 2, 5, 4), lambda n: (n, 2, 1, 4))
def adds_a_batch_value_at_an_index_then_reads_it(x, v):
    # the same dropped dimensions under an accumulating update, and the value read again
    y = x.clone()
    y[:, :, torch.tensor([3])] += v
    return y.sum(2), v.squeeze(2) + y[:, :, 3]


@case("aliasing", cube, lambda n: (3, 4))
def writes_a_buffer_and_a_slice_of_a_copy(x, buf):
    # ``y[:, 1:] = ...`` goes through a whole dim-0 slice and a scatter back in the generic
    # graph, through none at 1; the graph writes a buffer too (a static cache's update)
    buf.add_(1)
    y = x.clone()
    y[:, 1:] = 0.5
    return y.sum(0)


@case("aliasing", cube)
def writes_a_slice_of_its_input_then_reads_a_copy(x):
    # the same scatter, where the graph's write reaches the scattered tensor's source
    y = x.clone()
    x[:, 1:] = 0.5
    return y.sum(0) + x.sum(0)


@case("aliasing", cube)
def reshape_then_write_its_source(x):
    # a reshape that is a view at 1 and a copy otherwise, read after its source is written:
    # at 1 eager's result sees the write, so the generic artifact (a copy) must not serve it
    r = x.transpose(0, 1).reshape(3, -1)
    x.add_(1)
    return r.sum(0)


@case("aliasing", rows)
def clone_then_fill(x):
    y = x.clone()
    y[-1] = 3
    return y


@case("aliasing", cube)
def contiguous_of_contiguous(x):
    return x.contiguous(), x.transpose(1, 2).contiguous()


@case("aliasing", rows)
def two_views_of_one(x):
    y = x * 2
    return y[:, :2], y[:, 2:]


@case("aliasing", cube)
def contiguous_then_write(x):
    y = x.transpose(0, 1).contiguous()  # at 1 a no-op: y is x, and the write reaches x
    y[0] = 1
    return x + 0, y


@case("aliasing", seq)
def reshape_then_write(h):
    y = h.transpose(1, 2).reshape(h.shape[0], -1)  # a view at length 1, a copy otherwise
    y[:, 0] = 5
    return h * 1


@case("aliasing", cube)
def as_strided_of_a_copy(x):
    return torch.as_strided(x.transpose(0, 1).contiguous(), (2, 2), (1, 2)) * 2


@case("aliasing", cube)
def contiguous_returned_view(x):
    return x.transpose(0, 1).contiguous()[0]


# ---------------------------------------------------------------------------- branching


@case("branching", rows)
def branch_gt_one(x):
    if x.shape[0] > 1:
        return x * 2
    return x * 3


@case("branching", rows)
def branch_eq_one(x):
    if x.shape[0] == 1:
        return x.squeeze(0)
    return x


@case("branching", rows)
def branch_even(x):
    return x + 1 if x.shape[0] % 2 == 0 else x - 1


@case("branching", rows)
def squeeze_batch(x):
    return x.squeeze(0) * 2


@case("branching", rows)
def scale_by_size(x):
    return x * x.shape[0]


@case("branching", rows)
def divide_by_size_minus_one(x):
    return x.sum(0) / (x.shape[0] - 1)


@case("branching", rows)
def int_divide_by_size_minus_one(x):
    return (x * 10).long() // (x.shape[0] - 1)


@case("branching", rows)
def returns_size_minus_one(x):
    return x * 2, x.shape[0] - 1


@case("branching", rows)
def returns_size_test(x):
    return x + 1, x.shape[0] > 1


# ---------------------------------------------------------------------------- norms


@case("norm", (lambda n: (n, 3, 5)))
def batch_norm_train(x):
    return F.batch_norm(x, None, None, training=True)


@case("norm", (lambda n: (n, 3)))
def batch_norm_train_2d(x):
    return F.batch_norm(x, None, None, training=True)


@case("norm", (lambda n: (n, 4, 5)))
def group_norm(x):
    return F.group_norm(x, 2)


@case("norm", (lambda n: (n, 3, 5)))
def instance_norm(x):
    return F.instance_norm(x)


@case("norm", seq)
def layer_norm(h):
    return F.layer_norm(h, (4,))


@case("norm", rows)
def normalize_batch_dim(x):
    return F.normalize(x, dim=0)


@case("norm", rows)
def batch_norm_module_train(x):
    bn = torch.nn.BatchNorm1d(4)
    bn.train()
    return bn(x)


# ---------------------------------------------------------------------------- attention and masks


@case("attention", seq)
def sdpa_plain(h):
    q = h.unsqueeze(1)
    return F.scaled_dot_product_attention(q, q, q)


@case("attention", seq)
def sdpa_causal_flag(h):
    q = h.unsqueeze(1)
    return F.scaled_dot_product_attention(q, q, q, is_causal=h.shape[1] > 1)


@case("attention", seq)
def sdpa_tril_mask(h):
    q = h.unsqueeze(1)
    m = torch.ones(h.shape[1], h.shape[1], dtype=torch.bool).tril()
    return F.scaled_dot_product_attention(q, q, q, attn_mask=m)


@case("attention", seq)
def manual_causal_softmax(h):
    s = h @ h.transpose(1, 2) / 2.0
    s = s.masked_fill(torch.ones(h.shape[1], h.shape[1], dtype=torch.bool).triu(1), float("-inf"))
    return s.softmax(-1) @ h


@case("attention", seq)
def padding_mask_from_lengths(h):
    lengths = torch.arange(h.shape[0]) + h.shape[1] - 1
    mask = torch.arange(h.shape[1])[None, :] < lengths[:, None]
    return (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)


@case("attention", seq)
def last_token(h):
    return h[:, -1, :] @ torch.ones(4, 3)


@case("attention", seq)
def shift_labels(h):
    return h[:, :-1] - h[:, 1:]


# ---------------------------------------------------------------------------- gather, index, join


@case("index", rows)
def gather_argmax(x):
    return x.gather(0, x.argmax(0, keepdim=True))


@case("index", rows)
def index_select_tail(x):
    return x.index_select(0, torch.arange(1, x.shape[0]))


@case("index", rows)
def take_last_row(x):
    return x[x.shape[0] - 1]


@case("index", rows)
def gather_constant_row(x):
    return x.gather(0, torch.ones(1, 4, dtype=torch.long))


@case("index", rows)
def cat_with_slice(x):
    return torch.cat([x, x[1:]], 0)


@case("index", rows)
def stack_and_split(x):
    return torch.stack([x, x * 2]).split(1, 1)[0]


@case("index", rows)
def chunk_batch(x):
    return x.chunk(2, 0)[0]


@case("index", rows)
def unbind_first(x):
    return x.unbind(1)[0]


@case("index", rows)
def topk_one(x):
    return torch.topk(x, 1, 0).values


@case("index", rows)
def roll_flip(x):
    return torch.roll(torch.flip(x, [0]), 1, 0)


@case("index", rows)
def embedding_of_positions(x):
    table = torch.arange(24.0).reshape(6, 4)
    return F.embedding(torch.arange(x.shape[0]), table) + x


# ---------------------------------------------------------------------------- matmul and pooling


@case("matmul", rows)
def gram(x):
    return x @ x.t()


@case("matmul", cube)
def bmm_self(x):
    return torch.bmm(x.transpose(1, 2), x)


@case("matmul", rows)
def linear(x):
    return F.linear(x, torch.ones(5, 4), torch.zeros(5))


@case("matmul", (lambda n: (2, 3, n)))
def avg_pool_seq(x):
    return F.avg_pool1d(x, 1)


@case("matmul", (lambda n: (n, 3, 8)))
def interpolate(x):
    return F.interpolate(x, scale_factor=2)


# ---------------------------------------------------------------------------- graph breaks


@case("graph break", rows)
def break_between(x):
    y = x * 2
    torch._dynamo.graph_break()
    return y[1:].sum(0) + y.max(0).values


@case("graph break", rows)
def break_then_reduce(x):
    y = x.relu()
    torch._dynamo.graph_break()
    return y[1:].amax()


@case("graph break", rows)
def break_in_branch(x):
    if x.shape[0] > 1:
        torch._dynamo.graph_break()
        return x.sum(0)
    return x[0]


@case("graph break", rows, rows)
def two_inputs(x, y):
    z = x + y
    torch._dynamo.graph_break()
    return z * y.shape[0]


import widen_corpus_relayout  # noqa: E402,F401 - registers the input-layout group (issue 38)
import widen_corpus_branches  # noqa: E402,F401 - registers the higher-order-op group


#: programs that reuse the generic artifact at 1, per backend, and must keep doing so.  Under Inductor,
#: ``writes_a_buffer_and_a_slice_of_a_copy`` and ``writes_a_slice_of_its_input_then_reads_a_copy`` no longer do:
#: the reinplacing pass (``_inplace_generalized_scatter``) acts on "is the batch 1?", which nothing proves at 1 yet
#: (docs/compile.md, "An answer moot where it was first asked, acted on elsewhere")
REUSES = {
    "inductor": ("batch_max", "batch_argmax", "batch_std", "batch_var_mean", "cumsum_last", "permute_out",
                 "reshape_merge", "channels_last", "conv_batch", "expand_batch", "returns_transposed_input",
                 "mutates_input", "mutates_first_row", "scale_by_size", "returns_size_minus_one",
                 "returns_size_test", "batch_norm_train", "group_norm", "instance_norm", "sdpa_plain",
                 "sdpa_tril_mask", "padding_mask_from_lengths", "last_token", "gather_argmax", "bmm_self",
                 "interpolate", "two_inputs", "gram", "linear", "layer_norm", "seq_softmax_sum", "full_sum_wide",
                 "transpose_contiguous", "contiguous_of_contiguous", "kv_cache_step", "relaid_reduction",
                 "relaid_flatten", "writes_a_buffer_reads_a_reshape", "writes_a_batch_value_at_an_index",
                 "adds_a_batch_value_at_an_index_then_reads_it", "cond_on_values", "cond_branch_reduces",
                 "cond_nested", "cond_on_two_inputs"),
    "aot_eager": ("slice_max", "slice_sum", "batch_max", "batch_std", "layer_norm", "gram", "last_token",
                  "returns_size_minus_one", "mutates_input", "scale_by_size", "shift_labels", "kv_cache_step",
                  "relaid_reduction", "relaid_flatten", "writes_a_buffer_reads_a_reshape",
                  "writes_a_batch_value_at_an_index", "adds_a_batch_value_at_an_index_then_reads_it",
                  "writes_a_buffer_and_a_slice_of_a_copy", "writes_a_slice_of_its_input_then_reads_a_copy",
                  "cond_on_values", "cond_branch_reduces", "cond_branch_empty_reduction", "cond_nested",
                  "cond_on_two_inputs"),
}
