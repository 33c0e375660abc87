// saxpy.cu: a minimal CUDA program (runtime API, one kernel) used as cudatrace's bundled example.
#include <cstdio>
#include <vector>

__global__ void saxpy(int n, float a, const float *x, float *y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

int main() {
    const int n = 1 << 20;
    std::vector<float> x(n, 1.0f), y(n, 2.0f);
    float *dx = nullptr, *dy = nullptr;
    if (cudaMalloc(&dx, n * sizeof(float)) != cudaSuccess || cudaMalloc(&dy, n * sizeof(float)) != cudaSuccess) {
        std::printf("no CUDA device\n");
        return 1;
    }
    cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
    cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost);
    std::printf("y[0] = %f (expected 4.0)\n", y[0]);
    cudaFree(dx);
    cudaFree(dy);
    return 0;
}
