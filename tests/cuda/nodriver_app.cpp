// A CUDA application that only asks the runtime for devices and memory (shared libcudart),
// then exits 3: tests/cli/test_cuda_nodriver.sh checks the code survives kernalyse-run and
// that the collector reports "no CUDA device" on a host without a driver.
#include <cuda_runtime_api.h>

#include <cstdio>

int main() {
  int n = -1;
  cudaError_t e = cudaGetDeviceCount(&n);
  std::printf("cudaGetDeviceCount: %s (%d devices)\n", cudaGetErrorString(e), n);
  void* p = nullptr;
  e = cudaMalloc(&p, 1 << 20);
  std::printf("cudaMalloc: %s\n", cudaGetErrorString(e));
  if (e == cudaSuccess) cudaFree(p);
  return 3;
}
