#!/usr/bin/env bash
# GPU validation of `cudatrace run` on the device machine (NVIDIA H200, PyTorch, the real driver).
#   scripts/device_validate.sh [smoke|full]
# Needs the frida wheel in .whl/ (carried) and the PPO loop in .device/ppo_bench.py (carried). Writes, under
# $OUT: log.txt, summary.json (scripts/device_summary.py), ppo-trace.json, statuses.json (status tables built
# from the pip-installed NVIDIA headers there) and results.tar.gz (every trace and CUPTI count).
MODE=${1:-full}
source "$(dirname "$0")/device_env.sh"
{
  nvidia-smi -L
  python3 -c "import torch, frida, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'frida', frida.__version__)"
  NV=$(python3 -c "import nvidia, os; print(list(nvidia.__path__)[0])")
  run python3 scripts/build_status_tables.py --include "$NV" --include /usr/local/cuda/include
  cp cudatrace/tracer/dynamic/agent/statuses.json "$OUT/"
  if [ "$MODE" = smoke ]; then
    WORKLOADS="matmul conv"; ROUNDS=1; MICRO="--calls 5000000 --rounds 1"
  else
    WORKLOADS="matmul conv fft sparse"; ROUNDS=3; MICRO="--calls 50000000 --rounds 5"
  fi
  run timeout 240 python3 scripts/bench_overhead_micro.py $MICRO
  for w in $WORKLOADS; do
    run timeout 300 python3 -m cudatrace run --no-store --format json -o "$WORK/trace-$w.json" -- python3 scripts/device_workloads.py "$w"
    run timeout 300 python3 scripts/device_workloads.py "$w" --profile "$WORK/cupti-$w.json"
  done
  # PPO: the launch counts of a short run, traced and under CUPTI, then steps/s interleaved.
  ITERS=3 run timeout 300 python3 -m cudatrace run --no-store --format json -o "$WORK/trace-ppo3.json" -- python3 scripts/device_workloads.py ppo
  ITERS=3 run timeout 300 python3 scripts/device_workloads.py ppo --profile "$WORK/cupti-ppo3.json"
  for i in $(seq 1 "$ROUNDS"); do
    ITERS=12 timeout 300 python3 .device/ppo_bench.py 2>&1 | tee -a "$WORK/ppo-untraced.txt"
    ITERS=12 timeout 300 python3 -m cudatrace run --no-store --format json -o "$WORK/ppo-trace-$i.json" -- python3 .device/ppo_bench.py 2>&1 | tee -a "$WORK/ppo-traced.txt"
    ITERS=12 timeout 300 python3 -m cudatrace run --no-store --detail-calls 0 --format json -o "$WORK/ppo-count-$i.json" -- python3 .device/ppo_bench.py 2>&1 | tee -a "$WORK/ppo-count.txt"
  done
  cp "$WORK/ppo-trace-1.json" "$OUT/ppo-trace.json" 2>/dev/null
  python3 -m cudatrace run --no-store -- python3 scripts/device_workloads.py matmul | tail -40
  python3 scripts/device_summary.py "$WORK" > "$OUT/summary.json"
  cat "$OUT/summary.json"
} 2>&1 | tee "$OUT/log.txt"
tar -C "$WORK" -czf "$OUT/results.tar.gz" .
