// rocprofv3 JSON importer. The layout, as rocprofiler-sdk's JSON writer emits it
// (ROCm/rocprofiler-sdk source/lib/output/generateJSON.cpp, write_json), as its Python JSON tests
// read it (strings.buffer_records[kind].operations[op]; strings.marker_api as {key: correlation
// id, value: text} for MARKER_CORE_RANGE_API records), and as a real capture holds it (the one
// AMD-AGI/TraceLens tests with, tests/rocprof/908_results.json.gz, here
// ../shared/traces/rocprof/mi350_train_908_results.json.gz):
//   {"rocprofiler-sdk-tool": [ {            one element per process
//     "metadata": {"node": {"hostname"}, "pid", "init_time", "fini_time", "command", "config"},
//     "agents": [{"id": {"handle"}, "type": 1 CPU | 2 GPU, "gpu_index"?, "logical_node_type_id",
//                 "product_name", ...}],
//     "strings": {"buffer_records": [{"kind": "KERNEL_DISPATCH", "operations": [...]}, ...],
//                 "marker_api": [{"key": correlation id, "value": roctx text}], ...},
//     "kernel_symbols": [{"kernel_id", "kernel_name", "formatted_kernel_name", ...}],
//     "buffer_records": {"kernel_dispatch": [{"kind", "operation", "thread_id",
//                            "correlation_id": {"internal", "external"}, "start_timestamp",
//                            "end_timestamp", "dispatch_info": {"agent_id": {"handle"},
//                            "queue_id": {"handle"}, "kernel_id", ...}}],
//                        "hip_api" | "rccl_api" | "marker_api" | "hsa_api": [{"kind",
//                            "operation", "correlation_id", "start_timestamp", "end_timestamp",
//                            "thread_id"}],
//                        "memory_copy": [{..., "dst_agent_id", "src_agent_id", "bytes"}], ...}
//   } ]}
// Timestamps are rocprofiler_get_timestamp() ns: a host clock from an unspecified start, not epoch
// ns (the MI350 capture starts at 63,856 s); they are kept as recorded. The file is streamed
// through nlohmann's SAX parser: only one record (an agent, a symbol, a buffer record, a name list
// entry) is a DOM at a time, so memory grows with the rows kept, not with the file. Names are
// resolved after the whole file is read, so the order of the members does not matter.
#include "kernalyse/rocprof.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <streambuf>
#include <unordered_map>

#include "kernalyse/checked.h"
#include "kernalyse/classify.h"
#include "trace_input.h"

namespace kernalyse {
namespace {

using json = nlohmann::json;

// Largest number of JSON values one record may hold (docs/limits.md): a record is a few dozen.
constexpr int64_t kMaxRecordValues = int64_t{1} << 20;

struct NotRocprof {};

// Input's bytes as a streambuf, for nlohmann's stream adapter (it reads with sbumpc).
class InputBuf : public std::streambuf {
 public:
  InputBuf(Input* in, Progress* progress) : in_(in), progress_(progress), buf_(size_t{1} << 20) {}
  int64_t bytes = 0;

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    size_t n = in_->read(buf_.data(), buf_.size());
    if (progress_) {
      int64_t pos = std::min(in_->disk_pos(), in_->size());
      progress_->advance(pos - reported_);
      reported_ = pos;
    }
    if (n == 0) return traits_type::eof();
    bytes += static_cast<int64_t>(n);
    setg(buf_.data(), buf_.data(), buf_.data() + n);
    return traits_type::to_int_type(buf_[0]);
  }

 private:
  Input* in_;
  Progress* progress_;
  int64_t reported_ = 0;
  std::vector<char> buf_;
};

// ---------------------------------------------------------------- field access
bool get_i64(const json& o, const char* key, int64_t* v) {
  if (!o.is_object()) return false;
  auto it = o.find(key);
  if (it == o.end()) return false;
  if (it->is_number_unsigned()) {
    uint64_t u = it->get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  if (!it->is_number_integer()) return false;
  *v = it->get<int64_t>();
  return true;
}
// {"key": {"handle": N}}
bool get_handle(const json& o, const char* key, int64_t* v) {
  if (!o.is_object()) return false;
  auto it = o.find(key);
  return it != o.end() && get_i64(*it, "handle", v);
}
std::string get_str(const json& o, const char* key) {
  if (!o.is_object()) return {};
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}
bool fits_i32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

// ---------------------------------------------------------------- records kept until the end
struct PendingGpu {  // a kernel dispatch or a memory copy
  Kind kind;
  int64_t start, end, agent, src_agent, stream, kernel, kind_id, op, corr;
};
struct PendingCall {  // a HIP / RCCL API call, or a roctx range
  int64_t start, end, tid, kind_id, op, corr;
};
struct Agent {
  int64_t type = 0, index = -1;
  std::string product;
};

// What a JSON value is to the importer, told by where it sits.
enum class Role : uint8_t {
  Root,
  ToolList,
  Tool,
  Strings,
  OpKinds,
  MarkerNames,
  BufferRecords,
  Records,
  Agents,
  Symbols,
  Skip
};
enum class Unit : uint8_t { Metadata, Agent, Symbol, OpKind, MarkerName, Record };

class Sax : public nlohmann::json_sax<json> {
 public:
  explicit Sax(std::string path) : path_(std::move(path)) {}

  // Parsed records (filled as units complete).
  json metadata;
  std::vector<std::pair<int64_t, Agent>> agents;  // handle, agent (file order)
  std::unordered_map<int64_t, std::string> symbols;
  std::vector<std::string> kind_names;
  std::vector<std::vector<std::string>> op_names;
  std::unordered_map<int64_t, std::string> marker_names;
  std::vector<PendingGpu> gpu;
  std::vector<PendingCall> calls, markers;
  int64_t records = 0, malformed = 0, ignored = 0;
  bool seen_tool = false;

  bool null() override { return value(json()); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override { return value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return value(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override { return value(json(std::move(v))); }
  bool binary(binary_t&) override { return value(json()); }
  bool key(string_t& k) override {
    if (capturing()) {
      dom_key_ = std::move(k);
    } else {
      frames_.back().key = std::move(k);
    }
    return true;
  }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t pos, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    std::string what = ex.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> after the prefix
    size_t c = what.find("] ");
    if (c != std::string::npos) what = what.substr(c + 2);
    throw Error(path_ + ": invalid JSON near byte " + std::to_string(pos) + ": " + what);
  }

 private:
  struct Frame {
    Role role;
    std::string key;
    int64_t index = -1;  // array elements started
  };
  bool capturing() const { return !dom_stack_.empty(); }

  // The role of a value starting now, from its container and key; sets unit_ for captured ones.
  Role child_role(bool container, bool array, bool* capture) {
    *capture = false;
    if (frames_.empty()) {
      if (!container || array) throw NotRocprof{};
      return Role::Root;
    }
    Frame& f = frames_.back();
    ++f.index;
    auto cap = [&](Unit u) {
      *capture = true;
      unit_ = u;
      return Role::Skip;
    };
    switch (f.role) {
      case Role::Root:
        if (f.key != "rocprofiler-sdk-tool" || !container) return Role::Skip;
        seen_tool = true;
        return array ? Role::ToolList : Role::Tool;
      case Role::ToolList:
        return container && !array ? Role::Tool : Role::Skip;
      case Role::Tool:
        if (f.key == "metadata") return cap(Unit::Metadata);
        if (f.key == "agents" && array) return Role::Agents;
        if (f.key == "kernel_symbols" && array) return Role::Symbols;
        if (f.key == "strings" && container && !array) return Role::Strings;
        if (f.key == "buffer_records" && container && !array) return Role::BufferRecords;
        return Role::Skip;
      case Role::Strings:
        if (f.key == "buffer_records" && array) return Role::OpKinds;
        if (f.key == "marker_api" && array) return Role::MarkerNames;
        return Role::Skip;
      case Role::BufferRecords:
        if (!array) return Role::Skip;
        record_kind_ = f.key;
        return Role::Records;
      case Role::Agents:
        return cap(Unit::Agent);
      case Role::Symbols:
        return cap(Unit::Symbol);
      case Role::OpKinds:
        op_index_ = f.index;
        return cap(Unit::OpKind);
      case Role::MarkerNames:
        return cap(Unit::MarkerName);
      case Role::Records:
        return cap(Unit::Record);
      case Role::Skip:
        return Role::Skip;
    }
    return Role::Skip;
  }

  bool value(json&& v) {
    if (capturing()) return add(std::move(v));
    bool capture = false;
    child_role(false, false, &capture);
    if (capture) deliver(std::move(v));
    return true;
  }
  bool open(bool array) {
    if (capturing()) {
      json* parent = dom_stack_.back();
      json child = array ? json::array() : json::object();
      if (++dom_values_ > kMaxRecordValues)
        throw Error(path_ + ": a record holds more than " + std::to_string(kMaxRecordValues) +
                    " JSON values (the limit, docs/limits.md)");
      if (parent->is_array()) {
        parent->push_back(std::move(child));
        dom_stack_.push_back(&parent->back());
      } else {
        dom_stack_.push_back(&((*parent)[dom_key_] = std::move(child)));
      }
      return true;
    }
    bool capture = false;
    Role r = child_role(true, array, &capture);
    if (capture) {
      dom_ = array ? json::array() : json::object();
      dom_values_ = 1;
      dom_stack_.push_back(&dom_);
      return true;
    }
    frames_.push_back({r, {}, -1});
    return true;
  }
  bool close() {
    if (capturing()) {
      dom_stack_.pop_back();
      if (dom_stack_.empty()) deliver(std::move(dom_));
      return true;
    }
    frames_.pop_back();
    return true;
  }
  bool add(json&& v) {
    if (++dom_values_ > kMaxRecordValues)
      throw Error(path_ + ": a record holds more than " + std::to_string(kMaxRecordValues) +
                  " JSON values (the limit, docs/limits.md)");
    json* top = dom_stack_.back();
    if (top->is_array()) {
      top->push_back(std::move(v));
    } else {
      (*top)[dom_key_] = std::move(v);
    }
    return true;
  }

  void deliver(json&& u);
  void on_agent(const json& a);
  void on_record(const json& r);

  std::string path_;
  std::vector<Frame> frames_;
  json dom_;
  std::vector<json*> dom_stack_;
  std::string dom_key_;
  int64_t dom_values_ = 0;
  Unit unit_ = Unit::Record;
  std::string record_kind_;
  int64_t op_index_ = 0;
};

void Sax::deliver(json&& u) {
  switch (unit_) {
    case Unit::Metadata:
      metadata = std::move(u);
      break;
    case Unit::Agent:
      on_agent(u);
      break;
    case Unit::Symbol: {
      int64_t id;
      if (!get_i64(u, "kernel_id", &id)) break;
      // formatted_kernel_name is the demangled name without the ".kd" descriptor suffix (what
      // Kineto shows for the same kernel); the others are fallbacks of older tool versions.
      for (const char* k : {"formatted_kernel_name", "truncated_kernel_name",
                            "demangled_kernel_name", "kernel_name"}) {
        std::string n = get_str(u, k);
        if (!n.empty()) {
          symbols[id] = std::move(n);
          break;
        }
      }
      break;
    }
    case Unit::OpKind: {
      if (op_index_ < 0 || op_index_ > 4096) break;  // kinds are a short enum
      size_t i = static_cast<size_t>(op_index_);
      if (kind_names.size() <= i) kind_names.resize(i + 1), op_names.resize(i + 1);
      kind_names[i] = get_str(u, "kind");
      if (u.is_object() && u.contains("operations") && u["operations"].is_array())
        for (const auto& o : u["operations"])
          op_names[i].push_back(o.is_string() ? o.get<std::string>() : std::string());
      break;
    }
    case Unit::MarkerName: {
      int64_t k;
      if (get_i64(u, "key", &k)) marker_names[k] = get_str(u, "value");
      break;
    }
    case Unit::Record:
      on_record(u);
      break;
  }
}

void Sax::on_agent(const json& a) {
  int64_t handle, type = 0;
  if (!get_handle(a, "id", &handle)) return;
  Agent g;
  get_i64(a, "type", &type);
  g.type = type;
  // HIP's device ordinal: gpu_index in recent rocprofiler-sdk, else the agent's index among the
  // GPU agents (logical_node_type_id); the order of the GPU agents when neither is there.
  if (!get_i64(a, "gpu_index", &g.index)) get_i64(a, "logical_node_type_id", &g.index);
  g.product = get_str(a, "product_name");
  if (g.product.empty()) g.product = get_str(a, "name");
  agents.emplace_back(handle, std::move(g));
}

void Sax::on_record(const json& r) {
  ++records;
  const std::string& k = record_kind_;
  const bool kernel = k == "kernel_dispatch", copy = k == "memory_copy";
  const bool call = k == "hip_api" || k == "rccl_api", marker = k == "marker_api";
  if (!kernel && !copy && !call && !marker) {
    ++ignored;  // hsa_api, memory_allocation, scratch_memory, samples: no row of ours
    return;
  }
  int64_t start, end, kind_id = -1, op = -1, corr = kNoCorrelation;
  if (!get_i64(r, "start_timestamp", &start) || !get_i64(r, "end_timestamp", &end) || end < start ||
      !time_in_range(start) || !time_in_range(end)) {
    ++malformed;
    return;
  }
  get_i64(r, "kind", &kind_id);
  get_i64(r, "operation", &op);
  if (r.contains("correlation_id") && !get_i64(r["correlation_id"], "internal", &corr))
    corr = kNoCorrelation;
  if (call || marker) {
    int64_t tid = 0;
    get_i64(r, "thread_id", &tid);
    (call ? calls : markers).push_back({start, end, tid, kind_id, op, corr});
    return;
  }
  PendingGpu g{kernel ? Kind::Kernel : Kind::Memcpy, start, end, -1, -1, 0, -1, kind_id, op, corr};
  bool ok;
  if (kernel) {
    const json* d = r.contains("dispatch_info") ? &r["dispatch_info"] : nullptr;
    ok = d && get_handle(*d, "agent_id", &g.agent) && get_handle(*d, "queue_id", &g.stream) &&
         get_i64(*d, "kernel_id", &g.kernel) && fits_i32(g.stream);
  } else {
    // A copy names no queue: it goes on its HIP stream (stream_id, in rocprofv3's memory copy
    // records since ROCm 6.4), else on stream 0, of the GPU it touches.
    if (!get_handle(r, "stream_id", &g.stream)) g.stream = 0;
    ok = get_handle(r, "dst_agent_id", &g.agent) && get_handle(r, "src_agent_id", &g.src_agent) &&
         fits_i32(g.stream);
  }
  if (!ok) {
    ++malformed;
    return;
  }
  gpu.push_back(g);
}

// ---------------------------------------------------------------- the store
class Builder {
 public:
  Builder(const std::string& path, const ImportOptions& opt, Sax& sax)
      : path_(path), opt_(opt), sax_(sax), cls_(opt.classifier ? opt.classifier : &default_) {}
  Store run(ImportStats* stats);

 private:
  std::string op_name(int64_t kind, int64_t op) const {
    if (kind >= 0 && static_cast<size_t>(kind) < sax_.op_names.size()) {
      const auto& ops = sax_.op_names[static_cast<size_t>(kind)];
      if (op >= 0 && static_cast<size_t>(op) < ops.size() && !ops[static_cast<size_t>(op)].empty())
        return ops[static_cast<size_t>(op)];
    }
    return "operation " + std::to_string(kind) + "." + std::to_string(op);
  }
  std::string kind_name(int64_t kind) const {
    return kind >= 0 && static_cast<size_t>(kind) < sax_.kind_names.size()
               ? sax_.kind_names[static_cast<size_t>(kind)]
               : std::string();
  }
  void gpu_rows();
  void call_rows(int64_t pid);
  std::string copy_name(const PendingGpu& g) const;

  std::string path_;
  const ImportOptions& opt_;
  Sax& sax_;
  Classifier default_;
  const Classifier* cls_;
  Store store_;
  std::unordered_map<int64_t, Agent> agents_;
  int64_t malformed_ = 0, unnamed_ = 0;
};

std::string Builder::copy_name(const PendingGpu& g) const {
  // MEMORY_COPY_HOST_TO_DEVICE ... as Kineto names copies ("Memcpy HtoD").
  static const std::map<std::string, std::string> kDir = {{"MEMORY_COPY_HOST_TO_HOST", "HtoH"},
                                                          {"MEMORY_COPY_HOST_TO_DEVICE", "HtoD"},
                                                          {"MEMORY_COPY_DEVICE_TO_HOST", "DtoH"},
                                                          {"MEMORY_COPY_DEVICE_TO_DEVICE", "DtoD"}};
  auto it = kDir.find(op_name(g.kind_id, g.op));
  return it == kDir.end() ? "Memcpy" : "Memcpy " + it->second;
}

void Builder::gpu_rows() {
  Activities& a = store_.activities;
  a.reserve(sax_.gpu.size());
  std::vector<int8_t> category_of;
  for (const PendingGpu& g : sax_.gpu) {
    // The GPU the work ran on: the dispatch's agent; for a copy, its destination if a GPU, else
    // its source.
    auto gpu_of = [&](int64_t h) -> const Agent* {
      auto it = agents_.find(h);
      return it != agents_.end() && it->second.type == 2 ? &it->second : nullptr;
    };
    const Agent* dev = gpu_of(g.agent);
    if (!dev && g.kind == Kind::Memcpy) dev = gpu_of(g.src_agent);
    if (!dev || !fits_i32(dev->index)) {
      ++malformed_;
      continue;
    }
    std::string name;
    if (g.kind == Kind::Kernel) {
      auto it = sax_.symbols.find(g.kernel);
      if (it != sax_.symbols.end()) {
        name = it->second;
      } else {
        name = "kernel_id " + std::to_string(g.kernel);
        ++unnamed_;
      }
    } else {
      name = copy_name(g);
    }
    uint32_t id = store_.strings.intern(name);
    if (id >= category_of.size()) category_of.resize(id + 1, -1);
    if (category_of[id] < 0) category_of[id] = static_cast<int8_t>(cls_->classify(g.kind, name));
    size_t row = a.size();
    a.rank.push_back(0);
    a.device.push_back(static_cast<int32_t>(dev->index));
    a.stream.push_back(static_cast<int32_t>(g.stream));
    a.kind.push_back(static_cast<uint8_t>(g.kind));
    a.category.push_back(static_cast<uint8_t>(category_of[id]));
    a.start_ns.push_back(g.start);
    a.end_ns.push_back(g.end);
    a.name_id.push_back(id);
    a.correlation.push_back(g.corr);
    if (g.kind != Kind::Kernel || category_of[id] != static_cast<int8_t>(Category::Communication))
      continue;
    NcclName nn = parse_nccl_name(name);
    NcclInfo& n = store_.nccl;
    n.activity.push_back(row);
    n.collective_id.push_back(store_.strings.intern(nn.collective));
    n.algo_id.push_back(store_.strings.intern(nn.algo));
    n.proto_id.push_back(store_.strings.intern(nn.proto));
  }
}

void Builder::call_rows(int64_t pid) {
  LaunchCalls& l = store_.launches;
  for (const PendingCall& c : sax_.calls) {
    l.rank.push_back(0);
    l.pid.push_back(pid);
    l.tid.push_back(c.tid);
    l.start_ns.push_back(c.start);
    l.end_ns.push_back(c.end);
    l.name_id.push_back(store_.strings.intern(op_name(c.kind_id, c.op)));
    l.correlation.push_back(c.corr);
  }
  // roctx ranges (push/pop and start/stop pairs, which rocprofv3 records as one
  // MARKER_CORE_RANGE_API record each) become annotations; marks and control calls are points.
  static const std::regex step_re(R"(ProfilerStep#(\d+))");
  Annotations& an = store_.annotations;
  for (const PendingCall& m : sax_.markers) {
    if (kind_name(m.kind_id) != "MARKER_CORE_RANGE_API") {
      ++sax_.ignored;
      continue;
    }
    auto it = sax_.marker_names.find(m.corr);
    const std::string text = it == sax_.marker_names.end() ? std::string() : it->second;
    std::smatch sm;
    int32_t step = kNoStep;
    int64_t n;
    bool is_step =
        std::regex_match(text, sm, step_re) &&
        std::from_chars(&*sm[1].first, &*sm[1].first + sm[1].length(), n).ec == std::errc() &&
        n <= INT32_MAX;
    if (is_step) step = static_cast<int32_t>(n);
    an.rank.push_back(0);
    an.kind.push_back(static_cast<uint8_t>(is_step ? AnnotationKind::Step : AnnotationKind::User));
    an.pid.push_back(pid);
    an.tid.push_back(m.tid);
    an.start_ns.push_back(m.start);
    an.end_ns.push_back(m.end);
    an.name_id.push_back(store_.strings.intern(text));
    an.step.push_back(step);
  }
}

Store Builder::run(ImportStats* stats) {
  int64_t order = 0;
  for (auto& [h, g] : sax_.agents) {
    if (g.type == 2 && g.index < 0) g.index = order;
    if (g.type == 2) ++order;
    agents_.emplace(h, g);
  }
  int64_t pid = 0;
  get_i64(sax_.metadata, "pid", &pid);
  gpu_rows();
  call_rows(pid);

  std::optional<int32_t> rank = opt_.rank;
  if (!rank) {
    rank = rank_from_filename(path_);
    if (rank && stats)
      stats->warnings.push_back(path_ + ": rank " + std::to_string(*rank) +
                                " taken from the file name");
  }
  if (!rank && opt_.only_input) {
    rank = 0;
    if (stats)
      stats->notes.push_back(path_ +
                             ": no rank in the trace or its name; the only input, "
                             "taken as rank 0");
  }
  if (!rank)
    throw NoRankError(path_ +
                      ": cannot tell the rank (rocprofv3 records none, none in the file "
                      "name); pass --rank N");
  if (*rank < 0) throw Error(path_ + ": negative rank " + std::to_string(*rank));
  Activities& a = store_.activities;
  for (auto* col : {&a.rank, &store_.launches.rank, &store_.annotations.rank})
    std::fill(col->begin(), col->end(), *rank);
  sort_activities(store_);
  assign_steps(store_);

  RankInfo info;
  info.rank = *rank;
  info.source = path_;
  if (sax_.metadata.is_object() && sax_.metadata.contains("node"))
    info.host = get_str(sax_.metadata["node"], "hostname");
  std::vector<int32_t> devs(a.device.begin(), a.device.end());
  std::sort(devs.begin(), devs.end());
  devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
  for (size_t i = 0; i < devs.size(); ++i) info.devices += (i ? "," : "") + std::to_string(devs[i]);
  for (const auto& [h, g] : agents_)
    if (g.type == 2 && !devs.empty() && g.index == devs[0]) info.device_name = g.product;
  info.clock_method = "none (rocprofiler-sdk host timestamps, ns; not aligned across ranks)";
  // kernalyse-tracegen --format rocprof marks its synthetic files (never rocprofv3's own).
  const bool synthetic = sax_.metadata.is_object() &&
                         sax_.metadata.contains("kernalyse_synthetic") &&
                         sax_.metadata["kernalyse_synthetic"] == true;
  info.emulated = synthetic;
  store_.attrs.emulated = synthetic;
  info.collector_status = "imported (rocprofv3 JSON)";
  const int64_t malformed = sax_.malformed + malformed_;
  info.events_total = sax_.records;
  info.events_malformed = malformed;
  info.events_ignored = sax_.ignored;
  store_.ranks = {info};
  if (stats) {
    stats->events += sax_.records;
    stats->malformed += malformed;
    if (malformed > 0)
      stats->warnings.push_back(path_ + ": " + std::to_string(malformed) + " of " +
                                std::to_string(sax_.records) + " records malformed and skipped");
    if (unnamed_ > 0)
      stats->warnings.push_back(path_ + ": " + std::to_string(unnamed_) +
                                " kernel dispatches name a kernel_id without a kernel_symbols "
                                "entry (named \"kernel_id N\")");
  }
  return std::move(store_);
}

// Parses the stream with `sax`; NotRocprof if the top level is not a rocprofv3 object.
void parse(InputBuf& buf, Sax& sax, const std::string& path) {
  std::istream is(&buf);
  try {
    json::sax_parse(is, &sax, nlohmann::json::input_format_t::json, true);
  } catch (const NotRocprof&) {
    throw Error(path + ": not a rocprofv3 JSON file (no top-level \"rocprofiler-sdk-tool\")");
  }
  if (!sax.seen_tool)
    throw Error(path + ": not a rocprofv3 JSON file (no top-level \"rocprofiler-sdk-tool\")");
}

}  // namespace

bool is_rocprof_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  try {
    Input in(path, 4096);
    char head[256];
    size_t n = 0, r;
    while (n < sizeof head && (r = in.read(head + n, sizeof head - n)) > 0) n += r;
    std::string_view s(head, n);
    auto skip_ws = [&s] {
      while (!s.empty() && (s[0] == ' ' || s[0] == '\n' || s[0] == '\r' || s[0] == '\t'))
        s.remove_prefix(1);
    };
    skip_ws();
    if (s.empty() || s[0] != '{') return false;
    s.remove_prefix(1);
    skip_ws();
    return s.substr(0, 22) == "\"rocprofiler-sdk-tool\"";
  } catch (const Error&) {
    return false;  // unreadable or broken gzip: the Kineto importer says what is wrong
  }
}

Store import_rocprof_file(const std::string& path, const ImportOptions& opt, ImportStats* stats) {
  Input in(path);
  InputBuf buf(&in, opt.progress);
  Sax sax(path);
  parse(buf, sax, path);
  if (stats) stats->bytes += buf.bytes;
  Builder b(path, opt, sax);
  return b.run(stats);
}

}  // namespace kernalyse
