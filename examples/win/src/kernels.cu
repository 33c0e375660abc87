// The example's GPU code: nvcc -fatbin turns it into SASS for sm_80 and PTX for compute_80.
__global__ void scale(float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
