"""The widening gate: everything widening promises, run at once and compared with a reference.

Widening serves a call from a kept compile five ways (size 1, an input's layout, generic
recompiles, the candidate at 1, a record read after a restart), and a change to one of them
can cost another without any single benchmark noticing: a wave-5 change lost the decode step
on every decoder family tried while every benchmark kept passing (issue 48).  This gate runs
each promise and fails on any drop against ``benchmarks/reference/widen_gate.json``:

* ``sweeps``: tiny Hugging Face models through ``benchmarks/widen_models.py`` (a fresh
  process each, Inductor, automatic dynamic, torch's caches off, every output compared with
  eager): eight decoder families on the batch sweep (2, 3, 1, 4, 1, 5) and the decode sweep
  (a causal LM at batch 2, lengths 12, 17, 1, 20, 1, with an attention mask), three encoders
  on the batch and sequence sweeps.  Per row: compiles, whether size 1 reused, wrong.
* ``serve``: ``benchmarks/serve_loop.py``'s served loop (``generate()`` over its request
  mix, ``verishape.compile``) on four families (Gemma 2's sliding-window layers among them,
  at its own window) with the dynamic and the static cache, and one
  more mix of requests on each; three families run nowhere else in the gate (Mistral, GPT-NeoX,
  Phi-3) on a third mix nothing was tuned on: Inductor compiles, recompile-limit hits, tokens
  equal to eager's.
  And Hugging Face's own compile of the static cache's decode step under ``verishape.enable()``
  (``--variants hf-enable``, LLaMA, the ``/hf`` row): the candidate at 1, reused at 1 and at a
  later batch (2 compiles where stock makes 3).
* ``corpus``: the adversarial corpus (``tests/widen_corpus.py``) with Inductor: programs
  reused, and wrong calls (a reuse that differs from eager where stock does not).
* ``fuzz``: the widening fuzzer (``benchmarks/widen_fuzz.py``, seed 0, 60 programs, Inductor):
  programs reused, wrong calls; and the same programs with size 1 right after the first size
  (``--one-early``, the ``fuzz/one_early`` row: a candidate at 1, proved at later sizes).

A drop: a row that ran and now does not, a reuse lost, a compile more, a recompile-limit hit
more, tokens no longer equal, a corpus or fuzz program that reused and now does not; any wrong
call fails whatever the reference says.  Gains are listed (``--update`` makes them the
reference).  Exit 0: no drop; 1: a drop; 2: bad arguments.

    python benchmarks/widen_gate.py                     # all parts, about 12 minutes on 2 cores
    python benchmarks/widen_gate.py --fast              # CI's subset: the decode sweep on two families
    python benchmarks/widen_gate.py --parts sweeps,serve --update
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

REFERENCE = ROOT / "benchmarks" / "reference" / "widen_gate.json"
PARTS = ("sweeps", "serve", "corpus", "fuzz")
DECODERS = ("gpt2", "llama", "mistral", "qwen2", "phi3", "gpt_neox", "gemma", "opt")
ENCODERS = ("bert", "distilbert", "roberta")
#: (family, sweep) of every sweep row
SWEEP_ROWS = tuple([(f, s) for f in DECODERS for s in ("batch", "decode")]
                   + [(f, s) for f in ENCODERS for s in ("batch", "seq")])
#: CI's subset: the sweep that broke in wave 5, on two families
FAST_ROWS = (("phi3", "decode"), ("llama", "decode"))
SERVE_FAMILIES = ("llama", "gpt2", "qwen2", "gemma2")
#: serve_loop's own mix, and one of ours (batches 1 to 4, a batch-1 request first)
SERVE_MIXES = {"issue38": None, "ours": "1x9,3x6,1x14,4x5,2x11,1x7"}
#: families the gate's other rows never run, on a mix nothing was tuned on (its own rows)
HELDOUT_FAMILIES = ("mistral", "gpt_neox", "phi3")
HELDOUT_MIX = ("untuned", "3x8,1x5,2x12,1x10,4x6,2x9")
#: Hugging Face's own decode compile under verishape.enable() (the candidate's path), static cache
HF_FAMILIES = ("llama",)
FUZZ_PROGRAMS = 60
#: the largest difference from eager that still counts as equal (float32 logits of tiny models)
TOLERANCE = 1e-3


# ------------------------------------------------------------------ the parts: each returns {key: metrics}


def sweeps(rows: tuple[tuple[str, str], ...], jobs: int) -> dict[str, dict[str, Any]]:
    """Each (family, sweep) in a fresh process, ``jobs`` at a time."""
    import widen_models  # (a module by its own name: the spawned workers import it again)

    out: dict[str, dict[str, Any]] = {}
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = {pool.submit(widen_models.run, f, s): (f, s) for f, s in rows}
        for fut in cf.as_completed(futures):
            f, s = futures[fut]
            try:
                r = fut.result()
            except Exception as exc:  # noqa: BLE001 - a crashed child is a row that did not run
                r = {"status": f"crashed: {exc!r}"}
            ran = r.get("status") == "ran"
            out[f"sweep/{f}/{s}"] = {
                "ran": ran, "compiles": r.get("compiles"), "reused_at_1": bool(r.get("reused_at_1")),
                "wrong": ran and not (r.get("max_abs_diff", 0.0) <= TOLERANCE),
                "why": (r.get("refusals") or [r.get("error") or r.get("status")])[0] if not r.get("reused_at_1") else None,
                "seconds": round(r.get("seconds", 0.0), 1)}
            _say(f"sweep/{f}/{s}", out[f"sweep/{f}/{s}"])
    return out


def _serve_one(cache: str, mix_name: str, families: tuple[str, ...], variant: str = "verishape"
               ) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="widen-gate-") as tmp:
        path = Path(tmp) / "serve.json"
        mix = dict([*SERVE_MIXES.items(), HELDOUT_MIX])[mix_name]
        proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "serve_loop.py"), "--families",
                               ",".join(families), "--caches", cache, "--variants", variant, "--json", str(path),
                               "--kernel-cache", "shared",  # counts, not seconds
                               *(["--mix", mix] if mix else [])], capture_output=True, text=True, cwd=ROOT)
        if not path.exists():
            return [{"family": f, "cache": cache, "mix": mix_name, "variant": variant, "error": proc.stderr.strip()[-300:]}
                    for f in families]
        rows = json.loads(path.read_text())["rows"]
    for r in rows:
        r["mix"] = mix_name
    return rows


def serve(jobs: int) -> dict[str, dict[str, Any]]:
    """The served loop per (cache, mix), ``jobs`` of them at a time."""
    out: dict[str, dict[str, Any]] = {}
    todo = [(c, m, SERVE_FAMILIES, "verishape") for m in SERVE_MIXES for c in ("dynamic", "static")]
    todo += [(c, HELDOUT_MIX[0], HELDOUT_FAMILIES, "verishape") for c in ("dynamic", "static")]
    todo.append(("static", "issue38", HF_FAMILIES, "hf-enable"))
    with cf.ThreadPoolExecutor(max_workers=jobs) as pool:
        for rows in pool.map(lambda job: _serve_one(*job), todo):
            for r in rows:
                key = f"serve/{r['family']}/{r['cache']}/{r['mix']}" + ("/hf" if r.get("variant") == "hf-enable" else "")
                ok = "error" not in r
                out[key] = {"ran": ok, "compiles": r.get("inductor_compiles"),
                            "limit_hits": r.get("recompile_limit_hits"), "reused": r.get("reused"),
                            "tokens_equal": bool(r.get("tokens_equal")), "wrong": ok and not r.get("tokens_equal"),
                            "why": (r.get("refusals") or [None])[0] if ok else str(r.get("error"))[-200:],
                            "seconds": round(r.get("wall_s", 0.0), 1)}
                _say(key, out[key])
    return out


def _program_part(name: str, argv: list[str]) -> dict[str, dict[str, Any]]:
    """Run a corpus or fuzz benchmark, read its JSON: per backend, reused and wrong
    (``name``: the rows' prefix, ``fuzz`` or ``fuzz/one_early``)."""
    with tempfile.TemporaryDirectory(prefix="widen-gate-") as tmp:
        path = Path(tmp) / "part.json"
        proc = subprocess.run([sys.executable, *argv, "--json", str(path)], capture_output=True, text=True, cwd=ROOT)
        if not path.exists():
            return {f"{name}/inductor": {"ran": False, "why": proc.stderr.strip()[-300:]}}
        data = json.loads(path.read_text())
    out = {}
    for backend, s in data["summary"].items():
        reused = sorted(_reused_programs(data, backend))
        out[f"{name}/{backend}"] = {"ran": True, "reused": s["reused"], "wrong": len(s["wrong"]),
                                    "reused_programs": reused}
        _say(f"{name}/{backend}", out[f"{name}/{backend}"])
    return out


def _reused_programs(data: dict[str, Any], backend: str) -> list[str]:
    """Names (corpus: a dict by name) or indices (fuzz: a list) of the programs that reused
    a kept compile at least once on ``backend``."""
    programs = data.get("programs", {})
    items = programs.items() if isinstance(programs, dict) else enumerate(programs)
    return [str(name) for name, p in items if isinstance(p.get(backend), dict) and p[backend].get("reuses")]


def corpus() -> dict[str, dict[str, Any]]:
    return _program_part("corpus", [str(ROOT / "benchmarks" / "widen_corpus.py"), "--backend", "inductor"])


def fuzz(jobs: int) -> dict[str, dict[str, Any]]:
    argv = [str(ROOT / "benchmarks" / "widen_fuzz.py"), "--programs", str(FUZZ_PROGRAMS), "--seed", "0",
            "--max-ops", "7", "--backend", "inductor", "--jobs", str(jobs)]
    return {**_program_part("fuzz", argv), **_program_part("fuzz/one_early", [*argv, "--one-early"])}


# ------------------------------------------------------------------ comparing with the reference


def compare(now: dict[str, dict[str, Any]], ref: dict[str, dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(drops, gains) of ``now`` against ``ref``, over the keys ``now`` was asked to run
    (every key of ``ref`` under the parts run).  A wrong call is a drop whatever the reference."""
    drops, gains = [], []
    for key, m in sorted(now.items()):
        if m.get("wrong"):
            drops.append(f"{key}: wrong ({m['wrong']} call(s) differ from eager)" if not isinstance(m["wrong"], bool)
                         else f"{key}: differs from eager")
        r = ref.get(key)
        if r is None:
            gains.append(f"{key}: new row")
            continue
        if r.get("ran") and not m.get("ran"):
            drops.append(f"{key}: ran in the reference, now not: {m.get('why')}")
            continue
        for field, worse in (("compiles", "more"), ("limit_hits", "more")):
            a, b = r.get(field), m.get(field)
            if isinstance(a, int) and isinstance(b, int) and b != a:
                (drops if b > a else gains).append(f"{key}: {field} {a} -> {b}"
                                                   + (f" ({m.get('why')})" if b > a and m.get("why") else ""))
        for field in ("reused_at_1", "tokens_equal"):
            if field in r and r[field] != m.get(field):
                (drops if r[field] else gains).append(f"{key}: {field} {r[field]} -> {m.get(field)}"
                                                      + (f" ({m.get('why')})" if r[field] and m.get("why") else ""))
        lost = sorted(set(r.get("reused_programs", ())) - set(m.get("reused_programs", ())))
        won = sorted(set(m.get("reused_programs", ())) - set(r.get("reused_programs", ())))
        if lost:
            drops.append(f"{key}: {len(lost)} program(s) no longer reuse: {', '.join(lost[:6])}")
        if won:
            gains.append(f"{key}: {len(won)} program(s) reuse now: {', '.join(won[:6])}")
    return drops, gains


def _say(key: str, m: dict[str, Any]) -> None:
    shown = {k: v for k, v in m.items() if k not in ("reused_programs", "why")}
    print(f"  {key:34s} {json.dumps(shown)}" + (f"  [{str(m['why'])[:160]}]" if m.get("why") else ""), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--fast", action="store_true", help="CI's subset: the decode sweep on phi3 and llama")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--reference", type=Path, default=REFERENCE)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "widen_gate.json")
    ap.add_argument("--update", action="store_true", help="write this run's figures into the reference "
                    "(the parts run replace theirs; the rest is kept)")
    args = ap.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    if args.fast:
        parts = ["sweeps"]
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts or args.jobs < 1:
        print(f"widen_gate: --parts {args.parts!r}: unknown {bad} (parts: {', '.join(PARTS)}), or --jobs "
              f"{args.jobs} below 1", file=sys.stderr)
        return 2
    if not args.update and not args.reference.exists():
        print(f"widen_gate: no reference at {args.reference}; run with --update to make one", file=sys.stderr)
        return 2
    import torch

    start = time.perf_counter()
    now: dict[str, dict[str, Any]] = {}
    timing: dict[str, float] = {}
    for part in parts:
        t0 = time.perf_counter()
        print(f"{part}:", flush=True)
        if part == "sweeps":
            now.update(sweeps(FAST_ROWS if args.fast else SWEEP_ROWS, args.jobs))
        elif part == "serve":
            now.update(serve(args.jobs))
        elif part == "corpus":
            now.update(corpus())
        else:
            now.update(fuzz(args.jobs))
        timing[part] = round(time.perf_counter() - t0, 1)
    ref_doc = json.loads(args.reference.read_text()) if args.reference.exists() else {"rows": {}}
    ref = ref_doc["rows"]
    drops, gains = compare(now, ref)
    expected = {k for k in ref if k.split("/")[0] in {"sweep" if p == "sweeps" else p for p in parts}}
    if args.fast:
        expected = {f"sweep/{f}/{s}" for f, s in FAST_ROWS} & set(ref)
    drops += [f"{k}: in the reference, not run" for k in sorted(expected - now.keys())]
    doc = {"torch": torch.__version__, "parts": parts, "fast": args.fast, "seconds": timing,
           "wall_s": round(time.perf_counter() - start, 1), "drops": drops, "gains": gains, "rows": now}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=1, sort_keys=True))
    print(f"\nwidening gate (torch {torch.__version__}, {doc['wall_s']:.0f} s: "
          + ", ".join(f"{p} {s:.0f} s" for p, s in timing.items()) + ")")
    for g in gains:
        print(f"  gain: {g}")
    for d in drops:
        print(f"  DROP: {d}")
    if args.update:
        merged = {k: v for k, v in ref.items() if k not in now and k.split("/")[0] not in
                  {"sweep" if p == "sweeps" else p for p in parts}} if not args.fast else dict(ref)
        merged.update(now)
        args.reference.parent.mkdir(parents=True, exist_ok=True)
        args.reference.write_text(json.dumps({"torch": torch.__version__, "rows": merged}, indent=1, sort_keys=True))
        print(f"reference written: {args.reference} ({len(merged)} rows)")
        return 0
    print("gate: " + ("FAILED" if drops else "passed") + f" ({len(now)} rows, {len(drops)} drop(s), {len(gains)} gain(s))")
    return 1 if drops else 0


if __name__ == "__main__":
    sys.exit(main())
