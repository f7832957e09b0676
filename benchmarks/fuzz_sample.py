"""Draw the hand-check sample of a fuzz-meta report, and score a finished hand-check.

The precision figure in benchmarks/FUZZ.md comes from checking a random sample of the
reported meta bugs by hand (static sizes, torch.compile, torch.export, the meta source),
as an op author would.  This script makes the sample reproducible and does the arithmetic:

    # the sample: N findings blamed on the meta (seeded), one line each, with their evidence
    python benchmarks/fuzz_sample.py REPORT.json --n 24 --seed 22
    # the score: a JSON list of {"op", "variant", "mode", "kind", "verdict": "real"|"not_real",
    # "visible": true|false (a torch.compile/torch.export user sees it), "reason"}
    python benchmarks/fuzz_sample.py REPORT.json --n 24 --seed 22 --verdicts HANDCHECK.json --markdown OUT.md

A verdict file must cover exactly the drawn sample (the script refuses otherwise), so a
figure cannot be computed from a hand-picked subset.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from typing import Any


def _key(f: dict[str, Any]) -> tuple[str, str, str, str]:
    return (f["op"], f.get("variant", ""), f["mode"], f["kind"])


def sample(report: dict[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` findings blamed on the meta, drawn with ``seed`` from the report's order."""
    bugs = [f for f in report["findings"] if (f.get("blame") or ("documented" if f.get("documented") else "meta"))
            == "meta"]
    return sorted(random.Random(seed).sample(bugs, min(n, len(bugs))), key=_key)


def score(drawn: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> dict[str, Any]:
    by_key = {_key(v): v for v in verdicts}
    missing = [k for k in map(_key, drawn) if k not in by_key]
    extra = sorted(set(by_key) - set(map(_key, drawn)))
    if missing or extra:
        raise SystemExit(f"fuzz_sample: the verdicts must cover the drawn sample exactly; missing {missing}, "
                         f"not drawn {extra}")
    real = sum(by_key[_key(f)]["verdict"] == "real" for f in drawn)
    # the stricter reading: a user of torch.compile / torch.export sees the difference (a silent
    # result, NaN, other strides, a failing export), not only meta-device shape inference
    visible = sum(bool(by_key[_key(f)].get("visible")) for f in drawn)
    n = len(drawn)
    return {"sampled": n, "real": real, "precision": round(real / n, 3) if n else None,
            "user_visible": visible, "user_visible_share": round(visible / n, 3) if n else None}


def markdown(drawn: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> str:
    by_key = {_key(v): v for v in verdicts}
    rows = ["| op | mode | kind | verdict | user-visible | reason |", "|---|---|---|---|---|---|"]
    for f in drawn:
        v = by_key[_key(f)]
        full = f"{f['op']}.{f['variant']}" if f.get("variant") else f["op"]
        seen = "yes" if v.get("visible") else "no"
        reason = v["reason"] + (f" *Regraded:* {v['note']}" if v.get("note") else "")
        rows.append(f"| `{full}` | {f['mode']} | `{f['kind']}` | {v['verdict']} | {seen} | {reason} |")
    return "\n".join(rows) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report")
    p.add_argument("--n", type=int, default=24)
    p.add_argument("--seed", type=int, default=22)
    p.add_argument("--verdicts", help="JSON list of hand-check verdicts for the drawn sample")
    p.add_argument("--markdown", help="write the verdict table here")
    args = p.parse_args()
    try:
        with open(args.report) as fh:
            report = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        print(f"fuzz_sample: cannot read {args.report}: {exc}", file=sys.stderr)
        return 2
    drawn = sample(report, args.n, args.seed)
    if not args.verdicts:
        for f in drawn:
            full = f"{f['op']}.{f['variant']}" if f.get("variant") else f["op"]
            print(f"{full} | {f['mode']} | {f['kind']} | {f['message'][:160]}")
            for e in f.get("evidence", []):
                print(f"    evidence: {e}")
        return 0
    with open(args.verdicts) as fh:
        verdicts = json.load(fh)
    result = score(drawn, verdicts)
    print(json.dumps(result))
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(markdown(drawn, verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
