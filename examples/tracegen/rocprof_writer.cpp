// kernalyse-tracegen --format rocprof: one rank's planted workload as rocprofv3 JSON
// (`rocprofv3 --output-format json`, the layout rocprofiler-sdk's generateJSON.cpp writes and
// aggregator/importers/src/rocprof.cpp reads), so truth tests run on the AMD format too. What the
// format cannot carry is mapped as rocprofv3 would record it: a memset is a kernel dispatch (HIP's
// fill kernels), named as the memset; CUDA runtime calls become HIP_RUNTIME_API records under their
// own names; user and step ranges become roctx ranges (MARKER_CORE_RANGE_API). Kernels go on an
// HSA queue numbered as their stream; copies carry their stream as `stream_id`.
#include "rocprof_writer.h"

#include <zlib.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace {

using json = nlohmann::json;
using kernalyse::Kind;

// The kind table's indices as rocprofiler-sdk numbers them (rocprofiler_buffer_tracing_kind_t,
// as listed in strings.buffer_records of a real capture).
constexpr int kHip = 5, kCopy = 10, kDispatch = 11, kRange = 32;
constexpr int64_t kCpuAgent = 1, kGpuAgent0 = 100;  // agent handles (opaque in the format)
// Marker records need correlation ids of their own, apart from the launches'.
constexpr int64_t kMarkerCorr0 = int64_t{1} << 40;

json kind_table(const std::vector<std::string>& hip_ops) {
  json t = json::array();
  for (int i = 0; i <= kRange; ++i) t.push_back({{"kind", ""}, {"operations", json::array()}});
  t[0]["kind"] = "NONE";
  t[kHip] = {{"kind", "HIP_RUNTIME_API"}, {"operations", hip_ops}};
  t[kCopy] = {{"kind", "MEMORY_COPY"},
              {"operations",
               {"MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_HOST", "MEMORY_COPY_HOST_TO_DEVICE",
                "MEMORY_COPY_DEVICE_TO_HOST", "MEMORY_COPY_DEVICE_TO_DEVICE"}}};
  t[kDispatch] = {
      {"kind", "KERNEL_DISPATCH"},
      {"operations",
       {"KERNEL_DISPATCH_NONE", "KERNEL_DISPATCH_ENQUEUE", "KERNEL_DISPATCH_COMPLETE"}}};
  t[kRange] = {{"kind", "MARKER_CORE_RANGE_API"},
               {"operations",
                {"roctxMarkA", "roctxThreadRangeA", "roctxProcessRangeA", "roctxGetThreadId"}}};
  return t;
}

int copy_op(const std::string& name) {
  if (name.rfind("Memcpy HtoH", 0) == 0) return 1;
  if (name.rfind("Memcpy HtoD", 0) == 0) return 2;
  if (name.rfind("Memcpy DtoH", 0) == 0) return 3;
  if (name.rfind("Memcpy DtoD", 0) == 0) return 4;
  return 0;
}

json corr(int64_t c) { return {{"internal", c < 0 ? 0 : c}, {"external", 0}}; }

void write_text(const std::string& path, const std::string& text, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb6");
    bool ok = f && gzwrite(f, text.data(), static_cast<unsigned>(text.size())) ==
                       static_cast<int>(text.size());
    if (!f || gzclose(f) != Z_OK || !ok) throw std::runtime_error("cannot write " + path);
    return;
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(text.data(), 1, text.size(), f) != text.size() || std::fclose(f) != 0)
    throw std::runtime_error("cannot write " + path);
}

}  // namespace

void write_rocprof_rank(const kernalyse::Store& s, const std::string& path, bool gz) {
  const auto& a = s.activities;
  const auto& l = s.launches;
  const auto& an = s.annotations;
  const int64_t pid = l.size() ? l.pid[0] : 1;
  json kernels = json::array(), copies = json::array(), calls = json::array(),
       ranges = json::array(), symbols = json::array(), marker_names = json::array(),
       agents =
           json::array({{{"id", {{"handle", kCpuAgent}}}, {"type", 1}, {"product_name", "CPU"}}});
  std::map<std::string, int64_t> kernel_id;
  std::map<int32_t, bool> devices;
  for (size_t i = 0; i < a.size(); ++i) {
    const Kind k = static_cast<Kind>(a.kind[i]);
    if (!kernalyse::is_gpu_work(k)) continue;
    const std::string& name = s.strings.at(a.name_id[i]);
    const int64_t agent = kGpuAgent0 + a.device[i];
    devices[a.device[i]] = true;
    json r = {{"kind", k == Kind::Memcpy ? kCopy : kDispatch},
              {"thread_id", pid},
              {"correlation_id", corr(a.correlation[i])},
              {"start_timestamp", a.start_ns[i]},
              {"end_timestamp", a.end_ns[i]},
              {"stream_id", {{"handle", a.stream[i]}}}};
    if (k == Kind::Memcpy) {
      r["operation"] = copy_op(name);
      r["dst_agent_id"] = {{"handle", agent}};
      r["src_agent_id"] = {{"handle", agent}};
      r["bytes"] = 0;
      copies.push_back(std::move(r));
      continue;
    }
    auto [it, fresh] = kernel_id.emplace(name, static_cast<int64_t>(kernel_id.size()) + 1);
    if (fresh)
      symbols.push_back({{"kernel_id", it->second},
                         {"kernel_name", name + ".kd"},
                         {"formatted_kernel_name", name},
                         {"demangled_kernel_name", name + " [clone .kd]"},
                         {"truncated_kernel_name", name}});
    r["operation"] = 2;  // KERNEL_DISPATCH_COMPLETE
    r["dispatch_info"] = {{"agent_id", {{"handle", agent}}},
                          {"queue_id", {{"handle", a.stream[i]}}},
                          {"kernel_id", it->second},
                          {"dispatch_id", kernels.size() + 1}};
    kernels.push_back(std::move(r));
  }
  const kernalyse::RankInfo ri = s.ranks.empty() ? kernalyse::RankInfo{} : s.ranks[0];
  for (const auto& [d, _] : devices)
    agents.push_back({{"id", {{"handle", kGpuAgent0 + d}}},
                      {"type", 2},
                      {"logical_node_type_id", d},
                      {"gpu_index", d},
                      {"name", "gfx942"},
                      {"product_name", ri.device_name}});
  std::vector<std::string> hip_ops;
  std::map<std::string, int> hip_op;
  for (size_t i = 0; i < l.size(); ++i) {
    const std::string& name = s.strings.at(l.name_id[i]);
    auto [it, fresh] = hip_op.emplace(name, static_cast<int>(hip_ops.size()));
    if (fresh) hip_ops.push_back(name);
    calls.push_back({{"kind", kHip},
                     {"operation", it->second},
                     {"thread_id", l.tid[i]},
                     {"correlation_id", corr(l.correlation[i])},
                     {"start_timestamp", l.start_ns[i]},
                     {"end_timestamp", l.end_ns[i]}});
  }
  for (size_t i = 0; i < an.size(); ++i) {
    const auto k = static_cast<kernalyse::AnnotationKind>(an.kind[i]);
    if (k != kernalyse::AnnotationKind::Step && k != kernalyse::AnnotationKind::User) continue;
    const int64_t c = kMarkerCorr0 + static_cast<int64_t>(i);
    marker_names.push_back({{"key", c}, {"value", s.strings.at(an.name_id[i])}});
    ranges.push_back({{"kind", kRange},
                      {"operation", 1},
                      {"thread_id", an.tid[i]},
                      {"correlation_id", corr(c)},
                      {"start_timestamp", an.start_ns[i]},
                      {"end_timestamp", an.end_ns[i]}});
  }
  json tool = {{"metadata",
                // The host as the JSON form names it ("" when it does not), so both forms infer
                // clocks alike; the synthetic mark is kernalyse's own key (rocprofv3 writes none).
                {{"node", {{"hostname", ri.host}}},
                 {"pid", pid},
                 {"command", {"kernalyse-tracegen"}},
                 {"kernalyse_synthetic", ri.emulated}}},
               {"agents", agents},
               {"strings", {{"buffer_records", kind_table(hip_ops)}, {"marker_api", marker_names}}},
               {"kernel_symbols", symbols},
               {"buffer_records",
                {{"kernel_dispatch", kernels},
                 {"hip_api", calls},
                 {"hsa_api", json::array()},
                 {"marker_api", ranges},
                 {"memory_copy", copies}}}};
  // "rocprofiler-sdk-tool" must come first (the format sniff): nlohmann's object keeps keys
  // sorted, and it is the only top-level key.
  write_text(path, json{{"rocprofiler-sdk-tool", json::array({tool})}}.dump(), gz);
}
