# Sourced by the scripts/device_*.sh runs on the device machine: the frida wheel carried in .whl/ installed
# into /tmp/site, PYTHONPATH to it and the checkout, $OUT (what comes back) and $WORK (scratch), and run(),
# which echoes a command and its exit status into the log.
set -uo pipefail
OUT=${OUT:-/tmp/cudatrace-out}
WORK=/tmp/cudatrace-work
mkdir -p "$OUT" "$WORK"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
run() { echo "+ $*"; "$@"; echo "= rc $?"; }
