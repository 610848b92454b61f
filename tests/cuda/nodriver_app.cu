// The nvcc build of nodriver_app.cpp (cudart linked statically, nvcc's default, and device code
// in the executable): one kernel, launched only if a device exists. Exits 3.
#include <cstdio>

__global__ void touch(int* p) { p[threadIdx.x] = threadIdx.x; }

int main() {
  int n = -1;
  cudaError_t e = cudaGetDeviceCount(&n);
  std::printf("cudaGetDeviceCount: %s (%d devices)\n", cudaGetErrorString(e), n);
  int* p = nullptr;
  e = cudaMalloc(&p, 1 << 20);
  std::printf("cudaMalloc: %s\n", cudaGetErrorString(e));
  if (e == cudaSuccess) {
    touch<<<1, 32>>>(p);
    cudaDeviceSynchronize();
    cudaFree(p);
  }
  return 3;
}
