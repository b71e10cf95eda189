#!/usr/bin/env bash
# The checks that need a CUDA GPU, in one run (benchmarks/README.md, "The GPU checks in one run"):
#
#   bash benchmarks/gpu_checks.sh [OUT_DIR]        # default: gpu-results/
#
# In order of importance, each under its own time limit (seconds; 540 in all), each writing its log,
# and its CSV and figure where it has them, to OUT_DIR:
#   1. cuda-tests      the CUDA tests: hold_budget's peak goal, apply on CUDA, the per-op overhead
#   2. fidelity-hold   GPT-2 124M and BERT-base at full shape, every swapping plan without and with
#                      hold_budget: measured against simulated peak and step time
#   3. fidelity-llama  llama-small, the small-op model the per-op overhead is for
#   4. versus          slack against what users pick instead at GPU shapes (benchmarks/versus.py)
# A step that runs out of time is killed and the next one runs. Without CUDA it says so and
# exits 0; its exit code is otherwise the number of steps that failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-gpu-results}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if ! python -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_checks: no CUDA device here; nothing to check"
    exit 0
fi
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python -c "import torch, transformers, sys; print('PyTorch', torch.__version__, 'transformers', transformers.__version__, 'Python', sys.version.split()[0])"
} | tee "$out/gpu.txt"

failed=0
step() {   # step NAME SECONDS COMMAND...
    local name=$1 limit=$2
    shift 2
    echo "== $name (at most ${limit} s): $*"
    local t0=$SECONDS
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    echo "   exit $rc after $((SECONDS - t0)) s (log: $out/$name.log)"
    tail -n 3 "$out/$name.log"
    [ "$rc" -eq 0 ] || failed=$((failed + 1))
}

step cuda-tests 90 python -m pytest -q -p no:cacheprovider -rs tests/test_hold_budget.py \
    tests/test_torch_apply.py tests/test_torch_overhead.py tests/test_errors_measure.py
step fidelity-hold 180 python benchmarks/fidelity.py --models gpt2-124m,bert-base --hold-budget both \
    --repeats 3 --out "$out/fidelity-hold.csv"
step fidelity-llama 90 python benchmarks/fidelity.py --models llama-small --budgets 0.5,0.4 \
    --repeats 3 --out "$out/fidelity-llama.csv"
step versus 180 python benchmarks/versus.py --size gpu --repeats 3 --out "$out/versus-gpu.csv" \
    --figure "$out/versus-gpu.png"
echo "gpu_checks: $failed of 4 steps failed; results in $out/"
exit "$failed"
