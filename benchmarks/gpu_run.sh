#!/usr/bin/env bash
# Every GPU check of verishape in one run, for a CUDA machine with no network (issues 31, 37):
#
#   benchmarks/gpu_run.sh [OUT_DIR] [SECONDS]
#
# 1. correctness with Triton kernels, side by side: the `gpu` tests (tests/test_gpu.py), the
#    adversarial widening corpus swept to size 1 (three shards) and the widening fuzzer
#    (60 programs); no timing;
# 2. breadth: widen_models.py --device cuda, the batch and sequence sweeps of the tiny
#    families (rows are written as they finish; what the time share leaves out is missing);
# 3. scale and the cost of the generic kernels at 1: gpu_scale.py --sweep both (batch 8, 9, 1,
#    then length 129 and 1 at batch 8: batch 1 and a decode-sized step) on GPT-2 124M, on GPT-2
#    under mode="reduce-overhead" (CUDA graphs) and on the 1B LLaMA config: compiles, reuse at
#    1, step and kernel time of the reused artifact at 1 against stock's compile for it
#    (`at_one` in each JSON, with the steps that pay a slower step back);
# 4. (not in the default run) gpu_divisibility.py and real_models.py --device cuda;
# 5. (not in the default run: GPU_RUN_STEPS=5 benchmarks/gpu_run.sh OUT 300) issue 38's served
#    decoder loop on CUDA: serve_loop.py, the ~1B LLaMA widths with 4 layers, CUDA graphs
#    (mode="reduce-overhead"), requests 2x7, 1x11, 3x5, dynamic and static caches, stock and
#    verishape side by side: compiles, limit hits, reuses, tokens per second, tokens equal;
#    and generic_recompile_cost.py: the step time of a generic recompile's artifact (every
#    input size a symbol) against stock's second compile, Triton kernels.
# Each step gets a share of SECONDS (default 480: about 8 minutes, so a rerun fits in a
# session's 15 minutes of device time) and is stopped at it; what it wrote stays.
# Results land in OUT_DIR (default benchmarks/results/gpu): gpu.log and one JSON per step.
# Set-up: wheels in .whl/ (z3-solver, expecttest, for a machine that lacks them) go to
# /tmp/site; verishape is installed editable without dependencies or network.
# GPU_RUN_STEPS=1,3 runs only those steps (default: 1,2,3).
# GPU_RUN_DEVICE=cpu is a dry run of this script's plumbing on a machine without CUDA.
set -u
cd "$(dirname "$0")/.."
OUT_DIR=${1:-benchmarks/results/gpu}
BUDGET=${2:-480}
DEVICE=${GPU_RUN_DEVICE:-cuda}
STEPS=,${GPU_RUN_STEPS:-1,2,3},
step() { [[ $STEPS == *,$1,* ]]; }
mkdir -p "$OUT_DIR"
LOG=$OUT_DIR/gpu.log
TMP=$(mktemp -d)
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_FX_GRAPH_CACHE=0 TORCHINDUCTOR_AUTOGRAD_CACHE=0
START=$SECONDS
left() { echo $((BUDGET - (SECONDS - START))); }
share() { local want=$1 l; l=$(left); ((l < want)) && want=$l; ((want < 1)) && want=1; echo "$want"; }
say() { echo "== $* (t=$((SECONDS - START))s)" | tee -a "$LOG"; }

if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu_run: installing .whl/ failed" >&2; exit 2; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . >"$TMP/install.log" 2>&1 \
  || { tail -3 "$TMP/install.log" >&2; echo "gpu_run: installing verishape failed" >&2; exit 2; }
DEVICE=$DEVICE python3 - <<'EOF' 2>&1 | tee -a "$LOG" || exit 2
import os, sys, torch, triton, z3, verishape
if os.environ["DEVICE"] == "cuda" and not torch.cuda.is_available():
    sys.exit("gpu_run: torch sees no CUDA device")
print(f"torch {torch.__version__}, triton {triton.__version__}, z3 {z3.get_version_string()}, "
      f"verishape {verishape.__version__}, Python {sys.version.split()[0]}, "
      f"{torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA'}")
EOF

if step 1; then
say "1. gpu tests, the widening corpus and the fuzzer with Triton kernels (side by side)"
T=$(share 100)
(export TORCHINDUCTOR_COMPILE_THREADS=2
 timeout "$T" python3 -m pytest tests/test_gpu.py -m gpu -n 3 -q -p no:cacheprovider >"$TMP/tests.log" 2>&1
 echo "pytest exit $?" >>"$TMP/tests.log") &
for i in 0 1 2; do
  (TORCHINDUCTOR_COMPILE_THREADS=2 timeout "$T" python3 benchmarks/widen_corpus.py --backend inductor --device "$DEVICE" \
     --shard "$i/3" --json "$TMP/corpus_$i.json" >"$TMP/corpus_$i.log" 2>&1; echo "corpus shard $i exit $?" >>"$TMP/corpus_$i.log") &
done
(TORCHINDUCTOR_COMPILE_THREADS=2 timeout "$T" python3 benchmarks/widen_fuzz.py --programs 60 --seed 0 --max-ops 7 --jobs 3 \
   --backend inductor --device "$DEVICE" --json "$OUT_DIR/widen_fuzz_cuda.json" >"$TMP/fuzz.log" 2>&1
 echo "fuzz exit $?" >>"$TMP/fuzz.log") &
wait
cat "$TMP/tests.log" "$TMP"/corpus_*.log "$TMP/fuzz.log" >>"$LOG"
python3 - "$TMP" "$OUT_DIR/widen_corpus_cuda.json" <<'EOF' 2>&1 | tee -a "$LOG"
import glob, json, sys
parts = [json.load(open(p)) for p in sorted(glob.glob(sys.argv[1] + "/corpus_*.json"))]
if not parts:
    sys.exit("no corpus shard finished")
programs = {k: v for p in parts for k, v in p["programs"].items()}
s = [p["summary"]["inductor"] for p in parts]
merged = {"torch": parts[0]["torch"], "device": parts[0]["device"], "shards_finished": len(parts),
          "summary": {"programs": sum(x["programs"] for x in s), "reused": sum(x["reused"] for x in s),
                      "wrong": [w for x in s for w in x["wrong"]],
                      "other_differences": [w for x in s for w in x["other_differences"]]},
          "programs": programs}
json.dump(merged, open(sys.argv[2], "w"), indent=1)
print("corpus on CUDA:", json.dumps(merged["summary"]), f"({len(parts)}/3 shards)")
EOF
grep -E "^inductor:|wrong" "$TMP/fuzz.log" | head -3 | tee -a "$LOG"
fi

if step 2; then
say "2. widen_models on CUDA (batch and sequence sweeps, rows as they finish)"
timeout "$(share 100)" python3 benchmarks/widen_models.py --device "$DEVICE" --jobs 8 \
  --json "$OUT_DIR/widen_models_cuda.json" >"$TMP/models.log" 2>&1
tail -12 "$TMP/models.log" | tee -a "$LOG"
fi

if step 3; then
say "3. gpu_scale: GPT-2 124M and the 1B LLaMA config, batch 1 and a decode-sized step, and GPT-2 under CUDA graphs"
for run in "gpt2 default 110" "gpt2 reduce-overhead 100" "llama1b default 130"; do
  set -- $run
  timeout "$(share "$3")" python3 benchmarks/gpu_scale.py --model "$1" --sweep both --mode "$2" --batch 8 --seq 128 \
    --device "$DEVICE" $([[ $DEVICE == cpu ]] && echo --layers 1) --json "$OUT_DIR/gpu_scale_$1_$2.json" \
    2>&1 | grep -E "^at 1:|gpu_scale:" | sed "s/^/$1 $2: /" | tee -a "$LOG"
done
fi

if step 4; then
say "4. gpu_divisibility and real_models on CUDA"
timeout "$(share 80)" python3 benchmarks/gpu_divisibility.py --device "$DEVICE" --json "$OUT_DIR/gpu_divisibility.json" 2>&1 | tee -a "$LOG"
timeout "$(share 240)" python3 benchmarks/real_models.py --models gpt2,llama --backend inductor --sweeps batch \
  --interleave 1 --device "$DEVICE" --json "$TMP/real_models_cuda.json" 2>&1 | tee -a "$LOG"
cp "$TMP/real_models_cuda.json" "$OUT_DIR/" 2>/dev/null
fi
if step 5; then
say "5. serve_loop on CUDA: ~1B LLaMA widths (4 layers), reduce-overhead, dynamic and static caches"
timeout "$(share 280)" python3 benchmarks/serve_loop.py --families llama --caches dynamic,static --mix 2x7,1x11,3x5 \
  --device "$DEVICE" --mode reduce-overhead $([[ $DEVICE == cpu ]] && echo --size tiny || echo --size 1b --layers 4) \
  --json "$OUT_DIR/serve_loop_cuda.json" 2>&1 | tee -a "$LOG"
# Hugging Face's own compile of the static-cache decode step, stock and under verishape.enable()
timeout "$(share 120)" python3 benchmarks/serve_loop.py --families llama --caches static --mix 2x7,1x11,3x5 \
  --variants hf-stock,hf-enable --device "$DEVICE" --mode reduce-overhead \
  $([[ $DEVICE == cpu ]] && echo --size tiny || echo --size 1b --layers 4) \
  --json "$OUT_DIR/serve_loop_hf_cuda.json" 2>&1 | tee -a "$LOG"
timeout "$(share 90)" python3 benchmarks/generic_recompile_cost.py --device "$DEVICE" \
  $([[ $DEVICE == cpu ]] && echo --calls 2 --rounds 2 || echo --width 1024 --layers 8) --json "$OUT_DIR/generic_recompile_cost_cuda.json" 2>&1 | tee -a "$LOG"
fi
say "done"
