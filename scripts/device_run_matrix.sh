#!/usr/bin/env bash
# GPU machine: real third-party programs untraced and under `cudatrace run` (scripts/device_run_matrix.py), plus
# the start-up cost of hooking a PyTorch-sized process. Needs the frida, platformdirs and tomli_w wheels in .whl/.
source "$(dirname "$0")/device_env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 scripts/device_run_matrix.py --out "$OUT" 2>&1 | tee "$OUT/matrix.log"
