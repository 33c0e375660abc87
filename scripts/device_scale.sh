#!/usr/bin/env bash
# Scan throughput on a many-core Linux machine, over its own Python environment (site-packages with PyTorch,
# JAX, CuPy, the nvidia-* wheels): `cudatrace scan --jobs N` for N = 1, 2, 4, 8, 16 and a Dask LocalCluster of
# 1, 2, 4, 8, 16 workers (`scan --dask local --jobs N`), each once after one untimed run that warms the page
# cache, printed as a table (wall s, speed-up over one process, MB/s, peak MB of the client process) with a check
# that every document is the same byte for byte. Installs nothing from the network: cudatrace runs from this
# checkout (PYTHONPATH); a dependency missing from the machine's Python is installed only from wheels carried
# in .whl/ (pip --no-index), else the script says which and stops. Without dask.distributed the Dask rows are
# skipped, and the script says so. Every command is capped at 150 s; the whole run takes about 3-5 minutes
# (at most 8).
#
# Usage: bash scripts/device_scale.sh [SITE_PACKAGES]      (run from the repository root)
set -uo pipefail
OUT=${OUT:-/tmp/cudatrace-out}
WORK=${WORK:-/tmp/cudatrace-scale}
mkdir -p "$OUT" "$WORK"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
CAP=150

missing=$($PY - <<'EOF'
import importlib
need = ["pefile", "lief", "rich", "lz4", "zstandard", "platformdirs", "tomli_w"]
print(" ".join(m for m in need if importlib.util.find_spec(m) is None))
EOF
)
if [ -n "$missing" ]; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    echo "installing from .whl/ (no network): $missing"
    $PY -m pip install -q --no-index --find-links .whl --target /tmp/site-scale $missing || exit 1
    export PYTHONPATH=$PYTHONPATH:/tmp/site-scale
  else
    echo "missing Python modules: $missing (carry their wheels in .whl/ or install them); nothing measured"
    exit 1
  fi
fi

SITE=${1:-$($PY - <<'EOF'
import os, sysconfig
try:
    import torch
    print(os.path.dirname(os.path.dirname(torch.__file__)))
except Exception:
    print(sysconfig.get_paths()["purelib"])
EOF
)}
CPUS=$(nproc)
SIZE_MB=$(du -sm --apparent-size "$SITE" 2>/dev/null | cut -f1)
echo "site-packages: $SITE ($SIZE_MB MB), $CPUS CPUs, $($PY --version)"
HAVE_DASK=1
$PY -c "import distributed" 2>/dev/null || HAVE_DASK=0

# One measured command: wall seconds and peak RSS (MB) of the client process, written to $WORK/t.
measure() {
  $PY - "$@" <<'EOF'
import os, subprocess, sys, time
cap = float(os.environ.get("CAP", "150"))
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
while True:
    pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    if pid:
        break
    if time.perf_counter() - start > cap:
        proc.kill()
        os.wait4(proc.pid, 0)
        print("timeout 0")
        sys.exit(0)
    time.sleep(0.02)
wall = time.perf_counter() - start
code = os.waitstatus_to_exitcode(status)
if code not in (0, 4):
    sys.stderr.write(proc.stderr.read().decode()[-500:])
    print("failed 0")
else:
    print(f"{wall:.2f} {usage.ru_maxrss / 1024:.0f}")
EOF
}
export CAP

scan() {  # scan JOBS OUTFILE [extra args]
  local jobs=$1 out=$2; shift 2
  measure $PY -m cudatrace scan --no-store --no-zluda --no-progress --format json -o "$out" --jobs "$jobs" "$@" "$SITE"
}

echo "warming the page cache (one untimed scan with $CPUS processes)"
scan "$CPUS" "$WORK/warm.json" >/dev/null

printf '\n%-22s %8s %9s %8s %8s  %s\n' "run" "wall s" "speed-up" "MB/s" "peak MB" "document sha256"
base=""
row() {  # row LABEL RESULT FILE
  local label=$1 wall rss sha
  read -r wall rss <<<"$2"
  if [ "$wall" = timeout ] || [ "$wall" = failed ]; then
    printf '%-22s %8s\n' "$label" "$wall"
    return
  fi
  sha=$(sha256sum "$3" | cut -c1-16)
  [ -z "$base" ] && base=$wall
  $PY -c "import sys; w,b,m,r=map(float,sys.argv[1:5]); print(f'%-22s %8.2f %8.2fx %8.0f %8.0f  %s' % (sys.argv[5], w, b/w, m/w, r, sys.argv[6]))" \
    "$wall" "$base" "$SIZE_MB" "$rss" "$label" "$sha"
}
for j in 1 2 4 8 16; do
  [ "$j" -gt "$CPUS" ] && continue
  row "scan --jobs $j" "$(scan "$j" "$WORK/jobs$j.json")" "$WORK/jobs$j.json"
done
if [ "$HAVE_DASK" = 1 ]; then
  for j in 1 2 4 8 16; do
    [ "$j" -gt "$CPUS" ] && continue
    row "dask local, $j workers" "$(scan "$j" "$WORK/dask$j.json" --dask local)" "$WORK/dask$j.json"
  done
else
  echo "dask.distributed is not installed in this Python: the Dask rows are skipped"
fi
n=$(sha256sum "$WORK"/jobs*.json "$WORK"/dask*.json 2>/dev/null | cut -d' ' -f1 | sort -u | wc -l)
echo "distinct documents over all runs: $n (1 means byte-identical)"
cp "$WORK/jobs1.json" "$OUT/scan-site-packages.json" 2>/dev/null || true
