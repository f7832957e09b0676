"""Running ``verishape verify-guards`` in-process through the CLI, for audit tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verishape.cli.main import main

SCRIPTS = Path(__file__).parent / "scripts"
X0 = "L['x'].size()[0]"


def audit_in_process(capsys: Any, tmp_path: Path, script: str,
                     *assume: str) -> tuple[int, dict | None, str, str]:
    """Audit ``tests/scripts/<script>`` with ``--assume`` facts; returns (exit status, JSON
    report or None, stdout, stderr)."""
    out = tmp_path / "report.json"
    if out.exists():
        out.unlink()
    args = ["verify-guards", str(SCRIPTS / script), "--json", str(out)]
    for a in assume:
        args += ["--assume", a]
    status = main(args)
    captured = capsys.readouterr()
    report = json.loads(out.read_text()) if out.exists() and out.stat().st_size else None
    return status, report, captured.out, captured.err
