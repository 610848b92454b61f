#include "kernalyse/classify.h"

namespace kernalyse {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string_view strip_void(std::string_view name) {
  return starts_with(name, "void ") ? name.substr(5) : name;
}

bool contains(std::string_view s, std::string_view p) {
  return s.find(p) != std::string_view::npos;
}

// Communication kernels that are not NCCL's (docs/analyses.md lists them with their sources). Each
// pattern is part of the kernel's own function name (the last component of its simplified name),
// so an ordinary kernel whose template arguments merely mention a library does not match.
constexpr std::string_view kCustomCollectives[] = {
    "cross_device_reduce_1stage",    // vLLM / SGLang / aiter custom all-reduce
    "cross_device_reduce_2stage",    //   (csrc/custom_all_reduce.cuh)
    "allreduce_prototype_",          // vLLM / SGLang QuickReduce (ROCm), quickreduce::
    "oneShotAllReduceKernel",        // TensorRT-LLM customAllReduceKernels.cu, SGLang trt_reduce
    "twoShotAllReduceKernel",        //
    "allreduce_fusion_kernel",       // TensorRT-LLM / FlashInfer trtllm_allreduce_fusion
    "one_shot_all_reduce_kernel",    // PyTorch symmetric memory (vLLM's torch_symm_mem)
    "two_shot_all_reduce_kernel",    //
    "multimem_all_reduce_kernel",    //
    "multimem_one_shot_all_reduce",  //
    "multimem_all_gather_kernel",    //
};
// DeepEP's expert-parallel kernels (deep_ep::intranode / internode / internode_ll, DeepSeek's
// own build dpsk::ep::internode, and its ports): these functions in those namespaces.
constexpr std::string_view kEpNamespaces[] = {"intranode", "internode", "internode_ll"};
constexpr std::string_view kEpFunctions[] = {"dispatch",
                                             "combine",
                                             "notify_dispatch",
                                             "notify_combine",
                                             "cached_notify",
                                             "cached_notify_dispatch",
                                             "cached_notify_combine",
                                             "clean_low_latency_buffer"};

bool is_other_communication(std::string_view name) {
  // Cheap filter first: most kernels mention none of these.
  if (!contains(name, "nvshmem") && !contains(name, "node") && !contains(name, "reduce") &&
      !contains(name, "Reduce") && !contains(name, "all_gather"))
    return false;
  const std::string simple = simplify_kernel_name(name);
  std::string_view s = simple;
  size_t colon = s.rfind("::");
  std::string_view fn = colon == std::string_view::npos ? s : s.substr(colon + 2);
  // NVSHMEM's own kernels (nvshmemi_proxy_rma_entrypoint, nvshmemi_reduce_kernel,
  // nvshmemi_*_on_stream_kernel, ...).
  if (starts_with(fn, "nvshmem")) return true;
  for (std::string_view p : kCustomCollectives)
    if (contains(fn, p)) return true;
  if (colon == std::string_view::npos) return false;
  std::string_view outer = s.substr(0, colon);
  size_t c2 = outer.rfind("::");
  std::string_view ns = c2 == std::string_view::npos ? outer : outer.substr(c2 + 2);
  for (std::string_view n : kEpNamespaces) {
    if (ns != n) continue;
    for (std::string_view f : kEpFunctions)
      if (fn == f) return true;
  }
  return false;
}

}  // namespace

Classifier::Classifier(const std::vector<std::string>& extra_comm_regex) {
  for (const auto& re : extra_comm_regex) extra_.emplace_back(re, std::regex::optimize);
}

bool Classifier::is_communication(std::string_view name) const {
  // HTA's rule (^nccl | ^hip | ^hccl | .*ncclKernel.*) extended to RCCL and the NCCL >= 2.19
  // names (ncclDevKernel_*, ncclSymkDevKernel_*), which HTA misclassifies.
  std::string_view n = strip_void(name);
  if (starts_with(n, "nccl") || starts_with(n, "rccl") || starts_with(n, "hccl") ||
      starts_with(n, "hip"))
    return true;
  if (n.find("ncclKernel") != std::string_view::npos ||
      n.find("ncclDevKernel") != std::string_view::npos)
    return true;
  if (is_other_communication(n)) return true;
  // libstdc++'s std::regex matcher is recursive: its stack depth grows with the input length,
  // and "--comm-regex '.*allreduce'" on a 50,000-character kernel name overflowed the stack
  // (SIGSEGV). The user's patterns therefore see at most the first kMaxRegexInput bytes of a
  // name (docs/limits.md); real kernel names, even templated ones, are far shorter.
  const std::string_view head = name.substr(0, kMaxRegexInput);
  for (const auto& re : extra_) {
    if (std::regex_search(head.begin(), head.end(), re)) return true;
  }
  return false;
}

Category Classifier::classify(Kind kind, std::string_view name) const {
  switch (kind) {
    case Kind::Memcpy:
    case Kind::Memset:
      return Category::Memory;
    case Kind::Sync:
    case Kind::Other:
      return Category::Other;
    case Kind::HostOnStream:
      break;  // classified by name, as HTA does
    case Kind::Kernel:
      break;
  }
  if (is_communication(name)) return Category::Communication;
  std::string_view n = strip_void(name);
  if (starts_with(n, "Memcpy") || starts_with(n, "Memset") || starts_with(n, "hipMemcpy") ||
      starts_with(n, "hipMemset") || starts_with(n, "dma"))
    return Category::Memory;
  return Category::Computation;
}

NcclName parse_nccl_name(std::string_view name) {
  NcclName r;
  size_t paren = name.find('(');
  if (paren != std::string_view::npos) name = name.substr(0, paren);
  size_t k = name.find("Kernel_");
  if (k == std::string_view::npos) return r;
  name = name.substr(k + 7);
  bool first = true;
  while (!name.empty()) {
    size_t u = name.find('_');
    std::string_view tok = name.substr(0, u);
    name = u == std::string_view::npos ? std::string_view() : name.substr(u + 1);
    if (first) {
      for (char c : tok)
        r.collective += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
      first = false;
    } else if (tok == "RING" || tok == "TREE" || tok == "NVLS" || tok == "PAT" ||
               tok == "COLLNET") {
      r.algo = tok;
    } else if (tok == "LL" || tok == "LL128" || tok == "SIMPLE") {
      r.proto = tok;
    }
  }
  return r;
}

std::string simplify_kernel_name(std::string_view name) {
  std::string_view n = strip_void(name);
  std::string out;
  out.reserve(n.size());
  size_t i = 0;
  while (i < n.size()) {
    char c = n[i];
    if (c == '(') {
      // "(anonymous namespace)" is part of a qualified name, not a parameter list.
      static constexpr std::string_view kAnon = "(anonymous namespace)";
      if (n.substr(i, kAnon.size()) == kAnon) {
        out += kAnon;
        i += kAnon.size();
        continue;
      }
      break;  // the parameter list: everything after it is qualifiers
    }
    if (c == '<') {
      // Fold the template argument list, nested brackets and parentheses included.
      int depth = 0;
      for (; i < n.size(); ++i) {
        if (n[i] == '<' || n[i] == '(') ++depth;
        if (n[i] == '>' || n[i] == ')') --depth;
        if (depth == 0) break;
      }
      ++i;
      continue;
    }
    out += c;
    ++i;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (out.empty()) return std::string(name);
  return out;
}

}  // namespace kernalyse
