"""Frameworks nobody here wrote, stock against verishape with the same framework setting:
the wall time of the whole framework call (compiles included) and what it produced.

* ``trainer``: Hugging Face ``Trainer``, 2 steps of a tiny GPT-2 with ``torch_compile=True``
  (verishape through ``verishape.enable()``: accelerate refuses the backend's name);
* ``generate``: ``model.forward`` compiled, ``generate()`` with the static cache for a
  batch-2 and then a batch-1 request (prefill, then decode at sequence length 1);
* ``lightning``: Lightning's ``Trainer.fit`` of ``torch.compile(model)`` /
  ``verishape.compile(model)``, 2 epochs with batches 4, 4, 2.

Each (framework, variant) runs in a fresh process (this script with ``--child``), torch's
compile caches off, the variants taking turns for ``--rounds`` rounds; medians and the
verishape / stock ratio, JSON output.  Between processes this machine scatters 15-25%.

    python benchmarks/frameworks.py --rounds 2 --json benchmarks/results/frameworks.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]  # the programs the tests run (tests/framework_programs.py)
FRAMEWORKS = ("trainer", "generate", "lightning")


def child(fw: str, variant: str) -> dict[str, Any]:
    """One (framework, variant) run, in this process: wall time of the framework call."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch

    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    torch.manual_seed(0)
    return {"trainer": _trainer, "generate": _generate, "lightning": _lightning}[fw](variant)


def _trainer(variant: str) -> dict[str, Any]:
    import contextlib

    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

    import verishape
    from framework_programs import VOCAB, Tokens

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=VOCAB, n_positions=16))
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(output_dir=out, max_steps=2, per_device_train_batch_size=2, report_to=[],
                                 use_cpu=True, save_strategy="no", dataloader_num_workers=0, seed=0,
                                 torch_compile=True, disable_tqdm=True)
        trainer = Trainer(model=model, args=args, train_dataset=Tokens())
        start = time.perf_counter()
        with verishape.enable() if variant == "verishape" else contextlib.nullcontext():
            loss = trainer.train().training_loss
    return {"wall_s": time.perf_counter() - start, "loss": float(loss)}


def _generate(variant: str) -> dict[str, Any]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    import verishape
    from framework_programs import VOCAB

    cfg = GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=VOCAB, n_positions=32, bos_token_id=0,
                     eos_token_id=0, pad_token_id=0)
    model = GPT2LMHeadModel(cfg).eval()
    model.forward = (verishape.compile if variant == "verishape" else torch.compile)(model.forward)
    start = time.perf_counter()
    tokens = []
    with torch.no_grad():
        for batch in (2, 1):
            ids = torch.randint(1, VOCAB, (batch, 5), generator=torch.Generator().manual_seed(batch))
            out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=3, do_sample=False,
                                 cache_implementation="static")
            tokens.append(out.tolist())
    return {"wall_s": time.perf_counter() - start, "tokens": tokens}


def _lightning(variant: str) -> dict[str, Any]:
    import torch

    import verishape
    from framework_programs import lightning_regression

    model, loader, trainer = lightning_regression()
    compiled = (verishape.compile if variant == "verishape" else torch.compile)(model)
    start = time.perf_counter()
    trainer.fit(compiled, loader)
    weights = torch.cat([q.detach().flatten() for q in model.parameters()])
    return {"wall_s": time.perf_counter() - start, "weights_sum": float(weights.sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "frameworks.json")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child)))
        return 0
    chosen = [f for f in args.frameworks.split(",") if f]
    if unknown := [f for f in chosen if f not in FRAMEWORKS]:
        ap.error(f"--frameworks: unknown {unknown}; choose among {', '.join(FRAMEWORKS)}")
    if args.rounds < 1:
        ap.error(f"--rounds: got {args.rounds}; use 1 or more")
    rows = {}
    for fw in chosen:
        runs: dict[str, list[dict[str, Any]]] = {"stock": [], "verishape": []}
        for r in range(args.rounds):
            for variant in (("stock", "verishape") if r % 2 == 0 else ("verishape", "stock")):
                proc = subprocess.run([sys.executable, __file__, "--child", fw, variant], capture_output=True,
                                      text=True, cwd=ROOT)
                if proc.returncode != 0:
                    print(f"frameworks: {fw} {variant} failed: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                    return 1
                runs[variant].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        med = {v: statistics.median(x["wall_s"] for x in rs) for v, rs in runs.items()}
        results = {v: [{k: x for k, x in run.items() if k != "wall_s"} for run in rs] for v, rs in runs.items()}
        same = results["stock"][0] == results["verishape"][0]
        rows[fw] = {"runs": runs, "median_wall_s": med, "ratio": med["verishape"] / med["stock"],
                    "same_result": same}
        print(f"{fw:10} stock {med['stock']:.1f} s, verishape {med['verishape']:.1f} s, ratio {rows[fw]['ratio']:.2f} "
              f"({[round(x['wall_s'], 1) for x in runs['stock']]} vs {[round(x['wall_s'], 1) for x in runs['verishape']]}); "
              f"same result: {same}",
              flush=True)
    import torch

    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"benchmark": "frameworks", "torch": torch.__version__, "rounds": args.rounds,
                                     "frameworks": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
