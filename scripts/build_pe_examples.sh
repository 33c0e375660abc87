#!/usr/bin/env bash
# Build examples/win/cuda_app.exe, the bundled Windows example, from examples/win/src with mingw-w64 and nvcc.
# Needs x86_64-w64-mingw32-{gcc,dlltool,nm,strip} (Debian package mingw-w64) and nvcc (for the embedded fatbin).
# The CUDA DLLs it imports do not exist here: import libraries are made from .def files with dlltool
# (-l for the import table, -y for the delay-import table of cufft64_11.dll).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=examples/win/src
OUT=examples/win
NVCC=${NVCC:-/usr/local/bin/nvcc}
T=x86_64-w64-mingw32
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cp "$SRC"/* "$WORK"/
cd "$WORK"

for def in nvcuda cublas64_12 cudnn64_9; do
  "$T-dlltool" -d "$def.def" -l "lib$def.a"
done
"$T-dlltool" -d cufft64_11.def -y libcufft64_11_delay.a
"$NVCC" -fatbin -gencode arch=compute_80,code=sm_80 -gencode arch=compute_80,code=compute_80 \
  -o kernels.fatbin kernels.cu
"$T-gcc" -O2 -Wl,--disable-long-section-names -o cuda_app.exe cuda_app.c fatbin.s delay_end.s -L. \
  -lnvcuda -lcublas64_12 -lcudnn64_9 -lcufft64_11_delay -ldelayimp

# Fill the Delay Import data directory with the descriptor the linker placed (see delay_end.s), then strip.
desc=$("$T-nm" cuda_app.exe | awk '/ __DELAY_IMPORT_DESCRIPTOR_/ {print $1}')
end=$("$T-nm" cuda_app.exe | awk '/ cudatrace_delay_end$/ {print $1}')
"$T-strip" cuda_app.exe
python3 - cuda_app.exe "$desc" "$end" <<'PY'
import struct, sys
path, desc, end = sys.argv[1], int(sys.argv[2], 16), int(sys.argv[3], 16)
if end != desc + 32:
    sys.exit(f"delay descriptor at {desc:#x} is not followed by the terminator ({end:#x})")
data = bytearray(open(path, "rb").read())
(lfanew,) = struct.unpack_from("<I", data, 0x3C)
opt = lfanew + 24
assert struct.unpack_from("<H", data, opt)[0] == 0x20B, "expected PE32+"
(image_base,) = struct.unpack_from("<Q", data, opt + 24)
struct.pack_into("<II", data, opt + 112 + 13 * 8, desc - image_base, 64)
open(path, "wb").write(bytes(data))
PY
cd - >/dev/null
cp "$WORK/cuda_app.exe" "$OUT/cuda_app.exe"
ls -l "$OUT/cuda_app.exe"
