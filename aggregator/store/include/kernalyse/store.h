// The in-memory form of a kernalyse store: columnar tables, int64 ns times, interned strings.
// The HDF5 layout (docs/store.md) mirrors these structs one dataset per column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace kernalyse {

// 2: counters table, NCCL algo/proto/channels; 3: fixed-length string attributes (docs/store.md)
inline constexpr int kSchemaVersion = 3;
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
  // The index: open addressing with linear probing over a power-of-two table of id + 1 (0:
  // empty), each string's hash kept beside it. An import interns every event's name and shapes
  // (tens of thousands of lookups a second file of a few MB), and std::unordered_map's node per
  // string, its key copy and its byte-at-a-time hash were a tenth of such an import's CPU.
  uint32_t find_or_add(std::string_view s, uint64_t h);
  void rebuild(size_t slots);  // a power of two
  void grow();
  std::vector<std::string> strings_;
  std::vector<uint64_t> hashes_;  // by id
  std::vector<uint32_t> slots_;
};

// ---------------------------------------------------------------------------------------------
// The column lists: one per table, the only place a column is named. Everything else derives
// from them: the struct members, the HDF5 datasets (same names, this order; docs/store.md),
// reading and writing (serial and parallel), merging, sorting, the length checks, the filling
// of columns a producer left empty, and the exports' extra args.
//
// X(type, name, unknown, rule, role):
//   type     element type
//   unknown  the value a row holds when its producer does not know it (defined only here)
//   rule     Required: every producer fills it (a key; `unknown` unused);
//            Defaulted: a producer may leave the column empty, fill_unknown_columns() fills it;
//            Added: as Defaulted, and absent from files written before it existed (readers
//            fill it in).
//   role     what the derived store operations do with it (ColumnRole below): Start, End and
//            Instant columns are times (int64 ns) that clock alignment moves and HTA's view
//            rounds; a Rank column is the global rank, renumbered when node stores are merged
//            and the one the table's times are moved by; a String column holds ids into
//            Store::strings, remapped when stores merge; a Row column holds row indices into
//            /activities, remapped when activities are sorted or merged; Key and Value are
//            carried as they are (Key: an identity or a join key, Value: a measurement).
// A new column is a line here plus the producer that fills it. Comments must be /* */ ones.

// GPU-side activities (kernels, copies, memsets, syncs). Sorted by (rank, device, stream, start).
#define KERNALYSE_ACTIVITY_COLUMNS(X)                                    \
  X(int32_t, rank, 0, Required, Rank)                                    \
  X(int32_t, device, 0, Required, Key)                                   \
  X(int32_t, stream, 0, Required, Key)                                   \
  X(uint8_t, kind, Kind::Other, Defaulted, Value)         /* Kind */     \
  X(uint8_t, category, Category::Other, Defaulted, Value) /* Category */ \
  X(int64_t, start_ns, 0, Required, Start)                               \
  X(int64_t, end_ns, 0, Required, End)                                   \
  X(uint32_t, name_id, 0, Defaulted, String)                             \
  X(int64_t, correlation, kNoCorrelation, Defaulted, Key)                \
  X(int32_t, step, kNoStep, Defaulted, Key) /* ProfilerStep number */

// CPU runtime/driver API calls (launches), joined to activities by (rank, correlation).
#define KERNALYSE_LAUNCH_COLUMNS(X)                       \
  X(int32_t, rank, 0, Required, Rank)                     \
  X(int64_t, pid, 0, Required, Key)                       \
  X(int64_t, tid, 0, Required, Key)                       \
  X(int64_t, start_ns, 0, Required, Start)                \
  X(int64_t, end_ns, 0, Required, End)                    \
  X(uint32_t, name_id, 0, Defaulted, String)              \
  X(int64_t, correlation, kNoCorrelation, Defaulted, Key) \
  X(int32_t, step, kNoStep, Defaulted, Key)

// ProfilerStep#N, user annotations, GPU user annotations, NVTX ranges.
#define KERNALYSE_ANNOTATION_COLUMNS(X)                                                \
  X(int32_t, rank, 0, Required, Rank)                                                  \
  X(uint8_t, kind, 0, Required, Value) /* AnnotationKind */                            \
  X(int64_t, pid, 0, Required, Key)    /* process (CPU) or device (GPU annotations) */ \
  X(int64_t, tid, 0, Required, Key)    /* thread (CPU) or stream (GPU annotations) */  \
  X(int64_t, start_ns, 0, Required, Start)                                             \
  X(int64_t, end_ns, 0, Required, End)                                                 \
  X(uint32_t, name_id, 0, Defaulted, String)                                           \
  X(int32_t, step, kNoStep, Defaulted, Key) /* N for ProfilerStep#N */

// NCCL metadata attached to one communication activity (row index into Activities).
#define KERNALYSE_NCCL_COLUMNS(X)                                                           \
  X(uint64_t, activity, 0, Required, Row)                                                   \
  X(uint32_t, collective_id, 0, Required, String) /* "allreduce", "_allgather_base", ... */ \
  X(int64_t, seq, -1, Defaulted, Key)                                                       \
  X(uint32_t, pg_name_id, 0, Defaulted, String)                                             \
  X(uint32_t, pg_desc_id, 0, Defaulted, String)                                             \
  X(uint32_t, pg_ranks_id, 0, Defaulted, String) /* "[0, 1]" as recorded */                 \
  X(int32_t, group_size, -1, Defaulted, Value)                                              \
  X(int64_t, in_nelems, -1, Defaulted, Value)                                               \
  X(int64_t, out_nelems, -1, Defaulted, Value)                                              \
  X(int64_t, msg_bytes, -1, Defaulted, Value)                                               \
  X(uint32_t, dtype_id, 0, Defaulted, String)                                               \
  X(uint64_t, comm_hash, 0, Added, Key)   /* communicator hash from the collector */        \
  X(int32_t, peer, -1, Added, Value)      /* p2p peer; -1 for collectives too */            \
  X(int32_t, comm_rank, -1, Added, Value) /* this rank's rank in the communicator */        \
  X(uint32_t, algo_id, 0, Added, String)  /* "RING", "TREE", ... */                         \
  X(uint32_t, proto_id, 0, Added, String) /* "LL", "LL128", "SIMPLE", ... */                \
  X(int32_t, n_channels, -1, Added, Value)                                                  \
  X(uint64_t, op_id, 0, Added, Key)           /* NCCL's operation id; 0 unknown */          \
  X(uint32_t, in_splits_id, 0, Added, String) /* "In split size" as recorded */             \
  X(uint32_t, out_splits_id, 0, Added, String)

// Per-device values over time, one row per change (a step function): GPU memory in use from
// the collector's allocation records, power when sampled, the profiler's memory events on
// import. Sorted by (rank, device, name, ts).
#define KERNALYSE_COUNTER_COLUMNS(X)                                     \
  X(int32_t, rank, 0, Required, Rank)                                    \
  X(int32_t, device, 0, Required, Key)                                   \
  X(uint32_t, name_id, 0, Required, String) /* kCounterGpuMemory, ... */ \
  X(int64_t, ts_ns, 0, Required, Instant)                                \
  X(int64_t, value, 0, Required, Value) /* integer units named by the counter (bytes, mW) */

// PyTorch operator calls (`cpu_op` events recorded with `record_shapes`) that launched GPU work:
// one row per (op call, launch), joined to /launches and /activities by (rank, correlation). The
// op is the innermost one enclosing the launch (the launch's "External id"). Shapes are kept as
// the trace's JSON text; the performance model (analysis/perfmodel.h) parses them. Sorted by
// (rank, start_ns). Empty for sources without such events (collector, nsys, older stores).
#define KERNALYSE_OP_COLUMNS(X)                                                                  \
  X(int32_t, rank, 0, Required, Rank)                                                            \
  X(int64_t, pid, 0, Required, Key)                                                              \
  X(int64_t, tid, 0, Required, Key)                                                              \
  X(int64_t, start_ns, 0, Required, Start)                                                       \
  X(int64_t, end_ns, 0, Required, End)                                                           \
  X(uint32_t, name_id, 0, Required, String)   /* "aten::addmm" */                                \
  X(int64_t, external_id, 0, Required, Key)   /* the op call's id in the trace (one per call) */ \
  X(int64_t, correlation, 0, Required, Key)   /* the launch's correlation id */                  \
  X(uint32_t, dims_id, 0, Defaulted, String)  /* "Input Dims" JSON text */                       \
  X(uint32_t, types_id, 0, Defaulted, String) /* "Input type" JSON text */                       \
  X(uint32_t, concrete_id, 0, Defaulted, String) /* "Concrete Inputs" JSON text */

// One row per rank (/ranks): where its data came from and how its clock maps to the run's
// timeline. `bool` is stored as uint8, std::string as a variable-length string.
#define KERNALYSE_RANK_FIELDS(X)                                                                   \
  X(int32_t, rank, 0, Required, Rank)                                                              \
  X(int32_t, world_size, -1, Required, Value)                                                      \
  X(std::string, host, "", Required, Value)                                                        \
  X(std::string, devices, "", Required, Value)     /* "0" or "0,1" */                              \
  X(std::string, device_name, "", Required, Value) /* from deviceProperties, "" if unknown */      \
  X(std::string, source, "", Required, Value)      /* input file or spool */                       \
  X(int64_t, base_time_ns, 0, Required,                                                            \
    Value) /* absolute anchor of this rank's clock (epoch ns) */                                   \
  X(int64_t, clock_offset_ns, 0, Required, Value) /* add to local time to get run time */          \
  X(double, clock_drift, 0.0, Required, Value) /* ns per ns, applied relative to the sync point */ \
  X(int64_t, clock_uncertainty_ns, 0, Required, Value) /* ± bound on the alignment error */       \
  X(std::string, clock_method, "", Required, Value)    /* "none (per-rank wall clock)", ... */     \
  X(bool, emulated, false, Required, Value)            /* synthetic / emulated device data */      \
  X(int64_t, events_total, 0, Required, Value)                                                     \
  X(int64_t, events_malformed, 0, Required, Value)                                                 \
  X(int64_t, events_ignored, 0, Required, Value)  /* well-formed but not kept (cpu_op, ...) */     \
  X(int64_t, records_dropped, 0, Required, Value) /* lost by kernalyse (buffer pool full, ...) */  \
  X(int64_t, records_dropped_cupti, 0, Added, Value) /* cuptiActivityGetNumDroppedRecords */       \
  /* What the collector could record on this rank, one line: "cupti: 1 CUDA device", "no CUDA      \
     device: ...", "emulated device", "imported" ...; "" if unknown (older stores). */             \
  X(std::string, collector_status, "", Added, Value)                                               \
  /* What told this rank: "env:OMPI_COMM_WORLD_RANK", "nccl", "file name", "assumed" ...; "" if    \
     unknown (Nsight Systems imports set it; docs/store.md). */                                    \
  X(std::string, rank_source, "", Added, Value)

// How a column behaves when a producer or a file does not provide it (see above).
enum class ColumnRule : uint8_t { Required, Defaulted, Added };
// What a column is to the operations that walk the lists (see above).
enum class ColumnRole : uint8_t { Rank, Start, End, Instant, String, Row, Key, Value };
inline constexpr bool is_time(ColumnRole r) {
  return r == ColumnRole::Start || r == ColumnRole::End || r == ColumnRole::Instant;
}

// What the visitors pass along with each column.
template <class T>
struct ColumnDef {
  const char* name;
  T unknown;
  ColumnRule rule;
  ColumnRole role;
  bool required() const { return rule == ColumnRule::Required; }
};

#define KERNALYSE_COLUMN_MEMBER(T, name, unknown, rule, role) std::vector<T> name;

struct Activities {
  KERNALYSE_ACTIVITY_COLUMNS(KERNALYSE_COLUMN_MEMBER)
  size_t size() const { return start_ns.size(); }
  void reserve(size_t n);
};

struct LaunchCalls {
  KERNALYSE_LAUNCH_COLUMNS(KERNALYSE_COLUMN_MEMBER)
  size_t size() const { return start_ns.size(); }
};

struct Annotations {
  KERNALYSE_ANNOTATION_COLUMNS(KERNALYSE_COLUMN_MEMBER)
  size_t size() const { return start_ns.size(); }
};

struct NcclInfo {
  KERNALYSE_NCCL_COLUMNS(KERNALYSE_COLUMN_MEMBER)
  size_t size() const { return activity.size(); }
};

struct Counters {
  KERNALYSE_COUNTER_COLUMNS(KERNALYSE_COLUMN_MEMBER)
  size_t size() const { return ts_ns.size(); }
};
// Counter names (interned in the store's string table).
inline constexpr const char* kCounterGpuMemory = "gpu_memory_allocated_bytes";
inline constexpr const char* kCounterPower = "gpu_power_mw";

struct Ops {
  KERNALYSE_OP_COLUMNS(KERNALYSE_COLUMN_MEMBER)
  // By rank, a key every reader loads: the analyses read ops without their times
  // (ColumnSelection::ops_detail).
  size_t size() const { return rank.size(); }
};

#define KERNALYSE_FIELD_MEMBER(T, name, unknown, rule, role) T name{unknown};

struct RankInfo {
  KERNALYSE_RANK_FIELDS(KERNALYSE_FIELD_MEMBER)
};

// for_each_column(table, f): f(const ColumnDef<T>&, std::vector<T>& column) for each column of
// `table` (const or not) in list (= on-disk) order.
// for_each_column_pair(a, b, f): f(def, a's column, b's column) for two tables of one type.
#define KERNALYSE_VISIT_COLUMN(T, name, unknown, rule, role) \
  f(ColumnDef<T>{#name, static_cast<T>(unknown), ColumnRule::rule, ColumnRole::role}, t.name);
#define KERNALYSE_VISIT_COLUMN_PAIR(T, name, unknown, rule, role)                             \
  f(ColumnDef<T>{#name, static_cast<T>(unknown), ColumnRule::rule, ColumnRole::role}, t.name, \
    u.name);
#define KERNALYSE_COLUMN_VISITOR(Table, LIST)                          \
  template <class Tab, class F>                                        \
  requires std::is_same_v<std::remove_const_t<Tab>, Table>             \
  void for_each_column(Tab& t, F&& f) { LIST(KERNALYSE_VISIT_COLUMN) } \
  template <class Tab, class Uab, class F>                             \
  requires std::is_same_v<std::remove_const_t<Tab>, Table> &&          \
      std::is_same_v<std::remove_const_t<Uab>, Table>                  \
  void for_each_column_pair(Tab& t, Uab& u, F&& f) { LIST(KERNALYSE_VISIT_COLUMN_PAIR) }
KERNALYSE_COLUMN_VISITOR(Activities, KERNALYSE_ACTIVITY_COLUMNS)
KERNALYSE_COLUMN_VISITOR(LaunchCalls, KERNALYSE_LAUNCH_COLUMNS)
KERNALYSE_COLUMN_VISITOR(Annotations, KERNALYSE_ANNOTATION_COLUMNS)
KERNALYSE_COLUMN_VISITOR(NcclInfo, KERNALYSE_NCCL_COLUMNS)
KERNALYSE_COLUMN_VISITOR(Counters, KERNALYSE_COUNTER_COLUMNS)
KERNALYSE_COLUMN_VISITOR(Ops, KERNALYSE_OP_COLUMNS)
#undef KERNALYSE_COLUMN_VISITOR
#undef KERNALYSE_VISIT_COLUMN
#undef KERNALYSE_VISIT_COLUMN_PAIR

// for_each_rank_field(f): f(const ColumnDef<M>&, M RankInfo::*member) for each RankInfo field
// in on-disk order.
template <class F>
void for_each_rank_field(F&& f) {
#define KERNALYSE_VISIT_FIELD(T, name, unknown, rule, role) \
  f(ColumnDef<T>{#name, T(unknown), ColumnRule::rule, ColumnRole::role}, &RankInfo::name);
  KERNALYSE_RANK_FIELDS(KERNALYSE_VISIT_FIELD)
#undef KERNALYSE_VISIT_FIELD
}

// Fills every non-Required column that is empty while its table has rows with its unknown
// value (a producer that does not know the column, a file that predates it).
template <class Tab>
void fill_unknown_columns(Tab& t) {
  const size_t n = t.size();
  if (!n) return;
  for_each_column(t, [n](const auto& def, auto& col) {
    if (col.empty() && !def.required()) col.assign(n, def.unknown);
  });
}

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

// The row tables of a store, by group name, in file order.
#define KERNALYSE_TABLES(X) X(activities) X(launches) X(annotations) X(nccl) X(counters) X(ops)

// for_each_table(store, f): f(name, table) for every row table of `store` (const or not);
// for_each_table_pair(a, b, f): f(name, a's table, b's table).
template <class S, class F>
requires std::is_same_v<std::remove_const_t<S>, Store>
void for_each_table(S& s, F&& f) {
#define KERNALYSE_VISIT_TABLE(name) f(#name, s.name);
  KERNALYSE_TABLES(KERNALYSE_VISIT_TABLE)
#undef KERNALYSE_VISIT_TABLE
}
template <class S, class T, class F>
requires std::is_same_v<std::remove_const_t<S>, Store> &&
    std::is_same_v<std::remove_const_t<T>, Store>
void for_each_table_pair(S& s, T& t, F&& f) {
#define KERNALYSE_VISIT_TABLE(name) f(#name, s.name, t.name);
  KERNALYSE_TABLES(KERNALYSE_VISIT_TABLE)
#undef KERNALYSE_VISIT_TABLE
}

// fill_unknown_columns for every table. Every producer goes through it (assign_steps calls it),
// as does merge_stores for each part: a producer fills only the columns it knows.
void fill_unknown_columns(Store& s);

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
  bool ops_detail = true;  // false: ops without pid, tid, start_ns, end_ns (no analysis reads them)
  bool ops_shapes = true;  // false: ops without dims_id, types_id, concrete_id (only the roofline)
  static ColumnSelection all() { return {}; }
};

// Joins per-rank stores into one; string ids are remapped. Fails on duplicate ranks.
Store merge_stores(std::vector<Store> parts);

// Each rank's ProfilerStep#N annotations, and the step a time falls in: the rule of
// assign_steps, also for an import that assigns steps row by row (kineto_spill.h).
class StepMarks {
 public:
  explicit StepMarks(const Annotations& an);
  bool empty() const { return steps_.empty(); }
  // The step whose [start, end) holds t on `rank`, else kNoStep.
  int32_t at(int32_t rank, int64_t t) const;

 private:
  struct Mark {
    int64_t start, end;
    int32_t step;
  };
  std::unordered_map<int32_t, std::vector<Mark>> steps_;
};

// Fills the columns the producer left empty (fill_unknown_columns), then the step columns from
// each rank's ProfilerStep#N annotations: launches and other annotations by CPU time; GPU work
// through its launch's correlation id (HTA's rule), else by its own start. Every producer
// (importer, collector) calls this one function.
void assign_steps(Store& s);

// Sorts counters by (rank, device, name, ts), the name by its text (not its id, which differs
// between a rank's own table and a merged one), stably: same-ts rows keep their order.
void sort_counters(Counters& k, const StringTable& strings);

// Adds `by` to every Rank column of every table and to /ranks (node stores merged into one run).
void shift_ranks(Store& s, int32_t by);

// The table's Rank column (the rank its times are moved by), or null for a table without one.
template <class Tab>
auto* rank_column(Tab& t) {
  using Col =
      std::conditional_t<std::is_const_v<Tab>, const std::vector<int32_t>, std::vector<int32_t>>;
  Col* out = nullptr;
  for_each_column(t, [&](const auto& def, auto& col) {
    if constexpr (std::is_same_v<std::decay_t<decltype(col)>, std::vector<int32_t>>)
      if (def.role == ColumnRole::Rank) out = &col;
  });
  return out;
}

// Sorts ops by (rank, start_ns), stably.
void sort_ops(Ops& o);
// Sorts launches by (rank, start_ns), stably (merge_stores' order).
void sort_launches(LaunchCalls& l);
// Sorts annotations by (rank, start_ns), stably (merge_stores' order).
void sort_annotations(Annotations& a);

// Sorts activities by (rank, device, stream, start, end), keeping nccl.activity consistent.
void sort_activities(Store& s);
// Sorts the nccl rows by activity index, stably (lets analyses binary-search them); the last
// step of sort_activities.
void sort_nccl_by_activity(NcclInfo& c);

}  // namespace kernalyse
