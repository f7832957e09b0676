"""Data-dependent corpus: stock torch.compile against verishape.compile, in one run.

For each program of ``tests/dde_corpus.py`` (backend ``aot_eager``, ``fullgraph=True``,
``dynamic=True``, scalar outputs and dynamic-output-shape ops captured) it reports, side
by side: inputs that compiled and matched eager, data-dependent errors, other errors,
the first-call (compile) time, and for verishape the solver's time and decisions by kind.

For each input where ``verishape.compile`` still raises the data-dependent error: whether
the error names a proved ``torch._check`` (``err.verishape_suggestion``), and whether that
check, pasted into the function (``suggest.apply_to_function``), makes the call compile
(``fullgraph=True``) and match eager.  The same for the data-dependent programs of the
export corpus (``tests/export_corpus.py``, modules), compiled instead of exported, where
checks are pasted one after another (up to 4) until the call compiles.

    python benchmarks/dde_corpus.py [--json benchmarks/results/dde_corpus.json]
"""

from __future__ import annotations

import argparse
import collections
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import torch  # noqa: E402

import verishape  # noqa: E402
from compile_helpers import capturing, is_dde  # noqa: E402
from dde_corpus import PROGRAMS  # noqa: E402
from export_corpus import PROGRAMS as EXPORT_PROGRAMS  # noqa: E402
from verishape.compiler.export import suggest  # noqa: E402


def measure(compile_fn, program) -> dict[str, object]:
    torch._dynamo.reset()
    envs: list[object] = []
    cf = compile_fn(program.fn, backend=capturing(envs), fullgraph=True, dynamic=True)
    ok = dde = other = 0
    first_call_s = None
    suggestions = []
    for args in program.inputs:
        start = time.perf_counter()
        try:
            got = cf(*args)
            ok += int(torch.equal(got, program.fn(*args)))
        except Exception as exc:  # noqa: BLE001 - counted, that is the measurement
            if is_dde(exc):
                dde += 1
                if compile_fn is verishape.compile:
                    suggestions.append(pasted(program.fn, args, getattr(exc, "verishape_suggestion", None)))
            else:
                other += 1
        if first_call_s is None:
            first_call_s = time.perf_counter() - start
    logs = [e.verishape_log for e in envs if hasattr(e, "verishape_log")]
    kinds: collections.Counter[str] = collections.Counter()
    for log in logs:
        kinds.update(log.counts())
    return {
        "ok": ok, "dde": dde, "other_errors": other, "first_call_s": first_call_s, "suggestions": suggestions,
        "solver_s": sum(log.solver_time_s for log in logs), "decisions": dict(kinds),
    }


def pasted(fn, args, found) -> dict[str, object]:
    """What the error's check gives, pasted into ``fn``: compiles and matches eager?"""
    if found is None:
        return {"check": None}
    torch._dynamo.reset()
    patched = suggest.apply_to_function(fn, found)
    try:
        got = verishape.compile(patched, backend="aot_eager", fullgraph=True, dynamic=True)(*args)
        return {"check": found.check, "compiles": True, "matches_eager": bool(torch.equal(got, fn(*args)))}
    except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
        return {"check": found.check, "compiles": False, "error": f"{type(exc).__name__}: {str(exc)[:120]}"}


def export_corpus_rows() -> list[dict[str, object]]:
    """The export corpus's modules compiled (``fullgraph=True``): where the first call raises
    the data-dependent error, paste each named check in turn (up to 4) until it compiles."""
    rows = []
    for program in EXPORT_PROGRAMS:
        cls, args, applied, others = program.module, program.inputs[0], [], []
        for _ in range(5):
            torch._dynamo.reset()
            compiled = verishape.compile(cls(), backend="aot_eager", fullgraph=True)
            try:
                got = compiled(*args)
            except Exception as exc:  # noqa: BLE001 - the outcome is the measurement
                found = getattr(exc, "verishape_suggestion", None)
                if not is_dde(exc) or found is None or len(applied) == 4:
                    outcome = "data-dependent error, no check named" if is_dde(exc) and found is None else \
                        f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
                    break
                applied.append(found.check)
                cls = type("Patched", (cls,), {"forward": suggest.apply_to_function(cls.forward, found)})
                continue
            outcome = "compiles, matches eager" if torch.equal(got, program.module()(*args)) else \
                "compiles, differs from eager"
            others = [_same_or_both_raise(compiled, program.module(), a) for a in program.inputs[1:]]
            break
        if applied or outcome != "compiles, matches eager":
            rows.append({"program": program.name, "checks_pasted": applied, "outcome": outcome,
                         "other_inputs": others if outcome.startswith("compiles") else []})
    return rows


def _same_or_both_raise(compiled, eager, args) -> str:
    """One more input through the compiled (checks pasted) and the eager module."""
    try:
        want = eager(*args)
    except Exception:  # noqa: BLE001 - compared, not raised
        want = None
    try:
        got = compiled(*args)
    except Exception:  # noqa: BLE001 - a pasted check may reject an input eager accepts
        return "both raise" if want is None else "rejected (eager accepts)"
    return "eager raises" if want is None else "matches" if torch.equal(got, want) else "differs"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    torch._dynamo.config.capture_scalar_outputs = True
    torch._dynamo.config.capture_dynamic_output_shape_ops = True
    rows = []
    for p in PROGRAMS:
        stock = measure(torch.compile, p)
        vs = measure(verishape.compile, p)
        rows.append({"program": p.name, "facts": p.facts, "provable": p.provable, "inputs": len(p.inputs),
                     "stock": stock, "verishape": vs})
    both_ok = [r for r in rows if r["stock"]["ok"] == r["inputs"] and r["verishape"]["ok"] == r["inputs"]]
    t_stock = sum(r["stock"]["first_call_s"] for r in rows)
    t_vs = sum(r["verishape"]["first_call_s"] for r in rows)
    solver = sum(r["verishape"]["solver_s"] for r in rows)
    summary = {
        "programs": len(rows),
        "inputs": sum(r["inputs"] for r in rows),
        "stock_ok_inputs": sum(r["stock"]["ok"] for r in rows),
        "verishape_ok_inputs": sum(r["verishape"]["ok"] for r in rows),
        "stock_dde_inputs": sum(r["stock"]["dde"] for r in rows),
        "verishape_dde_inputs": sum(r["verishape"]["dde"] for r in rows),
        "dde_avoided_programs": sum(1 for r in rows if r["stock"]["dde"] and not r["verishape"]["dde"]),
        "first_call_s": {"stock": t_stock, "verishape": t_vs},
        "compile_time_ratio_where_both_compile": (
            sum(r["verishape"]["first_call_s"] for r in both_ok) / sum(r["stock"]["first_call_s"] for r in both_ok)
            if both_ok else None),
        "solver_share_of_verishape_first_calls": solver / t_vs if t_vs else None,
        "solver_s": solver,
    }
    named = [x for r in rows for x in r["verishape"]["suggestions"]]
    exported = export_corpus_rows()
    summary["suggestions"] = {
        "dde_corpus": {"verishape_dde_inputs": len(named), "named_a_proved_check": sum(x["check"] is not None
                                                                                       for x in named),
                       "pasted_compiles_and_matches_eager": sum(bool(x.get("matches_eager")) for x in named)},
        "export_corpus_compiled": {
            "programs_with_dde": sum(1 for r in exported if r["checks_pasted"] or "data-dependent" in r["outcome"]),
            "named_a_check": sum(1 for r in exported if r["checks_pasted"]),
            "pasted_until_it_compiles_and_matches_eager": sum(1 for r in exported
                                                              if r["checks_pasted"] and r["outcome"] == "compiles, matches eager"),
        }}
    report = {"benchmark": "dde_corpus", "torch": torch.__version__, "python": platform.python_version(),
              "summary": summary, "programs": rows, "export_corpus_compiled": exported}
    print(f"{'program':26} {'stock ok/dde':>12} {'verishape ok/dde':>17} {'stock s':>8} {'vs s':>7} {'solver s':>8}")
    for r in rows:
        s, v = r["stock"], r["verishape"]
        print(f"{r['program']:26} {s['ok']:>6}/{s['dde']:<5} {v['ok']:>9}/{v['dde']:<7} "
              f"{s['first_call_s']:8.3f} {v['first_call_s']:7.3f} {v['solver_s']:8.3f}")
    for r in exported:
        print(f"export corpus {r['program']:24} pasted {r['checks_pasted']} -> {r['outcome']}; "
              f"other inputs {r['other_inputs']}")
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
