// Kernel classification (communication / memory / computation) and name simplification.
#pragma once

#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "kernalyse/store.h"

namespace kernalyse {

class Classifier {
 public:
  // --comm-regex patterns see at most this many leading bytes of a name (classify.cpp says why).
  static constexpr size_t kMaxRegexInput = 2048;

  // Default communication patterns cover old and new NCCL/RCCL names (ncclKernel_*,
  // ncclDevKernel_*, ncclSymkDevKernel_*, RCCL Generic), the communication kernels of other
  // libraries (DeepEP, NVSHMEM, the custom all-reduce of vLLM / SGLang / TensorRT-LLM / PyTorch
  // symmetric memory; docs/analyses.md) plus user extras (--comm-regex).
  explicit Classifier(const std::vector<std::string>& extra_comm_regex = {});
  Category classify(Kind kind, std::string_view name) const;
  bool is_communication(std::string_view name) const;

 private:
  std::vector<std::regex> extra_;
};

// What an NCCL/RCCL kernel name tells: "ncclKernel_AllReduce_RING_LL_Sum_float(...)",
// "ncclDevKernel_AllReduce_Sum_f32_RING_LL": the collective (lower case, as PyTorch names it),
// algorithm and protocol; "" when absent. Every importer fills /nccl rows from it.
struct NcclName {
  std::string collective, algo, proto;
};
NcclName parse_nccl_name(std::string_view name);

// "void at::native::elementwise_kernel<128, 2, ...>(int, ...)" → "at::native::elementwise_kernel".
std::string simplify_kernel_name(std::string_view name);

}  // namespace kernalyse
