// The in-memory form of a kernalyse store: columnar tables, int64 ns times, interned strings.
// The HDF5 layout (docs/store.md) mirrors these structs one dataset per column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kernalyse {

inline constexpr int kSchemaVersion = 2;  // 2: counters table, NCCL algo/proto/channels
inline constexpr int32_t kNoStep = -1;
inline constexpr int64_t kNoCorrelation = -1;

// What a device activity is (the `kind` column). HostOnStream: a CPU event that names a stream
// (e.g. a Triton launch record); not GPU work, kept only because HTA counts it (--compat hta).
enum class Kind : uint8_t {
  Kernel = 0,
  Memcpy = 1,
  Memset = 2,
  Sync = 3,
  Other = 4,
  HostOnStream = 5
};
// What it does (the `category` column), HTA-compatible buckets.
enum class Category : uint8_t { Computation = 0, Communication = 1, Memory = 2, Other = 3 };
// Annotation sources (the `annotations/kind` column).
enum class AnnotationKind : uint8_t { Step = 0, User = 1, GpuUser = 2, Nvtx = 3 };

const char* to_string(Kind k);
// Kernels, copies and memsets: what the native analyses count as GPU activity.
inline bool is_gpu_work(Kind k) {
  return k == Kind::Kernel || k == Kind::Memcpy || k == Kind::Memset;
}
const char* to_string(Category c);
const char* to_string(AnnotationKind k);

// Interned strings; id 0 is always the empty string.
class StringTable {
 public:
  StringTable();
  uint32_t intern(std::string_view s);
  const std::string& at(uint32_t id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }
  const std::vector<std::string>& all() const { return strings_; }
  // Replaces the content (reader use); rebuilds the index.
  void assign(std::vector<std::string> strings);

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const noexcept;
  };
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> index_;
};

// GPU-side activities (kernels, copies, memsets, syncs). Sorted by (rank, device, stream, start).
struct Activities {
  std::vector<int32_t> rank;
  std::vector<int32_t> device;
  std::vector<int32_t> stream;
  std::vector<uint8_t> kind;      // Kind
  std::vector<uint8_t> category;  // Category
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<uint32_t> name_id;
  std::vector<int64_t> correlation;  // kNoCorrelation if none
  std::vector<int32_t> step;         // ProfilerStep number, kNoStep if outside all steps

  size_t size() const { return start_ns.size(); }
  void reserve(size_t n);
};

// CPU runtime/driver API calls (launches), joined to activities by (rank, correlation).
struct LaunchCalls {
  std::vector<int32_t> rank;
  std::vector<int64_t> pid;
  std::vector<int64_t> tid;
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<uint32_t> name_id;
  std::vector<int64_t> correlation;
  std::vector<int32_t> step;

  size_t size() const { return start_ns.size(); }
};

// ProfilerStep#N, user annotations, GPU user annotations, NVTX ranges.
struct Annotations {
  std::vector<int32_t> rank;
  std::vector<uint8_t> kind;  // AnnotationKind
  std::vector<int64_t> pid;   // process (CPU) or device (GPU annotations)
  std::vector<int64_t> tid;   // thread (CPU) or stream (GPU annotations)
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<uint32_t> name_id;
  std::vector<int32_t> step;  // N for ProfilerStep#N, else kNoStep

  size_t size() const { return start_ns.size(); }
};

// NCCL metadata attached to one communication activity (row index into Activities).
struct NcclInfo {
  std::vector<uint64_t> activity;
  std::vector<uint32_t> collective_id;  // "allreduce", "_allgather_base", ...
  std::vector<int64_t> seq;             // -1 if unknown
  std::vector<uint32_t> pg_name_id;
  std::vector<uint32_t> pg_desc_id;
  std::vector<uint32_t> pg_ranks_id;  // "[0, 1]" as recorded
  std::vector<int32_t> group_size;    // -1 if unknown
  std::vector<int64_t> in_nelems;     // -1 if unknown
  std::vector<int64_t> out_nelems;
  std::vector<int64_t> msg_bytes;  // -1 if unknown
  std::vector<uint32_t> dtype_id;
  std::vector<uint64_t> comm_hash;  // communicator hash from the collector, 0 if unknown
  std::vector<int32_t> peer;        // p2p peer, -1 for collectives
  std::vector<int32_t> comm_rank;   // this rank's rank in the communicator, -1 if unknown
  std::vector<uint32_t> algo_id;    // "RING", "TREE", ... ("" if unknown)
  std::vector<uint32_t> proto_id;   // "LL", "LL128", "SIMPLE", ... ("" if unknown)
  std::vector<int32_t> n_channels;  // -1 if unknown

  size_t size() const { return activity.size(); }
};

// Per-device values over time, one row per change (a step function): GPU memory in use from
// the collector's allocation records, power when sampled, the profiler's memory events on
// import. Sorted by (rank, device, name, ts).
struct Counters {
  std::vector<int32_t> rank;
  std::vector<int32_t> device;
  std::vector<uint32_t> name_id;  // kCounterGpuMemory, ...
  std::vector<int64_t> ts_ns;
  std::vector<int64_t> value;  // integer units named by the counter (bytes, mW)

  size_t size() const { return ts_ns.size(); }
};
// Counter names (interned in the store's string table).
inline constexpr const char* kCounterGpuMemory = "gpu_memory_allocated_bytes";
inline constexpr const char* kCounterPower = "gpu_power_mw";

// PyTorch operator calls (`cpu_op` events recorded with `record_shapes`) that launched GPU work:
// one row per (op call, launch), joined to /launches and /activities by (rank, correlation). The
// op is the innermost one enclosing the launch (the launch's "External id"). Shapes are kept as
// the trace's JSON text; the performance model (analysis/perfmodel.h) parses them. Sorted by
// (rank, start_ns). Empty for sources without such events (collector, nsys, older stores).
struct Ops {
  std::vector<int32_t> rank;
  std::vector<int64_t> pid;
  std::vector<int64_t> tid;
  std::vector<int64_t> start_ns;
  std::vector<int64_t> end_ns;
  std::vector<uint32_t> name_id;      // "aten::addmm"
  std::vector<int64_t> external_id;   // the op call's id in the trace (one per call)
  std::vector<int64_t> correlation;   // the launch's correlation id
  std::vector<uint32_t> dims_id;      // "Input Dims" JSON text, "" if not recorded
  std::vector<uint32_t> types_id;     // "Input type" JSON text, "" if not recorded
  std::vector<uint32_t> concrete_id;  // "Concrete Inputs" JSON text, "" if not recorded

  size_t size() const { return start_ns.size(); }
};

// One row per rank: where its data came from and how its clock maps to the run's timeline.
struct RankInfo {
  int32_t rank = 0;
  int32_t world_size = -1;
  std::string host;
  std::string devices;          // "0" or "0,1"
  std::string device_name;      // from deviceProperties, "" if unknown
  std::string source;           // input file or spool
  int64_t base_time_ns = 0;     // absolute anchor of this rank's clock (epoch ns), 0 if unknown
  int64_t clock_offset_ns = 0;  // add to local time to get run time
  double clock_drift = 0.0;     // dimensionless (ns per ns), applied relative to sync point
  int64_t clock_uncertainty_ns = 0;  // ± bound on the alignment error, 0 if unknown
  std::string clock_method;          // "none (per-rank wall clock)", "mpi-pingpong", ...
  bool emulated = false;             // synthetic / emulated device data
  int64_t events_total = 0;
  int64_t events_malformed = 0;
  int64_t events_ignored = 0;         // well-formed but not kept (cpu_op, python_function, ...)
  int64_t records_dropped = 0;        // lost by kernalyse (buffer pool full, spool cut, ...)
  int64_t records_dropped_cupti = 0;  // CUPTI's own count (cuptiActivityGetNumDroppedRecords)
  // What the collector could record on this rank, one line: "cupti: 1 CUDA device",
  // "no CUDA device: ...", "emulated device", "imported" ...; "" if unknown (older stores).
  std::string collector_status;
};

// File-level attributes.
struct StoreAttrs {
  int schema_version = kSchemaVersion;
  std::string tool_version;
  std::string produced_by;  // "kernalyse-merge (kineto import)", "kernalyse-run", ...
  std::string command_line;
  std::string created_utc;
  std::string clock_domain;  // how timestamps across ranks relate
  bool emulated = false;
};

struct Store {
  StoreAttrs attrs;
  StringTable strings;
  Activities activities;
  LaunchCalls launches;
  Annotations annotations;
  NcclInfo nccl;
  Counters counters;
  Ops ops;
  std::vector<RankInfo> ranks;  // sorted by rank
};

// Which columns a reader loads; analyses ask only for what they use (peak RSS budget).
struct ColumnSelection {
  bool activities = true;
  bool activity_correlation = true;
  bool activity_step = true;
  bool launches = true;
  bool launch_detail = true;  // false: launches carry only rank, start_ns, correlation
  bool annotations = true;
  bool nccl = true;
  bool counters = true;
  bool ops = true;
  static ColumnSelection all() { return {}; }
};

// Joins per-rank stores into one; string ids are remapped. Fails on duplicate ranks.
Store merge_stores(std::vector<Store> parts);

// Fills the step columns from each rank's ProfilerStep#N annotations: launches and other
// annotations by CPU time; GPU work through its launch's correlation id (HTA's rule), else by
// its own start. Every producer (importer, collector) calls this one function.
void assign_steps(Store& s);

// Fills the nccl columns later schema versions added (comm_hash, peer, comm_rank, algo_id,
// proto_id, n_channels) with their "unknown" values when a producer left them empty.
void fill_optional_nccl_columns(NcclInfo& c);

// Sorts counters by (rank, device, name, ts), the name by its text (not its id, which differs
// between a rank's own table and a merged one), stably: same-ts rows keep their order.
void sort_counters(Counters& k, const StringTable& strings);

// Sorts ops by (rank, start_ns), stably.
void sort_ops(Ops& o);

// Sorts activities by (rank, device, stream, start, end), keeping nccl.activity consistent.
void sort_activities(Store& s);

}  // namespace kernalyse
