"""``verishape.explain``: what verishape changed in each compiled frame, in plain words.

Per frame: the stock guard list against the installed one, what each dropped guard is
implied by, the guards rewritten as cheaper equivalents, the range checks tightened
(guards folded into them), the runtime asserts discharged, every solver decision with its
time ("from store" when the proof store answered instead of the solver), and the reasons
Dynamo gave for recompiling.
"""

from __future__ import annotations

from typing import Any

import sympy

from verishape.core import sources


def _frame_text(index: int, env: Any) -> list[str]:
    log = env.verishape_log
    lines = [f"frame {index}: {log.summary()}"]
    for expr, where in getattr(log, "vacuous", ()):
        lines.append(f"  refused a vacuous proof (its premises contradict each other), stock decided: "
                     f"{sources.describe(expr, env)}" + (f"  [{where}]" if where else ""))
    for m in log.minimizations:
        verdict = ("installed (equivalence proved)" if m.applied
                   else "not applied (equivalence not proved), stock list installed" if m.dropped
                   else "nothing to drop")
        stored = sum(p.result.from_store for p in (*m.dropped, *([m.equivalence] if m.equivalence else ())))
        lines.append(f"  guards: {len(m.stock)} stock -> {len(m.kept) if m.applied else len(m.stock)} installed, "
                     f"{verdict}; {m.time_s * 1e3:.1f} ms" + (f", {stored} proof(s) from store" if stored else ""))
        for rec in m.dropped:
            implied_by = "; ".join(sources.describe(p, env) for p in rec.obligation.premises)
            lines.append(f"    dropped {sources.describe(rec.obligation.goal, env)}")
            lines.append(f"      implied by: {implied_by}")
        if m.applied:
            for g in m.kept:
                lines.append(f"    kept {sources.describe(g, env)}")
            for old, new in m.rewritten.items():
                lines.append(f"    rewritten {sources.describe(old, env)} as {sources.describe(new, env)} "
                             f"(equivalent under the range checks, proved)")
            for t in m.tightened:
                lines.append(f"    range check of {sources.describe(t.symbol, env)} tightened to "
                             f"{sources.describe(sympy.And(*t.facts()), env)} ({t.proof.result.status}), "
                             f"folding {len(t.folded)} guard(s)")
    for rec in log.records:
        # The goal is the asked expression when it was decided true, its negation otherwise.
        asked = rec.obligation.goal if rec.decided else sympy.Not(rec.obligation.goal)
        where = f"  [{rec.obligation.source.strip()}]" if rec.obligation.source else ""
        lines.append(f"  decided {rec.obligation.kind}: {sources.describe(asked, env)} is {bool(rec.decided)} "
                     f"({_timing(rec.result)}){where}")
    for expr, value, where in log.fallbacks:
        lines.append(f"  unproved fallback: {expr} assumed {value}" + (f"  [{where}]" if where else ""))
    return lines


def _timing(result: Any) -> str:
    """A decision's time and where its answer came from (solver, this process's cache,
    or the proof store written by an earlier run)."""
    source = ", from store" if result.from_store else ", cached" if result.cached else ""
    return f"{result.time_s * 1e3:.1f} ms{source}"


def recompile_reasons(co_name: str, compile_ids: set[str] | None = None) -> list[str]:
    """Dynamo's recompile reasons for frames named ``co_name`` (of those compiles only,
    when ``compile_ids`` names them), oldest first."""
    from verishape.core.torch_seam import recompiles

    return [f"compile {r.compile_id}: recompiled because the guard {r.guard!r} of an earlier compile failed"
            for r in recompiles(co_name) if compile_ids is None or r.compile_id in compile_ids]


def explain_envs(name: str, envs: list[Any], numbers: list[int] | None = None, verb: str = "compiled",
                 code_names: tuple[str, ...] | None = None) -> str:
    """``numbers``: each frame's number, unique across the whole run (a script's frames are
    numbered in compile order, as ``verify-guards`` numbers them); by default 0, 1, ...
    ``verb``: "compiled", or "exported" for the programs of ``torch.export``.  ``code_names``:
    the names Dynamo's recompile reasons carry, where they are not ``name``'s first word (a
    compiled module's frames are Dynamo's wrapper, ``inner``); only the reasons of these
    frames' compiles are listed."""
    if not envs:
        return f"{name}: no frame {verb} with verishape yet (call the compiled function first)"
    lines = [f"{name}: {len(envs)} frame(s) {verb} with verishape"]
    for number, env in zip(numbers if numbers is not None else range(len(envs)), envs):
        lines += _frame_text(number, env)
    from verishape.compiler.frames import compile_id_of

    ids = {compile_id_of(e) for e in envs} - {None}
    names = code_names or (name.split(" ")[0],)
    reasons = [r for n in names for r in recompile_reasons(n, ids or None)]
    lines += ["recompiles:"] + [f"  {r}" for r in reasons] if reasons else ["recompiles: none"]
    return "\n".join(lines)


def explain_script(script: str, script_args: list[str]) -> tuple[str, int, str | None]:
    """Run ``script`` with every compiled frame using VeriShapeEnv; explain each.

    Returns (explanation, exit status, why the script stopped or None): 0 when the script
    ran to its end, 1 when a compile error stopped it (what compiled before is still
    explained).  A script that raises on its own is a UsageError (exit 2), as in the audit.
    Frames of one function are grouped; every frame keeps its run-wide number."""
    from pathlib import Path

    from .audit.capture import run_script

    run = run_script(Path(script), script_args, lambda _m: None)
    groups: dict[Any, list[Any]] = {}
    for f in run.frames:
        groups.setdefault((f.kind, f.code), []).append(f)
    parts = [explain_envs(f"{fs[0].name} ({fs[0].location})", [f.env for f in fs], [f.index for f in fs],
                          verb="exported" if kind == "export" else "compiled")
             for (kind, _code), fs in groups.items()]
    if run.script_error:
        stopped = f"the script stopped on a compile error: {run.script_error}"
        return "\n\n".join([*parts, stopped]), 1, stopped
    return "\n\n".join(parts), 0, None


def explain_export(ep: Any) -> str:
    """The decisions of ``ep``'s export (``ep`` from ``verishape.export`` in this process)."""
    from verishape.compiler.export.program import export_env

    env = export_env(ep)
    if env is None:
        return "exported program: its export traced no symbolic shapes (nothing to decide)"
    from verishape.compiler.export.program import export_program_checks

    name = (env.co_fields or {}).get("co_name", "forward")
    checks = [f"  program checks: {c.origin} {c.fact} ({c.why})" for c in export_program_checks(ep)]
    return "\n".join([f"exported program ({name}): exported with verishape", *_frame_text(0, env), *checks])


def explain(compiled_fn: Any) -> str:
    """Explain a function or module returned by ``verishape.compile`` (after it ran), an
    ExportedProgram returned by ``verishape.export`` (its decisions and the checks added to
    its graph), or a data-dependent error ``verishape.compile`` or ``verishape.export``
    raised (the proved ``torch._check`` that settles it, also structured as the error's
    ``verishape_suggestion``)."""
    import torch
    from torch.export import ExportedProgram

    from verishape.compiler.frames import envs_for, envs_for_callable

    if isinstance(compiled_fn, ExportedProgram):
        return explain_export(compiled_fn)
    if isinstance(compiled_fn, BaseException):
        from verishape.compiler.export import compile_dde

        # an error of torch.compile(backend="verishape") or under verishape.enable() has not
        # been looked at yet (no wrapper of verishape.compile saw it leave): look now
        compile_dde.attach(compiled_fn)
        found = getattr(compiled_fn, "verishape_suggestion", None)
        if found is not None:
            return found.text()
        if hasattr(compiled_fn, "verishape_suggestion"):
            return "verishape: no torch._check was proved to settle this error (stock's message stands)"
        return "verishape: this error did not come from verishape.compile or verishape.export (nothing to explain)"

    module = getattr(compiled_fn, "_orig_mod", None)
    if isinstance(module, torch.nn.Module):
        # a compiled module runs through Dynamo's shared wrapper frame, which calls the module
        forward = getattr(type(module).forward, "__code__", None)
        envs = envs_for_callable(module) + (envs_for(forward) if forward is not None else [])
        return explain_envs(f"{type(module).__name__}.forward", envs, code_names=("forward", "inner"))
    original = getattr(compiled_fn, "_torchdynamo_orig_callable", compiled_fn)
    original = getattr(original, "forward", original)
    code = getattr(original, "__code__", None)
    if code is None:
        raise TypeError(f"verishape.explain: expected a compiled function or module, got {type(compiled_fn).__name__}")
    return explain_envs(code.co_name, envs_for(code))
