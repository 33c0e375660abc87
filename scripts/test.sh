#!/usr/bin/env bash
# The test command: install what the tests build with and need (compilers, browser, Python packages), lint,
# type-check, run the suite. Safe to run again; it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

need_apt=()
command -v x86_64-w64-mingw32-gcc >/dev/null || need_apt+=(mingw-w64)
command -v i686-w64-mingw32-gcc >/dev/null || need_apt+=(mingw-w64)
command -v gcc >/dev/null || need_apt+=(gcc)
command -v readelf >/dev/null || need_apt+=(binutils)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v llvm-readobj >/dev/null || need_apt+=(llvm)
command -v setpriv >/dev/null || need_apt+=(util-linux)
command -v tmux >/dev/null || need_apt+=(tmux)
command -v node >/dev/null || need_apt+=(nodejs)
if ((${#need_apt[@]})); then
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

python3 -m pip install -q -e '.[dev,dask]'

ruff check cudatrace tests scripts
ruff format --check cudatrace tests scripts
mypy
python3 -m pytest -q -n 2 "$@"
