// The store's overview for every analysis report (kernalyse-merge, docs/json.md "ranks").
#include <algorithm>
#include <map>

#include "kernalyse/analysis.h"

namespace kernalyse {

void store_overview(const Store& s, Report* out) {
  if (s.attrs.emulated)
    out->headline.push_back("DATA IS SYNTHETIC/EMULATED: no real GPU recorded these events");
  std::string ranks;
  for (const auto& r : s.ranks) {
    if (!ranks.empty()) ranks += ',';
    ranks += std::to_string(r.rank);
  }
  out->headline.push_back("ranks: " + ranks + "; clocks: " + s.attrs.clock_domain);
  // What each rank's collector could record, and what it lost: said, never silent.
  std::map<std::pair<int32_t, int32_t>, int64_t> peak_mem, peak_power;  // (rank, device) → peak
  {
    const Counters& k = s.counters;
    for (size_t i = 0; i < k.size(); ++i) {
      const std::string& name = s.strings.at(k.name_id[i]);
      auto* peaks = name == kCounterGpuMemory ? &peak_mem
                    : name == kCounterPower   ? &peak_power
                                              : nullptr;
      if (!peaks) continue;
      int64_t& m = (*peaks)[{k.rank[i], k.device[i]}];
      m = std::max(m, k.value[i]);
    }
  }
  for (const auto& r : s.ranks) {
    const std::string& st = r.collector_status;
    if (!st.empty() && st.rfind("cupti:", 0) != 0 && !r.emulated)
      out->headline.push_back("rank " + std::to_string(r.rank) + ": " + st);
    if (r.records_dropped + r.records_dropped_cupti > 0)
      out->headline.push_back("rank " + std::to_string(r.rank) + ": " +
                              std::to_string(r.records_dropped + r.records_dropped_cupti) +
                              " records dropped (CUPTI " + std::to_string(r.records_dropped_cupti) +
                              ", kernalyse " + std::to_string(r.records_dropped) + ")");
  }
  if (!peak_mem.empty()) {
    std::string line = "peak GPU memory in use:";
    for (const auto& [rd, bytes] : peak_mem)
      line += " rank " + std::to_string(rd.first) + " GPU " + std::to_string(rd.second) + " " +
              format_bytes(bytes) + ";";
    line.pop_back();
    out->headline.push_back(line);
  }
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& r : s.ranks) {
    nlohmann::json mem = nlohmann::json::object(), power = nlohmann::json::object();
    for (const auto& [rd, bytes] : peak_mem)
      if (rd.first == r.rank) mem[std::to_string(rd.second)] = bytes;
    for (const auto& [rd, mw] : peak_power)
      if (rd.first == r.rank) power[std::to_string(rd.second)] = mw;
    jr.push_back({{"rank", r.rank},
                  {"source", r.source},
                  {"host", r.host},
                  {"devices", r.devices},
                  {"device_name", r.device_name},
                  {"emulated", r.emulated},
                  {"clock_method", r.clock_method},
                  {"clock_offset_ns", r.clock_offset_ns},
                  {"clock_drift", r.clock_drift},
                  {"clock_uncertainty_ns", r.clock_uncertainty_ns},
                  {"events_malformed", r.events_malformed},
                  {"collector_status", r.collector_status},
                  {"rank_source", r.rank_source},
                  {"records_dropped", r.records_dropped},
                  {"records_dropped_cupti", r.records_dropped_cupti},
                  {"peak_gpu_memory_bytes", mem},
                  {"peak_gpu_power_mw", power}});
  }
  out->json["ranks"] = jr;
  out->json["emulated"] = s.attrs.emulated;
}

}  // namespace kernalyse
