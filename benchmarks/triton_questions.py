"""The shape questions Triton's codegen asks about a kept size, as replayable records.

Builds ``tests/data/triton_questions.json`` (``tests/triton_replay.py`` replays it in CI):

* from a GPU run's widening corpus (``--gpu-json``, default the H200 reference,
  torch 2.11): every refusal that names a lowering answer (site, expression, answer), with
  the torch function that asked it, read off that torch's source (:data:`GPU_ASKS`);
* from the widening corpus run here with Inductor's Triton codegen on the CPU (kernels in
  Triton's interpreter, ``--device triton-cpu``): every question the lowering kept, with how
  its caller reads the answer.

Each record gets the outcome today's rules give it at 1 (replayed, not copied from the
run), so a change to a rule shows up as a changed outcome in the test.  Records of the CPU
runs on other torch releases are kept (replayed again): run it once per release.

    python benchmarks/triton_questions.py            # rewrites tests/data/triton_questions.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

#: how torch 2.11's Inductor asks at each innermost site of the GPU refusals (read in its
#: source: ``V.graph.sizevars.statically_known_*`` goes through ``sizevars.statically_known_true``;
#: ``same_meta`` and ``bmm_to_mm`` call ``symbolic_shapes.statically_known_true`` on SymBools);
#: a site not listed is replayed as a plain static answer, read as given
GPU_ASKS = {name: "statically_known_true" for name in (
    "_get_persistent_RBLOCK", "is_zero_elements", "lookup", "prepare_split_iteration_lengths",
    "_split_iteration_ranges", "significant_strides_equal", "is_contiguous_strides_for_shape", "slice_", "create",
    "statically_true")}
GPU_ASKS.update(same_meta="sym_statically_known_true", bmm_to_mm="sym_statically_known_true",
                check_fn="sym_statically_known_true")
#: sites a GPU run named by their plain name where the rules know them by their qualified
#: one (Python's ``co_qualname``): 2.11's pattern-matcher recheck
QUALIFIED = {"check_fn": "register_replacement.<locals>.check_fn"}
_READING_ASKS = {"true": "statically_known_true", "false": "sym_statically_known_false", "not_false": "guard_or_true"}
_ANSWER = re.compile(r"the lowering's answer (.+) answered (True|False) \(asked in ([^)]*)\)")


def gpu_records(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    source = f"{data.get('device', 'GPU')}, torch {data.get('torch', '?')} ({path.name})"
    out = []
    for program, row in sorted(data["programs"].items()):
        for refusal in row["inductor"]["refusals"]:
            m = _ANSWER.search(refusal)
            if m and "&" not in m.group(1):
                site = tuple(s.strip() for s in m.group(3).split("<-"))
                ask = GPU_ASKS.get(site[0], "static")
                site = (QUALIFIED.get(site[0], site[0]), *site[1:])
                out.append({"source": source, "program": program, "site": site, "expr": m.group(1),
                            "answer": m.group(2), "ask": ask})
    return out


def cpu_records() -> list[dict]:
    """Run the corpus with Triton's codegen on the CPU; every question a lowering kept."""
    import torch

    from verishape.compiler.widen import questions
    from verishape.fuzz.widen_check import run_sweep
    from widen_corpus import CASES

    logs: list = []
    original = questions.recording

    @contextlib.contextmanager
    def recording(env, candidates):
        with original(env, candidates) as log:
            logs.append(log)
            yield log

    questions.recording = recording
    source = f"cpu, Triton codegen, torch {torch.__version__}"
    out = []
    try:
        for case in CASES:
            logs.clear()
            run_sweep(case.fn, case.make, case.sweep, backend="inductor", device="triton-cpu", check_stock=False)
            for log in logs:
                for q in log.questions:
                    record = _record(q, case.name, source)
                    if record is not None:
                        out.append(record)
    finally:
        questions.recording = original
    return out


def _record(q, program: str, source: str) -> dict | None:
    import sympy

    from verishape.compiler.widen.questions import SITES

    if q.extra_ranges or q.axioms or q.computed_in is not None or any(
            not re.fullmatch(r"s\d+", s.name) for s in q.expr.free_symbols):
        return None  # index variables or a layout computation: not replayable on its own
    if any(SITES.get(name, (None, None))[1] is not None for name in q.site):
        return None  # moot by the two sizes its frame held: not replayable without the frame
    if q.site and q.site[0].endswith(" hint"):
        if q.site[0] != "guarding hint" or not isinstance(q.expr, (sympy.Eq, sympy.Le)):
            return None
        return {"source": source, "program": program, "site": q.site, "expr": str(q.expr.lhs), "answer": "True",
                "ask": "guarding_hint"}
    ask = _READING_ASKS.get(q.reading, "static")
    if str(q.answer) not in ("True", "False"):
        return None
    return {"source": source, "program": program, "site": q.site, "expr": str(q.expr), "answer": str(q.answer),
            "ask": ask}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu-json", type=Path, default=ROOT / "benchmarks" / "reference" / "gpu" / "widen_corpus_h200.json")
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "triton_questions.json")
    args = ap.parse_args(argv)
    if not args.gpu_json.is_file():
        print(f"triton_questions: --gpu-json {args.gpu_json} is not a file", file=sys.stderr)
        return 2
    os.environ["TRITON_INTERPRET"] = "1"  # before torch imports Triton (verishape.fuzz.triton_cpu)
    from triton_replay import Record, replay

    import torch

    # the CPU records of other torch releases stay (run this once per release, e.g. 2.11, the
    # GPU machines' torch, then 2.13); this release's are made anew
    kept = [r.to_dict() for r in (Record.load_all(args.out) if args.out.is_file() else [])
            if r.source.startswith("cpu") and not r.source.endswith(f"torch {torch.__version__}")]
    records, seen = [], set()
    for raw in gpu_records(args.gpu_json) + kept + cpu_records():
        key = (tuple(raw["site"][:3]), raw["expr"], raw["answer"], raw["ask"])
        if key in seen:
            continue
        seen.add(key)
        record = Record(**{**raw, "site": tuple(raw["site"]), "outcome": ""})
        records.append(Record(**{**record.to_dict(), "site": record.site, "outcome": replay(record)}))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"about": "shape questions of Triton's codegen about kept sizes; "
                                             "written by benchmarks/triton_questions.py, replayed by "
                                             "tests/test_widen_triton.py",
                                    "records": [r.to_dict() for r in records]}, indent=1) + "\n")
    counts: dict[str, int] = {}
    for r in records:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    print(f"{len(records)} records -> {args.out} ({counts})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
