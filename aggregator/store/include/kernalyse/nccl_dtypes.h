// NCCL's datatype names (ncclDatatypeToString) → the names PyTorch/Kineto traces use (the store's
// one vocabulary, see dtype_bytes in aggregator/importers/src/kineto.cpp) and element sizes. One
// table: the collector's NCCL profiler plugin and the Nsight Systems NCCL-operation join read it.
// Header-only, no dependency: the collector reaches it through kernalyse::checked's include path.
#pragma once

#include <cstdint>
#include <cstring>

namespace kernalyse {

struct NcclDtype {
  const char* nccl;
  const char* name;
  int64_t size;
};

inline constexpr NcclDtype kNcclDtypes[] = {
    {"ncclInt8", "Char", 1},
    {"ncclUint8", "Byte", 1},
    {"ncclInt32", "Int", 4},
    {"ncclUint32", "UInt32", 4},
    {"ncclInt64", "Long", 8},
    {"ncclUint64", "UInt64", 8},
    {"ncclFloat16", "Half", 2},
    {"ncclFloat32", "Float", 4},
    {"ncclFloat64", "Double", 8},
    {"ncclBfloat16", "BFloat16", 2},
    {"ncclFloat8e4m3", "Float8_e4m3fn", 1},
    {"ncclFloat8e5m2", "Float8_e5m2", 1},
};

// The entry of an NCCL datatype name, or null.
inline const NcclDtype* find_nccl_dtype(const char* nccl) {
  if (!nccl) return nullptr;
  for (const auto& d : kNcclDtypes)
    if (std::strcmp(d.nccl, nccl) == 0) return &d;
  return nullptr;
}

}  // namespace kernalyse
