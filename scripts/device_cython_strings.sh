#!/usr/bin/env bash
# GPU check of the scan's reading of Cython's compressed strings (docs/realworld.md, "Cython's compressed
# strings"), on the device machine's Python environment:
#   1. CuPy: its driver.so (Cython 3.2, zlib) scanned, then `cudatrace run` of a RawKernel: every driver entry
#      point the trace shows driver.so calling should be among the names the scan found.
#   2. With BASELINE=DIR (another checkout, e.g. a worktree of the commit before), the whole environment scanned
#      by both, in turns: the binaries whose entry points or libraries changed, the programs whose verdict did,
#      and the times.
# Needs the frida wheel in .whl/ (carried; or its unpacked files as .device/frida.tar.xz where the carry limit
# is tight) and the other wheels scripts/device_env.sh installs. Writes $OUT/log.txt and the documents.
[ -f .device/frida.tar.xz ] && mkdir -p /tmp/site && tar -xJf .device/frida.tar.xz -C /tmp/site
source "$(dirname "$0")/device_env.sh"
SP=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
{
  nvidia-smi -L
  python3 -c "import cupy, sys; print('python', sys.version.split()[0], 'cupy', cupy.__version__)"
  for f in "$SP"/cupy_backends/cuda/api/driver*.so; do
    echo "$f: zlib marker $(grep -c CYTHON_COMPRESS_STRINGS "$f"), lzss marker $(grep -c 'LZSS string data' "$f"), built by $(strings -a "$f" | grep -m1 -o '_cython_3_[0-9_]*')"
  done
  run timeout 120 python3 -m cudatrace scan --no-store --no-progress --format json -o "$OUT/cupy-api-scan.json" "$SP"/cupy_backends/cuda/api/
  cat > "$WORK/cupy_kernel.py" <<'PY'
import cupy as cp
add = cp.RawKernel(r'''
extern "C" __global__ void add(const float* x, float* y, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}''', "add")
x = cp.arange(1024, dtype=cp.float32)
y = cp.empty_like(x)
add((4,), (256,), (x, y, cp.int32(1024)))
print("sum", float(y.sum()))
PY
  CUPY_CACHE_DIR="$WORK/cupy-cache" run timeout 240 python3 -m cudatrace run --no-store --format json -o "$OUT/cupy-run.json" -- python3 "$WORK/cupy_kernel.py"
  # the remedy the verdict gives (ptx_switch) and configure sets: the same kernel, with CuPy asking NVRTC for PTX
  CUPY_COMPILE_WITH_PTX=1 CUPY_CACHE_DIR="$WORK/cupy-cache-ptx" run timeout 240 python3 -m cudatrace run --no-store --format json -o "$OUT/cupy-run-ptx.json" -- python3 "$WORK/cupy_kernel.py"
  python3 - "$OUT/cupy-run.json" "$OUT/cupy-run-ptx.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    run = json.load(open(path))
    mods = [(m["via"], m["kind"], m.get("ptx"), m.get("sass"), m.get("caller")) for m in run["gpu_modules"] if "driver." in (m.get("caller") or "")]
    status = (run.get("verdict") or {}).get("status")
    codes = [r["code"] for r in (run.get("verdict") or {}).get("reasons", []) if r["severity"] != "info"]
    nvrtc = sorted((c["function"], c["calls"]) for c in run["calls"] if c["family"] == "nvrtc")
    print(path.rsplit("/", 1)[-1], "modules CuPy's driver.so loaded:", mods, "NVRTC calls:", nvrtc)
    print("  verdict", status, codes)
PY
  python3 - "$OUT/cupy-api-scan.json" "$OUT/cupy-run.json" <<'PY'
import json, sys
scan, run = (json.load(open(p)) for p in sys.argv[1:3])
named = next({i["function"] for i in b["imports"]} for b in scan["binaries"] if "/driver." in b["path"])
print("driver.so: driver entry points the scan names:", len(named))
from_driver = sorted(
    c["function"] for c in run["calls"] if c["family"] == "driver" and any(k.startswith("driver.") for k in c.get("callers") or {})
)
print("called from driver.so under the tracer:", from_driver)
print("of those, named by the scan:", sorted(set(from_driver) & named), "not named:", sorted(set(from_driver) - named))
print("exit", run["exit"])
PY
  if [ -n "${BASELINE:-}" ]; then
    for round in 1 2; do
      for v in baseline this; do
        if [ $v = baseline ]; then D=$(cd "$BASELINE" && pwd); else D=$PWD; fi
        s=$(date +%s.%N)
        # from the checkout's own folder: `python3 -m` puts the working folder first on the path
        (cd "$D" && PYTHONPATH=/tmp/site:$D timeout 280 python3 -m cudatrace scan --no-store --no-progress --format json -o "$WORK/$v.json" "$SP")
        echo "round $round $v rc $? $(python3 -c "print(round($(date +%s.%N) - $s, 2))") s"
      done
    done
    python3 - "$WORK/baseline.json" "$WORK/this.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def facts(d):
    return {x["path"]: ({i["function"] for i in x.get("imports", [])}, {l["name"] for l in x.get("cuda_libraries", [])}) for x in d["binaries"]}
fa, fb = facts(a), facts(b)
changed = sorted((p for p in fb if fa.get(p) != fb[p]), key=lambda p: -len(fb[p][0]))
print("binaries", len(fb), "changed", len(changed))
for p in changed[:60]:
    old = fa.get(p, (set(), set()))
    print(f"  {p.split('site-packages/')[-1]}: entry points {len(old[0])} -> {len(fb[p][0])}, libraries +{sorted(fb[p][1] - old[1])} -{sorted(old[1] - fb[p][1])}")
before = {(p["name"], p["root"], p.get("platform")): p.get("verdict") or {} for p in a["programs"]}
for p in b["programs"]:
    va, vb = before.get((p["name"], p["root"], p.get("platform")), {}), p.get("verdict") or {}
    ca, cb = [r["code"] for r in va.get("reasons", [])], [r["code"] for r in vb.get("reasons", [])]
    if va.get("status") != vb.get("status") or ca != cb:
        print("program", p["name"], va.get("status"), "->", vb.get("status"), ca[:6], "->", cb[:6])
print("programs", len(a["programs"]), "->", len(b["programs"]))
PY
  fi
} 2>&1 | tee "$OUT/log.txt"
