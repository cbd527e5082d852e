#!/usr/bin/env bash
# The GPU checks of issue 24 (item 5), prepared as one call of the device tool for the first
# session lent a GPU machine (its image has torch, numpy, pyarrow, pytest; not our database stack):
#
#   run(command="bash bench/gpu_checks.sh", timeout_s=540)   # about 6 min; 480 s deadline inside
#
# 1. the device and torch;
# 2. tests/unit/learners/test_on_devices.py on CPU and CUDA: the FLOP meter's count of a
#    ResNet-34 step under bf16 autocast and channels-last equals FlopCounterMode's, the curve
#    read from tensor losses equals the losses, the batched crop on the GPU gives the CPU's pixels;
# 2b. bench/seccomp_check.py: a few training steps and a torch.compile'd function on the device
#    with the learner hosts' seccomp filter loaded (no file locks, no inotify): does the driver care;
# 2c. bench/gpu_floor_check.py (issue 46): a hostile learner (meter patched, raw torch.matmul on
#    the device) and its honest twin (a tracked MLP), 15 s each, one trial each in a real learner
#    host through the harness's measured call: each one's own FLOPs, CPU- and GPU-seconds (NVML),
#    floor and charge, the hostile charge / the honest one, and whether the floor's GPU term
#    caught it (exit 1 if not). It needs the harness's Python dependencies the image lacks
#    (pydantic & co.), carried as wheels: prepare them here once, before the call,
#      echo /.whl/ >> .git/info/exclude
#      .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
#        --platform manylinux2014_x86_64 -d .whl $(.venv/bin/python -m pip freeze | grep -iE \
#        '^(pydantic|pydantic[-_]core|pydantic[-_]settings|annotated[-_]types|typing[-_]inspection|python[-_]dotenv)==')
#    and name it in the call: run(command="bash bench/gpu_checks.sh", carry=[".whl"], timeout_s=540);
#    this script installs them into the interpreter's own environment (learner hosts run it -I);
# 3. bench/bench_gpu.py (indep, ResNet-34 at 64 px) at the paper's three batch sizes (the rule
#    b = min(512, max(16, 2^floor(log2(0.0025 D)))): 16 for D < 12,800, 64 for 25,600 <= D <
#    51,200, 512 for D >= 204,800): images/s, TFLOP/s, the fraction of the bf16 peak, input vs
#    step, the meter's overhead;
# 4. the same three with 4 processes training at once on the GPU (--procs 4), as 4 trials of a
#    learner declaring gpus_per_worker = 0.25 share it: what small batches gain from sharing;
# 5. bench/paper_scale.py on each set of runs: one FULL-stream submission's wall time and cost with
#    each training step at its measured time for its batch size (no assumed GPU rate), one trial
#    per GPU and then 4;
# 6. last, as the slowest (compilation): b = 16 with torch.compile in "reduce-overhead" mode (each
#    child's kernels replayed as CUDA graphs, the other lever for small batches), and whether the
#    meter counted the same FLOPs per step as the eager b = 16 run;
# 7. bench/gpu_report.py: every figure above as Markdown tables for the docs.
#
# Figures go to $OUT (one JSON per bench run) and stdout. GPU_CHECKS_DEVICE=cpu GPU_CHECKS_TINY=1
# runs the same steps in seconds on a CPU (tests/unit/test_bench_input_gpu.py keeps it working).
# The steps share a deadline (GPU_CHECKS_DEADLINE_S, 480 s): a step that would start past it is
# skipped and a running one is cut at it, so the report still comes back inside the device call.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-${TMPDIR:-/tmp}/gpu_checks}"
mkdir -p "$out"
device="${GPU_CHECKS_DEVICE:-cuda}"
py="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
failed=0

step() {
  echo "== $*"
  "$@" || { echo "!! failed (exit $?): $*"; failed=1; }
}

deadline="${GPU_CHECKS_DEADLINE_S:-480}"
# bounded LIMIT COMMAND...: a step under `timeout`, cut at the run's deadline, skipped past it.
bounded() {
  local limit="$1" left=$((deadline - SECONDS))
  shift
  if [ "$left" -lt 20 ]; then
    echo "== skipped, the run's ${deadline} s are spent: $*"
    return 0
  fi
  [ "$left" -lt "$limit" ] && limit="$left"
  step timeout "$limit" "$@"
}

if [ -n "${GPU_CHECKS_TINY:-}" ]; then
  size=(--steps 2 --warmup 1 --width 8 --threads 1 --images 16)
  batches=(4)
  procs=2
  scale=(--tasks 2 --steps 10 --width 8 --image-size 16)
  floor=(--tiny)
else
  size=()
  batches=(16 64 512)
  procs=4
  scale=()
  floor=()
fi

# One FULL run at the paper's budget, at the step times measured by the named runs that exist.
scale_on() {
  local name="$1" measured=()
  shift
  for file in "$@"; do
    [ -s "$file" ] && measured+=("$file")
  done
  if [ "${#measured[@]}" -gt 0 ]; then
    step "$py" bench/paper_scale.py --gpu-json "${measured[@]}" "${scale[@]}" --json "$out/$name.json"
  fi
}

if [ "$device" = cuda ]; then
  step nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
fi
step "$py" -c "import sys, torch; print('python', sys.version.split()[0], '| torch', torch.__version__, '|',
  torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA device')"
bounded 200 "$py" -m pytest --noconftest -p no:cacheprovider -q tests/unit/learners/test_on_devices.py
step timeout 120 "$py" bench/seccomp_check.py --device "$device"
if compgen -G ".whl/*.whl" >/dev/null; then  # the wheels of 2c, where the call carried them
  step "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl
fi
bounded 150 "$py" bench/gpu_floor_check.py --device "$device" "${floor[@]}" --json "$out/floor_check.json"
single=() shared=()
for batch in "${batches[@]}"; do
  bounded 300 "$py" bench/bench_gpu.py --device "$device" --batch "$batch" "${size[@]}" \
    --json "$out/gpu_b$batch.json"
  single+=("$out/gpu_b$batch.json")
done
for batch in "${batches[@]}"; do
  bounded 200 "$py" bench/bench_gpu.py --device "$device" --batch "$batch" --procs "$procs" "${size[@]}" \
    --json "$out/gpu_b${batch}_x$procs.json"
  shared+=("$out/gpu_b${batch}_x$procs.json")
done
scale_on paper_scale "${single[@]}"
scale_on "paper_scale_x$procs" "${shared[@]}"
first="${batches[0]}"
if [ -z "${GPU_CHECKS_TINY:-}" ]; then
  bounded 300 "$py" bench/bench_gpu.py --device "$device" --batch "$first" --compile reduce-overhead \
    --json "$out/gpu_b${first}_graphs.json"
fi
if [ -s "$out/gpu_b${first}_graphs.json" ]; then
  step "$py" -c "import json, sys; eager, graphs = (json.load(open(p)) for p in sys.argv[1:])
ok = eager['flops_per_step'] == graphs['flops_per_step']
print('FLOPs per step, eager vs CUDA graphs:', eager['flops_per_step'], graphs['flops_per_step'], 'equal' if ok else 'DIFFERENT')
print('images/s, eager vs CUDA graphs: %.1f vs %.1f (%.2fx)' % (eager['images_per_s'], graphs['images_per_s'], graphs['images_per_s'] / eager['images_per_s']))
sys.exit(0 if ok else 1)" "$out/gpu_b$first.json" "$out/gpu_b${first}_graphs.json"
fi
step "$py" bench/gpu_report.py "$out"  # last: the device tool returns the output's tail
exit "$failed"
