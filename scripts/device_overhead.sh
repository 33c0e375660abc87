#!/usr/bin/env bash
# Overhead and concurrency checks of `cudatrace run` on the device machine (NVIDIA H200, PyTorch, real driver).
#   scripts/device_overhead.sh [inprocess|procs]
# inprocess: C microbenchmark (every counting mode), the threads test of the suite on this machine's CPUs, and
#   the PPO loop with tracing attached and detached in turn inside one process (scripts/bench_overhead_ppo.py).
# procs: the PPO loop in separate processes, untraced / counting / default interleaved, and a DataLoader with
#   forked workers traced end to end.
# Needs the frida wheel in .whl/ and the PPO loop in .device/ppo_bench.py (both carried). Writes log.txt under $OUT.
MODE=${1:-inprocess}
source "$(dirname "$0")/device_env.sh"
{
  nproc; ldd --version | head -1; grep -m1 "model name" /proc/cpuinfo
  python3 -c "import ctypes; print('rseq size', ctypes.c_uint.in_dll(ctypes.CDLL(None), '__rseq_size').value)"
  if [ "$MODE" = inprocess ]; then
    [ -n "${SKIP_MICRO:-}" ] || run timeout 240 python3 scripts/bench_overhead_micro.py --calls 50000000 --rounds 5
    run timeout 120 python3 -m pytest -q -p no:cacheprovider tests/tracer/dynamic/test_run_standins.py -k "threads or workload or fork"
    run timeout $(( ${PPO_SECONDS:-300} + 90 )) python3 scripts/bench_overhead_ppo.py --seconds ${PPO_SECONDS:-300} --cpus 2-9 --out "$WORK/blocks"
    cp "$WORK/blocks/iterations.jsonl" "$OUT/" 2>/dev/null
  else
    for i in $(seq 1 "${ROUNDS:-6}"); do
      ITERS=12 timeout 120 python3 .device/ppo_bench.py 2>&1 | sed "s/^/untraced $i /"
      ITERS=12 timeout 120 python3 -m cudatrace run --no-store --detail-calls 0 --format json -o "$WORK/c$i.json" -- python3 .device/ppo_bench.py 2>&1 | sed "s/^/count $i /"
      ITERS=12 timeout 120 python3 -m cudatrace run --no-store --format json -o "$WORK/d$i.json" -- python3 .device/ppo_bench.py 2>&1 | sed "s/^/default $i /"
    done
    run timeout 300 python3 -m cudatrace run --no-store --format json -o "$OUT/dataloader-trace.json" -- python3 scripts/device_workloads.py dataloader
    python3 -c "
import json; d = json.load(open('$OUT/dataloader-trace.json'))
print('exit', d['exit'], 'processes', [(p['pid'], p.get('parent'), sum(1 for _ in p.get('libraries', []))) for p in d['processes']])
print('calls', sum(c['calls'] for c in d['calls']), 'notes', d['notes'])"
  fi
} 2>&1 | tee "$OUT/log.txt"
