// kernalyse-scan: measures the ceilings of the GPU it runs on (dense GEMM FLOP/s per dtype over a
// size sweep with cuBLAS, device-memory copy bandwidth) and writes them as a --peaks file for
// kernalyse-merge --roofline (format in docs/analyses.md, "Device peaks"). Without a usable CUDA
// device it says so in one line and exits 2. Host code only (CUDA runtime and cuBLAS).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernalyse/atomic_file.h"
#include "kernalyse/error.h"

namespace {

constexpr int kExitNoDevice = 2;

struct Dtype {
  const char* name;  // the peaks file's dtype key
  cudaDataType_t ab, c;
  cublasComputeType_t compute;
  size_t ab_size, c_size;
};

// One GEMM configuration timed with CUDA events: best of `reps` runs after a warm-up.
double gemm_rate(cublasHandle_t h, const Dtype& d, int n, int reps, void* A, void* B, void* C) {
  const double one_d = 1.0, zero_d = 0.0;
  const float one_f = 1.0f, zero_f = 0.0f;
  const int32_t one_i = 1, zero_i = 0;
  const void *alpha = &one_f, *beta = &zero_f;
  if (d.compute == CUBLAS_COMPUTE_64F) alpha = &one_d, beta = &zero_d;
  if (d.compute == CUBLAS_COMPUTE_32I) alpha = &one_i, beta = &zero_i;
  auto run = [&] {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, alpha, A, d.ab, n, B, d.ab, n, beta,
                        C, d.c, n, d.compute, CUBLAS_GEMM_DEFAULT);
  };
  if (run() != CUBLAS_STATUS_SUCCESS) return 0;  // dtype unsupported on this device
  cudaDeviceSynchronize();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0);
    for (int i = 0; i < 4; ++i) run();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms > 0) best = std::max(best, 4 * 2.0 * n * double(n) * n / (ms * 1e-3));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return best;
}

// Device-to-device copy of `bytes`: each byte is read once and written once.
double copy_rate(size_t bytes, int reps) {
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, bytes) != cudaSuccess) return 0;
  if (cudaMalloc(&dst, bytes) != cudaSuccess) return cudaFree(src), 0;
  cudaMemset(src, 1, bytes);
  cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(e0);
    cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms > 0) best = std::max(best, 2.0 * double(bytes) / (ms * 1e-3));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(src);
  cudaFree(dst);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  bool force = false, quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-o" || a == "--output") && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--force") {
      force = true;
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--help" || a == "-h") {
      std::puts(
          "usage: kernalyse-scan [-o FILE.json [--force]] [--quick]\n"
          "Measures this GPU's ceilings (dense GEMM FLOP/s per dtype with cuBLAS over square "
          "sizes\n"
          "1024-8192, device-to-device copy bandwidth) and writes them as a kernalyse-merge "
          "--peaks\n"
          "file (stdout without -o). --quick: sizes up to 4096, fewer repetitions.");
      return 0;
    } else {
      std::fprintf(stderr, "kernalyse-scan: unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::fprintf(stderr, "kernalyse-scan: no CUDA device to measure (%s)\n",
                 err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
    return kExitNoDevice;
  }
  try {
    if (!out.empty()) kernalyse::check_output_path(out, force);
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, 0);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw kernalyse::Error("cublasCreate failed");
    const Dtype types[] = {
        {"fp64", CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, 8, 8},
        {"fp32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC, 4, 4},
        {"tf32", CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 4},
        {"bf16", CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 2},
        {"fp16", CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2},
        {"int8", CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I, 1, 4},
    };
    std::vector<int> sizes =
        quick ? std::vector<int>{1024, 2048, 4096} : std::vector<int>{1024, 2048, 4096, 8192};
    const int reps = quick ? 3 : 10;
    const int nmax = sizes.back();
    void *A = nullptr, *B = nullptr, *C = nullptr;
    const size_t elems = size_t(nmax) * nmax;
    if (cudaMalloc(&A, elems * 8) != cudaSuccess || cudaMalloc(&B, elems * 8) != cudaSuccess ||
        cudaMalloc(&C, elems * 8) != cudaSuccess)
      throw kernalyse::Error("cannot allocate the GEMM buffers on the device");
    cudaMemset(A, 0, elems * 8);
    cudaMemset(B, 0, elems * 8);
    nlohmann::json peaks = nlohmann::json::object(), sweep = nlohmann::json::array();
    for (const Dtype& d : types) {
      double best = 0;
      for (int n : sizes) {
        const double r = gemm_rate(h, d, n, reps, A, B, C);
        sweep.push_back({{"dtype", d.name}, {"m", n}, {"n", n}, {"k", n}, {"flops_per_s", r}});
        best = std::max(best, r);
      }
      peaks[d.name] = best;
    }
    cudaFree(A);
    cudaFree(B);
    cudaFree(C);
    cublasDestroy(h);
    const double bw = copy_rate(size_t(quick ? 256 : 1024) << 20, reps);
    char when[32];
    std::time_t t = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    nlohmann::json j = {
        {"name", prop.name},
        {"source", std::string("kernalyse-scan on ") + prop.name + ", " + when +
                       " (cuBLAS GEMM best of square sizes, device-to-device copy)"},
        {"flops_per_s", peaks},
        {"bytes_per_s", bw},
        {"sweep", sweep},
        {"fp8", "not measured (cublasLt FP8 GEMM not wired in)"}};
    const std::string text = j.dump(2) + "\n";
    if (out.empty()) {
      std::fputs(text.c_str(), stdout);
    } else {
      kernalyse::AtomicFile f(out, force);
      std::ofstream o(f.tmp(), std::ios::trunc);
      o << text;
      o.close();
      if (!o) throw kernalyse::Error(out + ": cannot write");
      f.commit();
    }
  } catch (const kernalyse::Error& e) {
    std::fprintf(stderr, "kernalyse-scan: %s\n", e.what());
    return 2;
  }
  return 0;
}
