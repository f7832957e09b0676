"""Widening with Triton's codegen (issue 37), checked without a GPU.

* the recorded questions of Triton's codegen (GPU runs on torch 2.11, the Triton codegen on
  this CPU on torch 2.13), replayed through the torch functions that asked them: each gets
  the outcome of its rule (``tests/data/triton_questions.json``, ``tests/triton_replay.py``);
* the rules themselves: a no-guard query's answer acts the same with the lower bound 1, a
  tiling split's branch, 32-bit indexing's hint, 2.11's pattern-matcher recheck;
* the interception registry: every row resolves on this torch, a torch without a required
  one is refused in one line, and each recorded answer agrees with torch's own at its sizes;
* end to end (slow): the corpus programs that the H200 refused on a Triton question, swept
  to 1 with Triton kernels run by Triton's interpreter, reuse the generic artifact and
  agree with eager.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sympy
import torch

from triton_replay import OUTCOMES, Record, _chain, replay
from verishape.compiler.widen import questions
from verishape.core import torch_names, torch_seam

ROOT = Path(__file__).resolve().parents[1]
RECORDS = Record.load_all()


def _id(r: Record) -> str:
    return f"{r.source[:3]}-{r.program}-{r.site[0]}-{r.expr}"


@pytest.mark.parametrize("record", RECORDS, ids=[_id(r) for r in RECORDS])
def test_a_recorded_question_gets_the_outcome_of_its_rule(record):
    assert record.outcome in OUTCOMES
    assert replay(record) == record.outcome


def test_the_records_cover_the_gpu_refusals_and_the_cpu_triton_questions():
    sources = {r.source.split(",")[0] for r in RECORDS}
    assert any("H200" in s for s in sources) and "cpu" in sources
    gpu = [r for r in RECORDS if "H200" in r.source]
    # every GPU refusal asked through a no-guard query and answered False is moot by
    # construction now; the ones still refused are asked another way
    assert all(r.outcome == "unchanged" for r in gpu if r.ask == "statically_known_true" and r.answer == "False")
    assert sum(r.outcome == "unchanged" for r in gpu) >= 20


def test_a_no_guard_answer_is_kept_only_where_its_caller_would_act_differently():
    """``statically_known_true(Eq(s, 1))``: False with s >= 2, unknown with s >= 1, read as
    False both ways (nothing kept); the same answer asked as a plain static evaluation (a
    guard would be added on unknown) is kept and refused at 1; a True that becomes unknown
    (``s > 1``) is kept: the caller takes another branch at 1."""
    site = ("lookup", "construct_entries")
    no_guard = Record("t", "p", site, "Eq(4, 4*s0)", "False", "statically_known_true", "")
    assert replay(no_guard) == "unchanged"
    assert replay(Record("t", "p", site, "Eq(4, 4*s0)", "False", "static", "")) == "refused"
    assert replay(Record("t", "p", site, "s0 > 1", "True", "statically_known_true", "")) == "refused"
    # a SymBool no-guard query (same_meta, bmm_to_mm) and statically_known_false
    assert replay(Record("t", "p", ("same_meta",), "Eq(s0, 1)", "False", "sym_statically_known_true", "")) == \
        "unchanged"
    assert replay(Record("t", "p", ("f",), "Eq(s0, 1)", "False", "sym_statically_known_false", "")) == "refused"


def test_a_tiling_split_branch_is_moot_only_where_asked_in_the_split_itself():
    split = ("_split_iteration_ranges", "try_split")
    assert replay(Record("t", "p", split, "2*s0 > 2", "True", "statically_known_true", "")) == "moot"
    # "this size is 1" drops its index variable: right only where the size is 1 at 1 too
    # (Max(1, 3 - s) is 1 for every s >= 2, and 2 at s = 1)
    assert replay(Record("t", "p", split, "Eq(Max(1, 3 - s0), 1)", "True", "statically_known_true", "")) == \
        "refused"
    # a divisibility asked by add_range inside the split is proved at 1 on its own
    divides = ("add_range", "_split_iteration_ranges")
    assert replay(Record("t", "p", divides, "Eq(Mod(4*s0 - 4, s0 - 1), 0)", "True", "statically_known_true",
                         "")) == "refused"
    assert replay(Record("t", "p", divides, "Eq(Mod(4*s0, s0), 0)", "True", "statically_known_true", "")) in (
        "unchanged", "proved")


def test_the_kernel_memory_statistics_are_moot_only_in_their_own_body():
    """DeBERTa-v2's stride question in simd_kernel_features (a heuristic's statistics)."""
    stats = ("StatsForReadsOrWrites.compute", "compute", "memory_stats")
    question = "Eq(ModularIndexing(1, s0, 4), 0)"
    assert replay(Record("t", "p", stats, question, "True", "statically_known_true", "")) == "moot"
    assert replay(Record("t", "p", ("other", *stats), question, "True", "statically_known_true", "")) == "refused"


def test_thirty_two_bit_indexing_answers_the_bound_not_the_hint():
    s = sympy.Symbol("s", integer=True, positive=True)
    log = questions.QuestionLog(frozenset({s}))

    def read() -> None:
        questions._observe_hint(log, "guarding", 4 * s, 12)
        questions._observe_hint(log, "guarding", 4 * s * 2**30, 3 * 2**32)

    _chain(("expr_fits_within_32bit", "can_use_32bit_indexing"), read)  # the site is read off the stack
    assert [(q.expr, q.answer) for q in log.questions] == [(sympy.Le(4 * s, questions.INT32_MAX), sympy.true)]
    assert log.heuristic_hints == {"expr_fits_within_32bit": 1}  # 64-bit indexing: right at every size


def test_the_gpu_schedulers_loop_order_hints_are_heuristics():
    """The H200 (torch 2.11, Triton) refused LLaMA's, Mistral's, Qwen2's, Gemma's and Qwen3's
    batch and sequence sweeps on ``Eq(s27, 12)``, a guarding hint read for a loop order
    (``guarding hint <- normalize_with_stride_order <- shared_data_after_reordering_loop``),
    then on ``Eq(8*s27, 96)`` (``<- shared_data_after_reordering_loop <- can_fuse``): the order
    two accesses are compared in and the buffer that guides a loop reordering, right at every
    size. Any other site reading the same hint stays an answer."""
    s = sympy.Symbol("s", integer=True, positive=True)
    log = questions.QuestionLog(frozenset({s}))
    stack = ("normalize_with_stride_order", "_try_reorder_loops_for_candidates", "shared_data_after_reordering_loop")
    _chain(stack, lambda: questions._observe_hint(log, "guarding", s, 12))
    assert log.questions == [] and log.heuristic_hints == {"normalize_with_stride_order": 1}
    # the next read on the H200's stack: the largest shared buffer's numel picks the guide
    _chain(("shared_data_after_reordering_loop", "can_fuse"), lambda: questions._observe_hint(log, "guarding", 8 * s, 96))
    assert log.questions == [] and log.heuristic_hints["shared_data_after_reordering_loop"] == 1
    _chain(("can_fuse",), lambda: questions._observe_hint(log, "guarding", s, 12))
    assert [q.expr for q in log.questions] == [sympy.Eq(s, 12)]


def test_the_interception_registry_resolves_on_this_torch():
    assert torch_seam.widening_missing() == []
    assert torch_seam.widening_refused() is None
    for row in torch_names.WIDENING_REGISTRY:
        assert row.present(torch_seam.resolve), row
    # every function a question's reading is recognised by exists where it is looked for
    for (tail, name) in questions.NON_GUARDING_READS:
        module = tail.removesuffix(".py").replace("/", ".")
        module = {"_inductor.sizevars": "torch._inductor.sizevars",
                  "experimental.symbolic_shapes": "torch.fx.experimental.symbolic_shapes"}[module]
        found = any(torch_seam.resolve(f"{module}.{owner}{name}") is not torch_names._MISSING
                    for owner in ("", "SizeVarAllocator.")) or (
            name == "statically_known" and "def statically_known(" in
            __import__("inspect").getsource(torch_seam.resolve(f"{module}.SizeVarAllocator._simplify_with_ranges")))
        assert found, (tail, name)


def test_a_torch_without_a_required_interception_is_refused_in_one_line():
    table = {f"{row.module}.{path}": object() for row in torch_names.WIDENING_REGISTRY for path in row.paths}
    table[".".join(torch_names.RANGE_READER)] = object()
    table.update({name: object() for name in torch_names.LOWERING_VOCABULARY})  # the IR classes widening reads
    assert torch_seam.widening_missing(table) == []
    # 2.11 reads guarding hints through size_hint: one of the row's names is enough
    for path in ("guarding_hint_or_throw", "replace_backed_symbols_with_hints", "symbolic_hint", "size_hint_or_throw"):
        del table[f"torch._inductor.sizevars.SizeVarAllocator.{path}"]
    assert torch_seam.widening_missing(table) == []
    del table["torch._inductor.sizevars.SizeVarAllocator.size_hint"]
    del table[".".join(torch_names.RANGE_READER)]
    missing = torch_seam.widening_missing(table)
    assert len(missing) == 2 and "guarding_hint_or_throw or" in missing[0] and "bound_sympy" in missing[1]
    # an optional row (a layout computation) missing loses reuse, not soundness
    del table["torch._inductor.kernel.conv.conv_layout"]
    assert len(torch_seam.widening_missing(table)) == 2


def test_nested_hint_reads_are_one_read(monkeypatch):
    """2.11's ``size_hint`` calls ``symbolic_hint``: one read, reported by the outer reader."""
    from verishape.compiler.widen import recompute

    seen = []
    inner = recompute._tracked_hint("guarding", lambda *a: seen.append(a[2]), lambda self, e: e + 1)
    outer = recompute._tracked_hint("guarding", lambda *a: seen.append(("outer", a[2])),
                                    lambda self, e: inner(self, e) * 2)
    assert outer(None, 3) == 8
    assert seen == [("outer", 3)]


def test_the_size_one_proof_does_not_decide_when_symbols_cannot_be_renamed():
    """A goal over a positive ``s`` and a plain integer ``s`` of the same name: renaming
    would merge them, so nothing is decided (it was decided over the unrenamed symbols)."""
    from types import SimpleNamespace

    from verishape.compiler.widen.goals import _prove_one
    from verishape.core.premises import Premises, current_prover, plain_symbols

    s_pos = sympy.Symbol("s", integer=True, positive=True)
    s_int = sympy.Symbol("s", integer=True)
    goal, premise = s_pos + s_int >= 1, s_int >= 0  # true only by s_pos's declaration (``positive``)
    assert plain_symbols([goal, premise]) is None
    # a new trace whose entry checks ``premise``: its premises cannot be stated, nothing decided
    entry = SimpleNamespace(guards=[SimpleNamespace(expr=premise)], var_to_range={}, backed_var_to_val={},
                            replace=lambda e: e)
    assert Premises.of_trace(entry, {}, [goal]) is None
    t = sympy.Symbol("t", integer=True, positive=True)
    stated = Premises.stated([t >= 2], plain_symbols([t >= 1, t >= 2]))
    assert _prove_one(current_prover(), stated, t >= 1, "t") is not None


def test_each_recorded_answer_agrees_with_torchs_own_at_its_sizes(monkeypatch):
    """Conformance: every answer the question log saw during a real lowering is the one
    torch's static evaluation gives with the env's own ranges (where torch decides it), or,
    where verishape's solver decided it, holds at the compile's sizes."""
    import verishape
    from verishape.core.shape_env import _base_static

    seen = []
    original = questions.QuestionLog.observe

    def observe(self, env, base_static, expr, answer, fallback=None, **kw):
        seen.append((env, expr, answer, kw))  # (``fallback``: how the caller reads it, not how torch decides it)
        return original(self, env, base_static, expr, answer, fallback=fallback, **kw)

    monkeypatch.setattr(questions.QuestionLog, "observe", observe)

    def f(x, y):
        return (x.softmax(-1) @ y).reshape(-1, 2).sum(0) + x[:, :2].mean()

    compiled = verishape.compile(f)
    with torch._inductor.config.patch(fx_graph_cache=False), torch._functorch.config.patch(enable_autograd_cache=False):
        for n in (3, 4):
            x, y = torch.randn(n, 4), torch.randn(4, 6)
            torch.testing.assert_close(compiled(x, y), f(x, y))
    torch._dynamo.reset()
    assert seen, "the lowering asked nothing about the batch size"
    for env, expr, answer, kw in seen:
        stock = _base_static(env, expr, **kw)
        if stock is not None:
            assert stock == answer, (expr, stock, answer)
        else:
            assert bool(expr.xreplace(env.backed_var_to_val)) == bool(answer), (expr, answer)


@pytest.mark.slow
def test_triton_kernels_on_the_cpu_reuse_where_the_gpu_refused_and_agree_with_eager(tmp_path):
    """The corpus programs the H200 refused at 1 on a question of Triton's codegen (persistent
    reductions, tiling splits, the range tree, strides, is_zero_elements, pattern checks),
    swept with Inductor's Triton codegen on this CPU and the kernels run by Triton's
    interpreter: each reuses the generic artifact at 1, and no call differs from eager."""
    gpu = json.loads((ROOT / "benchmarks" / "reference" / "gpu" / "widen_corpus_h200.json").read_text())
    refused_on_triton = sorted(
        name for name, row in gpu["programs"].items()
        if not row["inductor"]["reuses"] and any(
            site in r for r in row["inductor"]["refusals"]
            for site in ("asked in _get_persistent_RBLOCK", "asked in _split_iteration_ranges", "asked in lookup",
                         "asked in prepare_split_iteration_lengths", "asked in significant_strides_equal",
                         "asked in check_fn", "asked in bmm_to_mm", "asked in same_meta", "asked in create",
                         "asked in is_contiguous_strides_for_shape"))
        and "slice" not in name)
    assert len(refused_on_triton) >= 12
    out = tmp_path / "corpus.json"
    env = {**os.environ, "TRITON_INTERPRET": "1", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "widen_corpus.py"), "--backend", "inductor",
                          "--device", "triton-cpu", "--only", ",".join(refused_on_triton), "--json", str(out)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["device"].startswith("cpu (Inductor's Triton codegen")
    summary = data["summary"]["inductor"]
    assert summary["wrong"] == []
    not_reused = {n: row["inductor"]["refusals"] for n, row in data["programs"].items() if not row["inductor"]["reuses"]}
    # those whose Dynamo or AOT graph differs at 1, or whose size is 0 at 1, refuse on
    # every backend; none may refuse on a question of the Triton codegen
    assert not any("_split_iteration_ranges" in r or "_get_persistent_RBLOCK" in r or "lookup" in r
                   for rs in not_reused.values() for r in rs), not_reused
    assert summary["reused"] >= len(refused_on_triton) - len(not_reused) >= 10


def test_every_site_a_rule_names_is_a_function_of_this_torch():
    """The rules recognise Inductor's functions by name on a question's stack: a name torch
    renamed would silently stop matching (sound: its answers then count as given and refuse,
    but the reuse is lost).  Every name must still be defined in torch's Inductor or FX source."""
    import pathlib

    import torch as torch_pkg

    root = pathlib.Path(torch_pkg.__file__).parent
    source = "\n".join(p.read_text(errors="replace") for folder in ("_inductor", "fx/experimental", "fx/passes",
                                                                     "_subclasses")
                       for p in (root / folder).rglob("*.py"))
    for tail, name in questions.OUTSIDE_SITES:
        assert f"def {name}(" in (root / tail).read_text(), (tail, name)
    names = {*questions.SITES, *questions.DIRECT_SITES, *questions.HEURISTIC_HINT_SITES, *questions.HINT_ATTACHING,
             *questions.HINT_PASS_THROUGH, *(name for _, name in questions.OUTSIDE_SITES),
             questions.INDEX_WIDTH_SITE, *(name for _, name in questions.NON_GUARDING_READS)}
    missing = sorted(n for n in names if f"def {n.split('.')[-1]}(" not in source)
    # sites of some releases only: 2.11's pattern-matcher check_fn (2.13: refresh_arg), its
    # reshape walk (2.13: compare_sizes), and 2.13's loop reordering for fusion (2.11 has none)
    one_release = {"register_replacement.<locals>.check_fn", "refresh_arg", "compare_sizes",
                   "_try_reorder_loops_for_candidates"}
    assert set(missing) <= one_release, missing
    assert len(set(missing)) < len(one_release), "no release has none of them"
