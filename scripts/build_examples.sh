#!/usr/bin/env bash
# Rebuild the bundled example binaries in examples/ from examples/src (provenance: examples/README.md).
# Needs nvcc (CUDA 13.0 here: /usr/local/bin/nvcc) and gcc. The outputs are committed; rebuilding with another
# toolkit changes their bytes, so only rebuild on purpose.
set -euo pipefail
cd "$(dirname "$0")/../examples"
NVCC="${NVCC:-/usr/local/bin/nvcc}"

# nvcc's default static CUDA runtime; SASS for sm_75 and sm_86 plus PTX for compute_75 (ZLUDA can recompile it).
"$NVCC" -O2 -gencode arch=compute_75,code=[sm_75,compute_75] -gencode arch=compute_86,code=sm_86 \
  -Xlinker -s -o saxpy_ptx src/saxpy.cu

# The same program with only SASS (sm_86), every fatbin image compressed: ZLUDA cannot run these kernels.
"$NVCC" -O2 -gencode arch=compute_86,code=sm_86 -Xfatbin -compress-all -Xlinker -s -o saxpy_sass_only src/saxpy.cu

# No CUDA import at all: the driver is loaded with dlopen("libcuda.so.1") and entry points found with dlsym.
gcc -O2 -s -o dlopen_cuda src/dlopen_cuda.c -ldl

ls -l saxpy_ptx saxpy_sass_only dlopen_cuda
