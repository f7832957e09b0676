"""A frame compiled again is compiled generic in the sizes its inputs share (issue 38): its
first compile is static, as stock's; from its second on, once its calls have brought more
than one layout of inputs (a served decoder's prefill and decode steps), every size that two
or more input tensors share gets a symbol, so the artifact serves the sizes still to come and
the widening proofs serve sizes of 1 from it; a frame always called with the same inputs
keeps stock's choices (issue 49) (:mod:`verishape.compiler.widen.generic_recompile`)."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.utils import counters

import verishape
from verishape.compiler import frames
from verishape.compiler.widen import generic_recompile, input_layouts
from verishape.core import torch_names, torch_seam
from verishape.compiler.widen.sizes import source_names

#: (batch, length): a size changes, then a batch of 1, then new sizes of both
CALLS = ((2, 8), (2, 9), (1, 10), (3, 11), (1, 12))


pytestmark = pytest.mark.usefixtures("fresh_frames")


def project(x, mask, w, cache=None):
    """A served step in small: activations and a mask that share the batch and the length,
    and from the second call on a cache that carries them too (a decode step's state,
    which a prefill does not have yet)."""
    y = ((x @ w).relu() * mask[..., None]).sum(-1)
    return y if cache is None else y + cache


def _compiles(compiled, fn, calls=CALLS, width=16, *, prefill=True, cache=True):
    """Calls ``compiled`` at ``calls``, each result checked against ``fn``; the first without
    the cache where ``prefill`` (the frame's first call), none with it unless ``cache``.
    Returns the compiles (graphs traced less those served by a reuse)."""
    w = torch.randn(width, 4)
    for i, (b, n) in enumerate(calls):
        x, mask = torch.randn(b, n, width), torch.ones(b, n)
        kv = torch.randn(b, n) if cache and not (prefill and i == 0) else None
        torch.testing.assert_close(compiled(x, mask, w, kv), fn(x, mask, w, kv))
    return counters["stats"]["unique_graphs"] - counters["verishape"]["reused"]


def _symbol_sources(fn):
    return [sorted(n for s in e.var_to_sources for n in source_names(e, s)) for e in frames.envs_for(fn.__code__)]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_the_second_compile_is_generic_and_serves_every_later_call(backend):
    """Stock compiles 4 times (static, then the length, then batch 1 static, then the
    batch); verishape twice: static, then generic in both shared sizes, batch 1 reused from
    it."""
    compiled = verishape.compile(project, backend=backend)
    assert _compiles(compiled, project) == 2
    assert counters["verishape"]["reused_at_size_1"] == 1
    first, generic, *_ = _symbol_sources(project)
    assert first == [], "the first compile is static"
    assert {"L['x'].size()[0]", "L['x'].size()[1]", "L['mask'].size()[0]"} <= set(generic)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_frame_called_with_the_same_inputs_keeps_stocks_choices(backend):
    """A sweep of one program (the same inputs at every call, batches 2, 3, 1, 4 at one
    length): the recompile makes a symbol of the batch alone, what changed, as stock's
    automatic dynamic does; the length it never varies stays a constant (a symbol there
    costs every later stage of the compile).  Batch 1 is still reused from it: 2 compiles,
    stock's 3 (Note [A frame's inputs that vary earn the generic policy])."""
    compiled = verishape.compile(project, backend=backend)
    assert _compiles(compiled, project, ((2, 8), (3, 8), (1, 8), (4, 8)), cache=False) == 2
    assert counters["verishape"]["reused_at_size_1"] == 1
    first, recompile, *_ = _symbol_sources(project)
    assert first == [] and "L['x'].size()[0]" in recompile
    assert not any(n.endswith(".size()[1]") for n in recompile), "the length never changed"


def test_a_frame_whose_inputs_vary_later_takes_the_generic_policy_then():
    """The same inputs at the first two compiles (stock's choices), a cache at the third:
    that recompile is generic in every shared size, and the ones after it are served."""
    compiled = verishape.compile(project, backend="aot_eager")
    assert _compiles(compiled, project, ((2, 8), (3, 8)), cache=False) == 2
    assert _compiles(compiled, project, ((3, 9), (1, 11), (5, 12)), prefill=False) == 3
    generic = _symbol_sources(project)[2]  # (the env after it is the trace at 1, reused)
    assert {"L['x'].size()[0]", "L['x'].size()[1]", "L['cache'].size()[0]", "L['cache'].size()[1]"} <= set(generic)
    assert counters["verishape"]["reused_at_size_1"] == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_a_trace_headed_for_a_reuse_at_one_takes_stocks_choices(backend):
    """Batch 1 arrives for the generic compile (batches 2, 3, 1 at one length): the trace
    at 1 keeps no shared size as a symbol it has not earned by changing (the length stays
    8, where the generic compile made it a symbol), the reuse binds the generic length to
    8, and the call runs the generic artifact.  A later batch-1 call at another length
    compiles once more, as stock's automatic dynamic would, and is reused too."""
    calls = ((2, 8), (3, 8), (1, 8))
    compiled = verishape.compile(project, backend=backend)
    assert _compiles(compiled, project, calls) == 2
    first, generic, at_one = _symbol_sources(project)
    assert "L['x'].size()[1]" in generic and at_one == []
    assert counters["verishape"]["reused_at_size_1"] == 1
    assert _compiles(compiled, project, ((1, 12),), prefill=False) == 2
    assert counters["verishape"]["reused_at_size_1"] == 2
    assert "L['x'].size()[1]" in _symbol_sources(project)[-1]


def branches_at_one(x, mask, w, cache=None):
    """Another program at batch 1: the reuse at 1 is refused (its graphs differ)."""
    y = project(x, mask, w, cache)
    return y * 2 if x.shape[0] == 1 else y


def test_a_refused_trace_at_one_is_traced_again_with_the_generic_policy():
    """Where every reuse refuses the trace that took stock's choices, the frame is traced
    again with the generic policy: what compiles at 1 is generic in the shared length, and
    a batch-1 call at another length runs it without compiling."""
    compiled = verishape.compile(branches_at_one, backend="aot_eager")
    assert _compiles(compiled, branches_at_one, ((2, 8), (3, 8), (1, 8))) == 3
    assert counters["verishape"]["arrivals_retraced"] == 1 and counters["verishape"]["reused"] == 0
    assert "L['x'].size()[1]" in _symbol_sources(branches_at_one)[-1]
    assert _compiles(compiled, branches_at_one, ((1, 12),), prefill=False) == 3


def test_a_frame_whose_arrivals_at_one_keep_being_refused_stops_its_generic_policy():
    """The refused arrival is traced again with the generic policy once; a second arrival at
    1 in a row that every kept compile refuses (in double precision: no graph is the same)
    says the frame's generic compiles do not pay: that trace, stock's, compiles as it is,
    and the frame's later recompiles take stock's choices (Gemma 2 past its sliding window)."""
    compiled = verishape.compile(branches_at_one, backend="aot_eager")
    assert _compiles(compiled, branches_at_one, ((2, 8), (3, 8), (1, 8))) == 3
    assert counters["verishape"]["arrivals_retraced"] == 1
    x, mask, w, kv = (torch.randn(*shape, dtype=torch.float64) for shape in ((1, 9, 16), (1, 9), (16, 4), (1, 9)))
    torch.testing.assert_close(compiled(x, mask, w, kv), branches_at_one(x, mask, w, kv))
    assert counters["stats"]["unique_graphs"] - counters["verishape"]["reused"] == 4
    assert counters["verishape"]["arrivals_retraced"] == 1 and counters["verishape"]["generic_policy_stopped"] == 1
    assert counters["verishape"]["reused"] == 0


class _StaticCache:
    """A static KV cache in small: its length is an int, and the prefill makes its tensor;
    a cache that served a request before holds its keys (the first request's does not
    yet: the frame's calls bring another input from the second on)."""

    def __init__(self, max_len, batch=None):
        self.max_len = max_len
        self.keys = None if batch is None else torch.zeros(batch, max_len)


def prefill(ids, pos, cache):
    """A prefill that lays its tokens into a buffer of the cache's length (an int no input
    tensor carries yet), as Hugging Face's static cache creates its keys from ``max_cache_len``."""
    h = (ids * pos).float()
    return torch.cat([h, torch.zeros(h.shape[0], cache.max_len - h.shape[1])], 1).cumsum(1)


#: (batch, length, cache length): the cache length changes only with the third request
PREFILLS = ((1, 9, 13), (3, 6, 13), (1, 14, 18), (4, 5, 18), (2, 11, 18))


def _prefills(compiled, calls=PREFILLS):
    for i, (b, n, m) in enumerate(calls):
        ids, pos = torch.randint(1, 9, (b, n)), torch.arange(n).expand(b, n)
        cache = _StaticCache(m, None if i == 0 else b)
        torch.testing.assert_close(compiled(ids, pos, cache), prefill(ids, pos, cache))
    return counters["stats"]["unique_graphs"] - counters["verishape"]["reused"]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_an_int_argument_of_a_generic_recompile_gets_a_symbol(backend):
    """The cache's length (an int argument, unchanged when the batch first changes) gets a
    symbol at the second compile, so a new cache length at batch 1 is a reuse of it and a
    new batch runs it: 2 compiles; stock's automatic dynamic compiles 4 times (the length
    a constant until it changes, batch 1 static, then the batch again)."""
    assert _prefills(verishape.compile(prefill, backend=backend)) == 2
    assert counters["verishape"]["reused_at_size_1"] == 1
    generic = frames.envs_for(prefill.__code__)[1]
    assert "L['cache'].max_len" in {n for s in generic.var_to_sources for n in source_names(generic, s)}
    torch._dynamo.reset()
    counters.clear()
    assert _prefills(torch.compile(prefill, backend=backend)) == 4


@pytest.mark.parametrize("options", [{"dynamic": False}, {"generic_recompiles": False}])
def test_an_int_argument_stays_static_with_dynamic_false_or_the_policy_off(options):
    _prefills(verishape.compile(prefill, backend="aot_eager", **options), PREFILLS[:2])
    envs = frames.envs_for(prefill.__code__)
    assert len(envs) == 2, "both compiles ran under verishape"
    names = {n for e in envs for s in e.var_to_sources for n in source_names(e, s)}
    assert "L['cache'].max_len" not in names


def count_up(x, steps):
    """One tensor and an int: nothing is shared, so the int keeps stock's policy."""
    return x * steps + x.shape[0]


def test_an_int_beside_a_single_input_keeps_stock_policy():
    compiled = verishape.compile(count_up, backend="aot_eager")
    for b in (3, 4, 5):
        x = torch.randn(b, 2)
        torch.testing.assert_close(compiled(x, 7), count_up(x, 7))
    names = {n for e in frames.envs_for(count_up.__code__) for s in e.var_to_sources for n in source_names(e, s)}
    assert "L['steps']" not in names


def test_stock_policy_when_turned_off_and_for_stock_backends():
    """``generic_recompiles=False`` and a plain ``torch.compile`` (the hook installed by an
    earlier verishape compile in the process) both compile as stock: 4 times."""
    verishape.compile(project, backend="aot_eager")  # installs the hook
    assert {torch_names.AUTOMATIC_DYNAMIC, torch_names.WRAP_INT} <= torch_seam._wrapped_once
    assert _compiles(torch.compile(project, backend="aot_eager"), project) == 4
    torch._dynamo.reset()
    counters.clear()
    assert _compiles(verishape.compile(project, backend="aot_eager", generic_recompiles=False), project) == 4


def test_widening_off_keeps_stock_policy():
    assert _compiles(verishape.compile(project, backend="aot_eager", widen_specializations=False), project) == 4


def test_marked_static_sizes_parameters_and_dynamic_false_stay_static():
    width = 16

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(width, 4)

        def forward(self, x):
            return self.lin(x).relu()

    net = Net()
    compiled = verishape.compile(net, backend="aot_eager")
    for b, n in ((2, 8), (3, 9)):
        x = torch.randn(b, n, width)
        torch._dynamo.mark_static(x, 1)
        torch.testing.assert_close(compiled(x), net(x))
    with frames._envs_lock:
        envs = [e for es in frames._envs_by_code.values() for e in es]
    assert len(envs) == 2
    names = {n for e in envs for s in e.var_to_sources for n in source_names(e, s)}
    assert "L['x'].size()[0]" in names
    assert "L['x'].size()[1]" not in names, "mark_static is kept"
    assert not any("lin" in n for n in names), "parameters stay static"

    torch._dynamo.reset()
    static = verishape.compile(project, backend="aot_eager", dynamic=False)
    _compiles(static, project, calls=((2, 8), (2, 9)))
    assert all(srcs == [] for srcs in _symbol_sources(project))


def test_a_size_the_trace_pins_is_specialized_back():
    """A shared size fixed by a weight (a module's parameter, static) gets a symbol and a
    guard that pins it: the artifact is generic only where the program is."""
    lin = torch.nn.Linear(16, 4)

    def layer(x, shift=None):
        return lin(x if shift is None else x + shift).relu()

    compiled = verishape.compile(layer, backend="aot_eager")
    for b, n in ((2, 8), (3, 9), (4, 10)):
        x, shift = torch.randn(b, n, 16), (None if b == 2 else torch.randn(16))
        torch.testing.assert_close(compiled(x, shift), layer(x, shift))
    assert counters["stats"]["unique_graphs"] == 2, "a new batch and length compile nothing"
    env = frames.envs_for(layer.__code__)[-1]
    width = [s for s in env.var_to_sources if "L['x'].size()[2]" in source_names(env, s)]
    assert width and all(env.replace(s) == 16 for s in width)


def test_a_size_one_input_has_alone_keeps_stock_policy():
    """A single input: nothing is shared, so the recompile makes only the size that
    changed a symbol, as stock does (no lowering question about sizes no call varies)."""

    def softmax_sum(h):
        return torch.softmax(h, 1).sum(1)

    compiled = verishape.compile(softmax_sum, backend="aot_eager")
    for n in (3, 4, 1):
        h = torch.randn(2, n, 4)
        torch.testing.assert_close(compiled(h), softmax_sum(h))
    assert _symbol_sources(softmax_sum)[1] == ["L['h'].size()[1]"]
    assert counters["verishape"]["reused_at_size_1"] == 1


_TABLE = torch.randn(6, 8)


def test_globals_stay_static_even_when_they_share_a_size():
    def lookup(x):
        return x @ _TABLE

    compiled = verishape.compile(lookup, backend="aot_eager")
    for b in (6, 7, 8):
        x = torch.randn(b, 6)
        torch.testing.assert_close(compiled(x), lookup(x))
    assert not any("G[" in n for srcs in _symbol_sources(lookup) for n in srcs)


def test_shared_sizes_walks_arguments_and_objects_not_modules():
    class Cache:
        def __init__(self):
            self.layers = [{"keys": torch.zeros(2, 3, 7, 5)}, {"keys": torch.zeros(2, 3, 7, 5)}]

    shared, _ = input_layouts.walk({"self": torch.nn.Linear(7, 7), "ids": torch.zeros(2, 9),
                                    "kwargs": {"cache": Cache()}})
    assert shared == {2, 3, 5, 7}, "the Linear's 7 is not counted; the cache's sizes are"
    assert input_layouts.walk({"x": torch.zeros(4, 9)})[0] == frozenset()


def test_a_view_input_is_reused_at_batch_1():
    """A mask passed as a view of a same-shaped base (as Hugging Face's static cache passes
    its 4-d mask): batch 1 is reused from the generic recompile, the result equals eager's."""

    def masked(x, mask):
        return (x * mask[:, 0, 0, :, None]).sum(1)

    compiled = verishape.compile(masked, backend="aot_eager")
    for b, n in ((2, 5), (3, 6), (1, 7), (1, 8)):
        mask = torch.ones(b, 1, 1, n)[:, :, :, :]
        x = torch.randn(b, n, 4)
        torch.testing.assert_close(compiled(x, mask), masked(x, mask))
    assert counters["verishape"]["reused_at_size_1"] >= 1


class _Source:
    def __init__(self, name):
        self.name = name


class _Guard:
    def __init__(self, expr):
        self.expr = expr


def _env(sizes, guards=()):
    """A shape env's bindings in small: ``{symbol name: [source names]}``."""
    import sympy
    from types import SimpleNamespace

    symbols = {name: sympy.Symbol(name, integer=True, positive=True) for name in sizes}
    return SimpleNamespace(var_to_sources={symbols[n]: [_Source(s) for s in srcs] for n, srcs in sizes.items()},
                           replacements={}, guards=[_Guard(g(symbols)) for g in guards],
                           deferred_runtime_asserts={}), symbols


def test_an_unread_base_symbol_is_left_out_of_the_binding_check_and_a_read_one_is_not():
    """The rule behind the static cache's reuse at batch 1 (``reuse._unread_bases``): a
    symbol only a view's ``_base`` sizes carry, in one trace alone, is left out when nothing
    of that trace reads it; read by a guard, the traces bind sizes differently: refused."""
    import sympy

    from verishape.compiler.widen import binding
    from verishape.compiler.widen.canon import NotWidened

    mask, base = "L['mask'].size()[3]", "L['mask']._base.size()[3]"
    generic, _ = _env({"s1": ["L['x'].size()[0]"], "s2": [mask]})
    unread, _ = _env({"s2": [mask], "s3": [base]})
    s1 = sympy.Symbol("s1", integer=True, positive=True)
    assert binding.bind(generic, (s1,), unread, lambda src: None).names == {mask: mask}
    read, _ = _env({"s2": [mask], "s3": [base]}, guards=[lambda s: sympy.Eq(s["s3"], s["s2"])])
    with pytest.raises(NotWidened, match="keeps symbolic sizes the generic trace has as constants"):
        binding.bind(generic, (s1,), read, lambda src: None)


def test_the_dynamo_decision_it_wraps_exists_with_the_arguments_it_reads():
    """The one Dynamo function the policy wraps (``torch_names.AUTOMATIC_DYNAMIC``), with the
    arguments the wrapper reads by position, and the compile id it reads: a torch that
    renamed them fails here, not silently in a compile."""
    import importlib
    import inspect

    from torch._guards import CompileId

    module, name = torch_names.AUTOMATIC_DYNAMIC
    fn = getattr(importlib.import_module(module), name)
    fn = getattr(fn, "_verishape_original", fn)
    assert list(inspect.signature(fn).parameters)[:4] == ["e", "tx", "source", "static_shapes"]
    assert "frame_compile_id" in CompileId.__dataclass_fields__
    cls_name, method = torch_names.WRAP_INT[1].split(".")
    wrap = getattr(getattr(importlib.import_module(torch_names.WRAP_INT[0]), cls_name), method)
    wrap = getattr(wrap, "_verishape_original", wrap)
    assert list(inspect.signature(wrap).parameters)[:3] == ["self", "value", "dynamism"]


@pytest.mark.parametrize("options,compiles", [({"backend": "aot_eager"}, 2),
                                              ({"backend": "aot_eager", "generic_recompiles": False}, 4),
                                              ({"backend": "aot_eager", "widen_specializations": False}, 4)])
def test_the_named_backend_reads_the_policy_from_its_options(options, compiles):
    """``torch.compile(backend="verishape")``: generic recompiles as ``verishape.compile``
    has them, off with its options."""
    assert _compiles(torch.compile(project, backend="verishape", options=options), project) == compiles


def test_the_named_backend_refuses_a_bad_policy_option():
    from verishape.compiler.registered import BadOption, _settings

    with pytest.raises(BadOption, match=r"options\['generic_recompiles'\]='yes' must be True or False"):
        _settings(None, {"generic_recompiles": "yes"})


def _matmul(x, y):
    return x @ y


def _masked_mean(x, m):
    return (x * m[:, :, None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1)


def _cat_mean(x, y):
    return torch.cat([x, y], 0).mean(0)


def _in_place_slice(x, y):
    x.add_(1)
    return x[: y.shape[0]] + y


def _flat_views(x, y):
    return x.view(-1)[: y.numel()] * y.reshape(-1)


ADVERSARIAL = {
    "matmul": (_matmul, lambda a, b: (torch.randn(a, b), torch.randn(b, a))),
    "masked_mean": (_masked_mean, lambda a, b: (torch.randn(a, b, 3), torch.ones(a, b))),
    "cat_mean": (_cat_mean, lambda a, b: (torch.randn(a, b), torch.randn(b, b))),
    "in_place_slice": (_in_place_slice, lambda a, b: (torch.randn(a + b, 3), torch.randn(b, 3))),
    "flat_views": (_flat_views, lambda a, b: (torch.randn(a, b), torch.randn(b, a))),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_shared_sizes_that_become_0_or_1_coincide_or_alias_agree_with_eager(name):
    """Inputs that share sizes by construction and by coincidence, swept through sizes of 0
    and 1, an in-place write and views, in a frame whose recompiles are generic: every call
    (outputs, and inputs after it) equals eager's, and no more is compiled than stock would."""
    fn, make = ADVERSARIAL[name]

    def step(x, y, state=None):  # the first call brings a state the later ones do not: generic recompiles
        return fn(x, y)

    compiled = verishape.compile(step, backend="aot_eager")
    for i, (a, b) in enumerate(((2, 3), (3, 3), (1, 3), (4, 5), (3, 1), (1, 1), (0, 2), (2, 0), (5, 5), (1, 7))):
        torch.manual_seed(a * 10 + b)
        args = make(a, b)
        torch.manual_seed(a * 10 + b)
        expected_args = make(a, b)
        torch.testing.assert_close(compiled(*args, torch.zeros(()) if i == 0 else None), fn(*expected_args))
        for got, want in zip(args, expected_args):
            torch.testing.assert_close(got, want)
    assert counters["stats"]["unique_graphs"] - counters["verishape"]["reused"] <= 5
