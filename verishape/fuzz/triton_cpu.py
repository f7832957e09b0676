"""Inductor's Triton codegen on a machine without a GPU, kernels run by Triton's interpreter.

Widening's proof at size 1 depends on the questions Inductor's codegen asks while it lowers
the generic graph, and the SIMD/Triton codegen asks questions the C++ codegen never asks
(tiling splits, persistent reductions, the range tree's ``FloorDiv``/``ModularIndexing``
choice, 32-bit indexing).  A GPU is lent to few sessions, so the rules for those questions
must be checked on a CPU too, and checked against eager, not only for what they decide.

``torch._inductor.config.cpu_backend = "triton"`` makes Inductor generate Triton kernels for
CPU tensors, and ``TRITON_INTERPRET=1`` makes Triton run them in numpy.  Three gaps stand
between the two on a CPU-only machine (torch 2.13, Triton 3.6), each bridged here for one
block and undone after it:

* Inductor hashes the Triton backend of the active driver into each kernel's metadata, and
  there is no driver: a fixed string stands in (``torch.utils._triton.triton_hash_with_backend``);
* the kernels call ``libdevice`` (CUDA's math library), which the interpreter does not patch:
  each function resolves to the interpreter's ``tl.math`` at call time, and the few that
  ``tl.math`` lacks (``tanh``, ``pow``...) are written in ``tl`` operations;
* the interpreter converts a one-element array to an index with ``int()``, which numpy 2
  refuses for arrays with a dimension (``tl.range`` over a size argument): it reads the element;

Triton decides when a ``@triton.jit`` function is defined whether it is interpreted, and
Triton's own library (``tl.max``...) and Inductor's helpers (``triton_helpers.max2``...) are
defined at import: ``TRITON_INTERPRET=1`` must be in the environment before the process
imports Triton (``benchmarks/widen_corpus.py --device triton-cpu`` sets it first thing).
:func:`triton_on_cpu` refuses, in one line, a process where it was not.

This is a test harness (the kernels are slow: numpy, block by block), used by
``benchmarks/widen_corpus.py --device triton-cpu`` and the tests of the Triton rules.  The
compile threads are 1 (kernels are loaded in this process, where the interpreter is set).
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from typing import Any

#: what the interpreter lacks from libdevice, written in operations it has (approximations
#: where noted: a kernel that uses them differs from eager by rounding, on every call, stock's
#: too; ``pow`` is right for positive bases only)
_WRITTEN = {
    "tanh": lambda tl: lambda x: 2 * tl.sigmoid(2 * x) - 1,
    "pow": lambda tl: lambda x, y: tl.math.exp2(tl.math.log2(x) * y),
    "isnan": lambda tl: lambda x: x != x,
    "isinf": lambda tl: lambda x: tl.abs(x) == float("inf"),
    "log1p": lambda tl: lambda x: tl.math.log(1 + x),
    "expm1": lambda tl: lambda x: tl.math.exp(x) - 1,
    "signbit": lambda tl: lambda x: x < 0,
    "trunc": lambda tl: lambda x: tl.where(x < 0, tl.math.ceil(x), tl.math.floor(x)),
}


def _libdevice(tl: Any, real: Any) -> types.ModuleType:
    shim = types.ModuleType("verishape_libdevice")
    for name in dir(real):
        if name.startswith("_"):
            continue
        if name in _WRITTEN:
            setattr(shim, name, _WRITTEN[name](tl))
        elif hasattr(tl.math, name):
            # looked up at call time: the interpreter patches ``tl.math`` while a kernel runs
            setattr(shim, name, (lambda n: lambda *a, **k: getattr(tl.math, n)(*a, **k))(name))
    return shim


@contextlib.contextmanager
def triton_on_cpu() -> Iterator[None]:
    """For one block: Inductor generates Triton kernels for CPU tensors and Triton's
    interpreter runs them.  Raises ImportError without Triton, RuntimeError where Triton was
    imported without ``TRITON_INTERPRET=1``."""
    import triton.language as tl
    import triton.language.extra.libdevice as real_libdevice
    import triton.runtime.interpreter as interpreter
    import torch

    from verishape.core import torch_names, torch_seam

    # UnsupportedTorch is an ImportError: the check is skipped with this one line as its reason
    torch_seam.require_names(torch_names.TRITON_CPU_VOCABULARY, "the fuzzer's Triton-on-CPU check")
    import torch.utils._triton as triton_utils
    from torch._inductor.runtime import triton_helpers

    patch_tensor = interpreter._patch_lang_tensor

    def patch_lang_tensor(tensor: Any, scope: Any) -> None:
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    undo = [(triton_utils, "triton_hash_with_backend", triton_utils.triton_hash_with_backend),
            (triton_helpers, "libdevice", triton_helpers.libdevice),
            (interpreter, "_patch_lang_tensor", patch_tensor)]
    if not isinstance(triton_helpers.max2, interpreter.InterpretedFunction):
        raise RuntimeError("Triton was imported without TRITON_INTERPRET=1: set it in the environment before the "
                           "process imports torch or triton (its library is compiled or interpreted at import)")
    triton_utils.triton_hash_with_backend = lambda: "verishape-triton-on-cpu"
    triton_helpers.libdevice = _libdevice(tl, real_libdevice)
    interpreter._patch_lang_tensor = patch_lang_tensor
    try:
        with torch._inductor.config.patch(cpu_backend="triton", compile_threads=1):
            yield
    finally:
        for owner, name, value in undo:
            setattr(owner, name, value)
