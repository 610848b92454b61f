// Nsight Systems SQLite importer. Every table is read row by row through one prepared statement
// (sqlite3_step), straight into the store's columns: memory grows with the rows kept, never with
// a temporary copy of a table. Strings are looked up in StringIds only on a cache miss (one
// cache entry per distinct name id). Nothing in the file is trusted: a table or column may be
// missing (schema 2.9 .. 3.30 differ), any cell may hold another type than its declaration says,
// string ids may dangle; such rows are counted as malformed and skipped. Nor is the schema
// trusted (issue 30): only plain tables are read, SQLite runs with its defences for untrusted
// files, and its work is bounded by the file's size (Db; docs/limits.md).
#include "kernalyse/nsys.h"

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <unordered_map>

#include "kernalyse/classify.h"
#include "kernalyse/nsys_ranks.h"
#include "kernalyse/store_io.h"
#include "nccl_ops.h"

// pragma_table_list (3.37), sqlite_schema (3.33), SQLITE_DBCONFIG_TRUSTED_SCHEMA (3.31).
#if SQLITE_VERSION_NUMBER < 3037000
#error "the Nsight Systems importer needs SQLite 3.37 or newer"
#endif

namespace kernalyse {
namespace {

// Work an import may ask of SQLite for a file of `bytes` bytes, in VM instructions (the progress
// handler's unit): a fixed allowance plus kStepsPerByte per byte. Every query we run is a scan of
// one table, a count, or a lookup by key, so the honest work is a few passes over the file: the
// real exports in ../shared/traces/nsys take at most 0.11 steps per byte (docs/limits.md). Past the
// budget the file is refused: only a crafted file (a table without the index a lookup needs, a
// schema object we failed to screen) gets there.
constexpr int64_t kStepsPerByte = 16, kStepsFixed = int64_t{10} << 20, kStepsPerTick = 1000;
// Processes with GPU work in one report (one rank each): a node's, with room to spare.
constexpr size_t kMaxProcesses = 4096;

class Db {
 public:
  explicit Db(const std::string& path) : path_(path) {
    std::error_code ec;
    auto size = std::filesystem::file_size(path, ec);
    bytes_ = ec ? 0 : static_cast<int64_t>(std::min<uintmax_t>(size, INT64_MAX / kStepsPerByte));
    int rc =
        sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) {
      std::string m = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
      sqlite3_close(db_);
      throw Error(path + ": cannot open as an SQLite database: " + m);
    }
    harden();
  }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() { sqlite3_close(db_); }
  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }
  // Rows one query may return: a table b-tree cell is at least 4 bytes (2-byte pointer, payload
  // size, rowid or key, record header), so no table in this file holds more.
  int64_t max_rows() const { return bytes_ / 4 + 16; }
  [[noreturn]] void fail(const std::string& what) const {
    if (sqlite3_errcode(db_) == SQLITE_INTERRUPT && ticks_ > budget_ticks_)
      throw Error(path_ + ": reading it takes more than " +
                  std::to_string(budget_ticks_ * kStepsPerTick) +
                  " SQLite steps, more than a file of " + std::to_string(bytes_) +
                  " bytes can need (a crafted file; docs/limits.md)");
    throw Error(path_ + ": " + what + " (" + sqlite3_errmsg(db_) + ")");
  }

 private:
  // The file is untrusted: SQLite's defences for that case (sqlite.org/security.html). Read only,
  // defensive mode, no extension loading, schema SQL (views, triggers, generated columns, virtual
  // tables in them) not trusted to call functions with side effects, views and triggers disabled
  // outright (we never read a view; columns_of refuses one by name first, with a clear message),
  // no attached databases, no value longer than the file, cell sizes checked as pages are read,
  // and a budget of VM steps (kStepsPerByte) for the whole import.
  void harden() {
    for (int op : {SQLITE_DBCONFIG_DEFENSIVE, SQLITE_DBCONFIG_TRUSTED_SCHEMA,
                   SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, SQLITE_DBCONFIG_ENABLE_TRIGGER,
                   SQLITE_DBCONFIG_ENABLE_VIEW}) {
      int want = op == SQLITE_DBCONFIG_DEFENSIVE ? 1 : 0, got = -1;
      if (sqlite3_db_config(db_, op, want, &got) != SQLITE_OK || got != want)
        fail("cannot set SQLite's defensive options");
    }
    sqlite3_limit(db_, SQLITE_LIMIT_ATTACHED, 0);
    sqlite3_limit(db_, SQLITE_LIMIT_LENGTH,
                  static_cast<int>(std::clamp<int64_t>(bytes_, 1 << 20, 1000000000)));
    if (sqlite3_exec(db_, "PRAGMA cell_size_check = ON", nullptr, nullptr, nullptr) != SQLITE_OK)
      fail("cannot set SQLite's defensive options");
    budget_ticks_ = (kStepsFixed + kStepsPerByte * bytes_) / kStepsPerTick;
    sqlite3_progress_handler(db_, static_cast<int>(kStepsPerTick), &Db::tick, this);
  }
  static int tick(void* self) {
    auto* db = static_cast<Db*>(self);
    return ++db->ticks_ > db->budget_ticks_;
  }

  std::string path_;
  sqlite3* db_ = nullptr;
  int64_t bytes_ = 0;
  int64_t ticks_ = 0, budget_ticks_ = 0;
};

class Stmt {
 public:
  Stmt(const Db& db, const std::string& sql) : db_(db) {
    if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &st_, nullptr) != SQLITE_OK)
      db.fail("not a readable Nsight Systems export");
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(st_); }
  bool step() {
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) {
      if (++rows_ > db_.max_rows())
        throw Error(db_.path() + ": a query returned more rows than a file of its size can hold");
      // Each cell's type and integer value read once per row: the column API calls dominate the
      // import's CPU time otherwise (1 M kernel rows per second needs it).
      n_ = std::min(sqlite3_column_count(st_), kMaxCols);
      for (int c = 0; c < n_; ++c) {
        type_[c] = sqlite3_column_type(st_, c);
        int_[c] = type_[c] == SQLITE_INTEGER;
        v_[c] = int_[c] ? sqlite3_column_int64(st_, c) : 0;
      }
      return true;
    }
    if (rc == SQLITE_DONE) return false;
    db_.fail("corrupt or unreadable SQLite data");
  }
  void reset() {
    sqlite3_reset(st_);
    rows_ = 0;
  }
  void bind(int i, int64_t v) { sqlite3_bind_int64(st_, i, v); }
  void bind(int i, const std::string& v) {
    sqlite3_bind_text(st_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  bool is_int(int c) const { return c < n_ && int_[c]; }
  bool is_null(int c) const { return c < n_ ? type_[c] == SQLITE_NULL : true; }
  // Bytes of a BLOB or TEXT cell, "" for any other type.
  std::string_view bytes(int c) const {
    if (c >= n_ || (type_[c] != SQLITE_BLOB && type_[c] != SQLITE_TEXT)) return {};
    const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, c));
    int n = sqlite3_column_bytes(st_, c);
    return p && n > 0 ? std::string_view(p, static_cast<size_t>(n)) : std::string_view();
  }
  int64_t i64(int c) const { return c < n_ ? v_[c] : 0; }
  // Text of a TEXT cell, "" for any other type (never a conversion of a number or blob).
  std::string_view text(int c) const {
    if (sqlite3_column_type(st_, c) != SQLITE_TEXT) return {};
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, c));
    int n = sqlite3_column_bytes(st_, c);
    return p && n > 0 ? std::string_view(p, static_cast<size_t>(n)) : std::string_view();
  }

 private:
  static constexpr int kMaxCols = 16;
  const Db& db_;
  sqlite3_stmt* st_ = nullptr;
  int64_t rows_ = 0;
  int n_ = 0;
  int type_[kMaxCols] = {};
  bool int_[kMaxCols] = {};
  int64_t v_[kMaxCols] = {};
};

// Only a table is read where a table is expected. A view runs the file's own SELECT (an endless
// recursive CTE hangs the import), a virtual table a module's code, and a trigger or index of that
// name is no table either; Nsight Systems writes plain tables (other tools add views beside them,
// e.g. Extra-P's EXTRAP_* views: those are never read, so they are no reason to refuse the file).
void require_table(const Db& db, const std::string& table) {
  std::string type;
  {
    Stmt q(db, "SELECT type FROM pragma_table_list(?)");  // table, view, virtual, shadow
    q.bind(1, table);
    if (q.step()) type = q.text(0);
  }
  if (type.empty()) {
    Stmt q(db, "SELECT type FROM sqlite_schema WHERE name = ? COLLATE NOCASE LIMIT 1");
    q.bind(1, table);
    if (!q.step()) return;  // absent
    type = q.text(0);
  }
  if (type == "table" || type == "shadow") return;
  throw Error(db.path() + ": " + table + " is " + (type == "index" ? "an " : "a ") +
              (type.empty() ? "schema object" : type) + (type == "virtual" ? " table" : "") +
              ", not a table (Nsight Systems exports hold tables; refused unread)");
}

// A table's column names; empty when the table does not exist. A generated column is computed by
// the file's SQL on every read (a deterministic function over a huge zeroblob, say): refused.
std::set<std::string> columns_of(const Db& db, const std::string& table) {
  require_table(db, table);
  Stmt q(db, "SELECT name, hidden FROM pragma_table_xinfo(?)");
  q.bind(1, table);
  std::set<std::string> out;
  while (q.step()) {
    if (q.is_int(1) && (q.i64(1) == 2 || q.i64(1) == 3))
      throw Error(db.path() + ": column " + std::string(q.text(0)) + " of " + table +
                  " is a generated column (computed by the file's SQL; refused unread)");
    out.emplace(q.text(0));
  }
  return out;
}

// Rows in a table (SQLite counts them walking the b-tree: a real count, not a stored claim),
// capped: a capacity hint that spares the columns' growth copies, never trusted beyond that.
size_t row_hint(const Db& db, const std::string& table) {
  Stmt q(db, "SELECT count(*) FROM \"" + table + "\"");
  return q.step() && q.is_int(0) && q.i64(0) > 0
             ? static_cast<size_t>(std::min<int64_t>({q.i64(0), db.max_rows(), 1 << 26}))
             : 0;
}

// "SELECT "a", NULL, ... FROM "T"": the listed columns the table has, NULL for the others.
std::string select(const std::set<std::string>& have, const std::vector<std::string>& cols,
                   const std::string& table, const std::string& tail = "") {
  std::string s = "SELECT ";
  for (size_t i = 0; i < cols.size(); ++i)
    s += (i ? ", " : "") + (have.count(cols[i]) ? "\"" + cols[i] + "\"" : std::string("NULL"));
  return s + " FROM \"" + table + "\"" + tail;
}

// nsys's serialized GlobalId: hw << 56 | vm << 40 | pid << 24 | tid (docs: "Serialized GlobalId").
int64_t gid_pid(int64_t g) { return (g >> 24) & 0xFFFFFF; }
int64_t gid_tid(int64_t g) { return g & 0xFFFFFF; }

// Copy and memset names as Kineto writes them, from CUPTI's enums (ENUM_CUDA_MEMCPY_OPER,
// ENUM_CUDA_MEM_KIND): "Memcpy HtoD (Pinned -> Device)", "Memset (Device)"; without the memory
// kinds (older exports) "Memcpy HtoD", "Memset".
std::string copy_name(int64_t kind, int64_t src, int64_t dst, bool memset) {
  static const char* kCopy[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  static const char* kMem[] = {"Unknown", "Pageable", "Pinned",        "Device",
                               "Array",   "Managed",  "Device Static", "Managed Static"};
  auto mem = [](int64_t k) { return k >= 0 && k < 8 ? kMem[k] : "Unknown"; };
  if (memset) return dst < 0 ? "Memset" : std::string("Memset (") + mem(dst) + ")";
  std::string n = std::string("Memcpy ") + (kind >= 0 && kind < 11 ? kCopy[kind] : "Unknown");
  if (src >= 0 && dst >= 0) n += std::string(" (") + mem(src) + " -> " + mem(dst) + ")";
  return n;
}

bool parse_i64(std::string_view t, int64_t* v) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '"')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '"')) t.remove_suffix(1);
  auto r = std::from_chars(t.data(), t.data() + t.size(), *v);
  return !t.empty() && r.ec == std::errc() && r.ptr == t.data() + t.size();
}

class Importer {
 public:
  Importer(const std::string& path, const ImportOptions& opt)
      : db_(path),
        opt_(opt),
        classifier_(opt.classifier ? opt.classifier : &default_cls_),
        step_re_(opt.step_range.empty() ? std::string(R"(ProfilerStep#(\d+))") : opt.step_range) {
    if (step_re_.mark_count() < 1)
      throw Error("--step-range " + opt.step_range +
                  ": needs one capture group for the step number");
    if (columns_of(db_, "StringIds").count("value"))
      string_q_.emplace(db_, "SELECT value FROM StringIds WHERE id = ?");
  }

  Store run(ImportStats* stats, std::vector<NsysProcess>* procs);

 private:
  // Store string id of an nsys StringIds id; false if the id does not resolve.
  bool string_id(int64_t nsys_id, uint32_t* out) {
    auto it = strings_.find(nsys_id);
    if (it != strings_.end()) {
      *out = it->second;
      return true;
    }
    if (!string_q_) return false;
    string_q_->reset();
    string_q_->bind(1, nsys_id);
    if (!string_q_->step()) return false;
    uint32_t id = store_.strings.intern(string_q_->text(0));
    strings_.emplace(nsys_id, id);
    *out = id;
    return true;
  }
  Category category(Kind k, uint32_t name) {
    if (name >= category_of_.size()) category_of_.resize(name + 1, -1);
    if (category_of_[name] < 0)
      category_of_[name] = static_cast<int8_t>(classifier_->classify(k, store_.strings.at(name)));
    return static_cast<Category>(category_of_[name]);
  }
  void add_activity(Kind k, const Stmt& q, uint32_t name, int pid_col);
  void kernels();
  void copies(const std::string& table, Kind k);
  void runtime(const std::string& table);
  void nvtx();
  void nccl_operations(ImportStats* stats);
  struct NvtxLabel {
    uint32_t name;
    AnnotationKind kind;
    int32_t step;
  };
  NvtxLabel nvtx_label(std::string name, int64_t domain,
                       const std::unordered_map<int64_t, std::string>& domains);
  void metadata(ImportStats* stats);
  // Rank evidence (nsys_ranks.h): per process, and the processes of a report that holds several.
  void comm_init_payload(const Stmt& q, int64_t domain, int64_t pid);
  std::vector<int64_t> process_pids() const;
  void split_processes(const std::vector<int64_t>& pids);
  void file_claims(NsysProcess* p);
  void process_claims(std::vector<NsysProcess>& procs);
  RankInfo rank_info(int32_t index, std::vector<int32_t> devs, const std::string& version,
                     int64_t session);
  std::string device_name(int64_t cuda_id);

  Db db_;
  ImportOptions opt_;
  Classifier default_cls_;
  const Classifier* classifier_;
  std::regex step_re_;
  std::optional<Stmt> string_q_;
  std::unordered_map<int64_t, uint32_t> strings_;
  std::vector<int8_t> category_of_;
  std::unordered_map<uint32_t, std::array<uint32_t, 3>>
      nccl_names_;  // name → collective, algo, proto
  Store store_;
  int64_t events_ = 0, malformed_ = 0, ignored_ = 0;
  int64_t min_time_ = INT64_MAX;
  bool synthetic_ = false;
  std::vector<int64_t> act_pid_;  // per activity row: its process (globalPid), -1 if unknown
  // pid → (ranks, rank) of its largest communicator's ncclCommInitRank payload
  std::map<int64_t, std::pair<int64_t, int32_t>> init_rank_;
  std::optional<std::map<std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>>> rank_fields_;
  std::map<int64_t, std::string> device_names_;  // CUDA device id → name, looked up once
};

// Columns 0..4 of every GPU-activity query: start, end, deviceId, streamId, correlationId.
const std::vector<std::string> kActivityCols = {"start", "end", "deviceId", "streamId",
                                                "correlationId"};

void Importer::add_activity(Kind k, const Stmt& q, uint32_t name, int pid_col) {
  Activities& a = store_.activities;
  act_pid_.push_back(q.is_int(pid_col) ? gid_pid(q.i64(pid_col)) : -1);
  a.rank.push_back(0);
  a.device.push_back(static_cast<int32_t>(q.i64(2)));
  a.stream.push_back(static_cast<int32_t>(q.i64(3)));
  a.kind.push_back(static_cast<uint8_t>(k));
  a.category.push_back(static_cast<uint8_t>(category(k, name)));
  a.start_ns.push_back(q.i64(0));
  a.end_ns.push_back(q.i64(1));
  a.name_id.push_back(name);
  a.correlation.push_back(q.is_int(4) ? q.i64(4) : kNoCorrelation);
  min_time_ = std::min(min_time_, q.i64(0));
}

bool valid_activity(const Stmt& q) {
  return q.is_int(0) && q.is_int(1) && q.is_int(2) && q.is_int(3) && q.i64(1) >= q.i64(0) &&
         q.i64(2) >= 0 && q.i64(2) <= INT32_MAX && q.i64(3) >= 0 && q.i64(3) <= INT32_MAX &&
         (q.is_null(4) || q.is_int(4));
}

void Importer::kernels() {
  auto have = columns_of(db_, "CUPTI_ACTIVITY_KIND_KERNEL");
  if (have.empty())
    throw Error(db_.path() +
                ": no CUDA kernel table (CUPTI_ACTIVITY_KIND_KERNEL): the report was "
                "recorded without CUDA tracing (nsys profile --trace=cuda)");
  auto cols = kActivityCols;
  cols.insert(cols.end(), {"demangledName", "shortName", "globalPid"});
  Stmt q(db_, select(have, cols, "CUPTI_ACTIVITY_KIND_KERNEL"));
  store_.activities.reserve(row_hint(db_, "CUPTI_ACTIVITY_KIND_KERNEL"));
  uint32_t name;
  while (q.step()) {
    ++events_;
    bool named =
        (q.is_int(5) && string_id(q.i64(5), &name)) || (q.is_int(6) && string_id(q.i64(6), &name));
    if (!valid_activity(q) || !named) {
      ++malformed_;
      continue;
    }
    size_t row = store_.activities.size();
    add_activity(Kind::Kernel, q, name, 7);
    if (store_.activities.category[row] != static_cast<uint8_t>(Category::Communication)) continue;
    // Parsed once per name: every row may name one megabyte-long string (docs/limits.md).
    auto [it, fresh] = nccl_names_.try_emplace(name);
    if (fresh) {
      NcclName nn = parse_nccl_name(store_.strings.at(name));
      // What the name tells; the other columns stay "unknown" (fill_unknown_columns).
      it->second = {store_.strings.intern(nn.collective), store_.strings.intern(nn.algo),
                    store_.strings.intern(nn.proto)};
    }
    NcclInfo& n = store_.nccl;
    n.activity.push_back(row);
    n.collective_id.push_back(it->second[0]);
    n.algo_id.push_back(it->second[1]);
    n.proto_id.push_back(it->second[2]);
  }
}

void Importer::copies(const std::string& table, Kind k) {
  auto have = columns_of(db_, table);
  if (have.empty()) return;
  auto cols = kActivityCols;
  if (k == Kind::Memset)
    cols.insert(cols.end(), {"memKind", "memKind", "memKind", "globalPid"});
  else
    cols.insert(cols.end(), {"copyKind", "srcKind", "dstKind", "globalPid"});
  Stmt q(db_, select(have, cols, table));
  std::unordered_map<int64_t, uint32_t> names;  // (kind, src, dst) → name id: a handful
  while (q.step()) {
    ++events_;
    if (!valid_activity(q)) {
      ++malformed_;
      continue;
    }
    auto small = [&](int c) {
      return q.is_int(c) && q.i64(c) >= 0 && q.i64(c) < 64 ? q.i64(c) : -1;
    };
    int64_t ck = small(5), src = small(6), dst = small(7);
    int64_t key = ((ck + 1) << 16) | ((src + 1) << 8) | (dst + 1);
    auto it = names.find(key);
    if (it == names.end())
      it = names.emplace(key, store_.strings.intern(copy_name(ck, src, dst, k == Kind::Memset)))
               .first;
    add_activity(k, q, it->second, 8);
  }
}

void Importer::runtime(const std::string& table) {
  auto have = columns_of(db_, table);
  if (have.empty()) return;
  Stmt q(db_, select(have, {"start", "end", "globalTid", "correlationId", "nameId"}, table));
  LaunchCalls& l = store_.launches;
  if (size_t n = row_hint(db_, table))
    for_each_column(l, [&](const auto&, auto& col) { col.reserve(l.size() + n); });
  uint32_t name;
  while (q.step()) {
    ++events_;
    if (!q.is_int(0) || !q.is_int(1) || q.i64(1) < q.i64(0) || !q.is_int(4) ||
        !string_id(q.i64(4), &name)) {
      ++malformed_;
      continue;
    }
    int64_t g = q.is_int(2) ? q.i64(2) : 0;
    l.rank.push_back(0);
    l.pid.push_back(gid_pid(g));
    l.tid.push_back(gid_tid(g));
    l.start_ns.push_back(q.i64(0));
    l.end_ns.push_back(q.i64(1));
    l.name_id.push_back(name);
    l.correlation.push_back(q.is_int(3) ? q.i64(3) : kNoCorrelation);
  }
}

// NVTX event types (ENUM_NSYS_EVENT_TYPE): push/pop and start/end ranges; domain creation.
constexpr int64_t kNvtxMark = 34, kNvtxPushPop = 59, kNvtxStartEnd = 60, kNvtxDomainCreate = 75;

// Advanced NCCL tracing (Nsight Systems >= 2025.6.1, NCCL >= 2.28): one row per NCCL GPU operation,
// columns as NVIDIA's recipe composite table NCCL_GPU_OPERATIONS (operationId: one collective on
// all ranks, a send and its receive), its sequence numbers from NCCL_GPU_OPERATIONS_COLLECTIVE
// (same start, end and communicator). Ids are 64-bit: an INTEGER (two's complement) or decimal
// text.
void Importer::nccl_operations(ImportStats* stats) {
  auto have = columns_of(db_, "NCCL_GPU_OPERATIONS");
  if (!have.count("operationId") || !have.count("start") || !have.count("end")) return;
  auto u64 = [](const Stmt& q, int c) -> uint64_t {
    uint64_t v = 0;
    if (q.is_int(c)) return static_cast<uint64_t>(q.i64(c));
    std::string_view t = q.text(c);
    std::from_chars(t.data(), t.data() + t.size(), v);
    return v;
  };
  std::map<std::tuple<uint64_t, int64_t, int64_t>, int64_t> seq;  // (comm, start, end) → seq
  auto hc = columns_of(db_, "NCCL_GPU_OPERATIONS_COLLECTIVE");
  if (hc.count("seqNumber")) {
    Stmt q(db_,
           select(hc, {"commHash", "start", "end", "seqNumber"}, "NCCL_GPU_OPERATIONS_COLLECTIVE"));
    while (q.step())
      if (q.is_int(1) && q.is_int(2) && q.is_int(3))
        seq[{u64(q, 0), q.i64(1), q.i64(2)}] = q.i64(3);
  }
  std::vector<NcclOpRecord> ops;
  Stmt q(db_, select(have,
                     {"start", "end", "commHash", "commRank", "count", "operationId", "text",
                      "dataType", "operationClass"},
                     "NCCL_GPU_OPERATIONS"));
  while (q.step()) {
    ++events_;
    if (!q.is_int(0) || !q.is_int(1) || q.i64(1) < q.i64(0) || u64(q, 5) == 0) {
      ++malformed_;
      continue;
    }
    NcclOpRecord r;
    r.start = q.i64(0), r.end = q.i64(1), r.comm_hash = u64(q, 2), r.op_id = u64(q, 5);
    r.comm_rank = q.is_int(3) && q.i64(3) >= 0 && q.i64(3) <= INT32_MAX ? int32_t(q.i64(3)) : -1;
    r.count = q.is_int(4) ? q.i64(4) : -1;
    r.name = std::string(q.text(6));
    r.dtype = std::string(q.text(7));
    auto it = seq.find({r.comm_hash, r.start, r.end});
    if (it != seq.end() && q.text(8) != "p2p") r.seq = it->second;
    ops.push_back(std::move(r));
  }
  NcclOpJoin j = join_nccl_ops(store_, std::move(ops));
  ignored_ += static_cast<int64_t>(j.unjoined);
  if (stats && j.joined + j.unjoined > 0)
    stats->notes.push_back(db_.path() + ": " + std::to_string(j.joined) +
                           " NCCL GPU operations joined to their kernels (" +
                           std::to_string(j.copies) + " copy-engine collectives), " +
                           std::to_string(j.unjoined) + " without GPU activity");
}

// NCCL's network plugin marks ("ncclNetRecvTest(): Data_Size: …, Sender_Rank: 0, Receiver_Rank: 1,
// Channel_ID: 0, Sequence: 2" when a receive is seen complete) are kept as instants: with the
// sender's ncclNetIsend range they bound the two hosts' clocks (docs/clocks.md). Other marks are
// not kept.
bool kept_mark(const std::string& name) { return name.rfind("ncclNet", 0) == 0; }

void Importer::nvtx() {
  auto have = columns_of(db_, "NVTX_EVENTS");
  if (have.empty()) return;
  std::unordered_map<int64_t, std::string> domains;  // domainId → name (few)
  {
    Stmt d(db_, select(have, {"domainId", "text"}, "NVTX_EVENTS",
                       " WHERE eventType = " + std::to_string(kNvtxDomainCreate)));
    while (d.step())
      if (d.is_int(0)) domains[d.i64(0)] = std::string(d.text(1));
  }
  Stmt q(db_, select(have,
                     {"start", "end", "eventType", "text", "textId", "domainId", "globalTid",
                      "binaryData", "jsonText"},
                     "NVTX_EVENTS"));
  Annotations& an = store_.annotations;
  // Labels cached per (text, domain): every row may name one megabyte-long string by its id, or
  // one huge domain, and the work per row must not grow with that string (docs/limits.md).
  std::map<std::pair<uint32_t, int64_t>, NvtxLabel> by_id;
  std::map<std::pair<std::string, int64_t>, NvtxLabel> by_text;
  std::string text;
  uint32_t tid_name;
  while (q.step()) {
    ++events_;
    int64_t type = q.is_int(2) ? q.i64(2) : -1;
    if (type != kNvtxPushPop && type != kNvtxStartEnd && type != kNvtxMark) {
      ++ignored_;  // domain and thread names, categories
      continue;
    }
    const bool named_by_id = q.is_int(4) && string_id(q.i64(4), &tid_name);
    if (!named_by_id) text.assign(q.text(3));
    const std::string& name = named_by_id ? store_.strings.at(tid_name) : text;
    if (type == kNvtxMark && (!kept_mark(name) || !q.is_int(0))) {
      ++ignored_;
      continue;
    }
    if (type != kNvtxMark && name.rfind("ncclCommInitRank", 0) == 0)  // NCCL's rank, in a payload
      comm_init_payload(q, q.is_int(5) ? q.i64(5) : 0, gid_pid(q.is_int(6) ? q.i64(6) : 0));
    const int64_t start = q.i64(0), end = type == kNvtxMark ? start : q.i64(1);
    if (type != kNvtxMark && (!q.is_int(0) || !q.is_int(1) || end < start)) {
      ++malformed_;  // an unclosed range has no end
      continue;
    }
    const int64_t domain = q.is_int(5) ? q.i64(5) : 0;
    NvtxLabel* label;
    if (named_by_id) {
      auto [it, fresh] = by_id.try_emplace({tid_name, domain});
      if (fresh) it->second = nvtx_label(std::string(name), domain, domains);
      label = &it->second;
    } else {
      auto [it, fresh] = by_text.try_emplace({text, domain});
      if (fresh) it->second = nvtx_label(text, domain, domains);
      label = &it->second;
    }
    int64_t g = q.is_int(6) ? q.i64(6) : 0;
    an.rank.push_back(0);
    an.kind.push_back(static_cast<uint8_t>(label->kind));
    an.pid.push_back(gid_pid(g));
    an.tid.push_back(gid_tid(g));
    an.start_ns.push_back(start);
    an.end_ns.push_back(end);
    an.name_id.push_back(label->name);
    an.step.push_back(label->step);
  }
}

Importer::NvtxLabel Importer::nvtx_label(std::string name, int64_t domain,
                                         const std::unordered_map<int64_t, std::string>& domains) {
  NvtxLabel l{0, AnnotationKind::Nvtx, kNoStep};
  std::smatch m;
  // A step name is short; std::regex recurses per character (Classifier::kMaxRegexInput), so a
  // longer name is a plain range without being matched.
  if (name.size() <= Classifier::kMaxRegexInput && std::regex_match(name, m, step_re_)) {
    int64_t n;
    if (parse_i64(m[1].str(), &n) && n >= 0 && n <= INT32_MAX) {
      l.kind = AnnotationKind::Step;
      l.step = static_cast<int32_t>(n);
    }
  }
  if (l.kind == AnnotationKind::Nvtx && domain != 0) {
    auto it = domains.find(domain);
    if (it != domains.end() && !it->second.empty()) name = it->second + ": " + name;
  }
  l.name = store_.strings.intern(name);
  return l;
}

// The value of a TARGET_INFO_SYSTEM_ENV row, "" if none. Only the named rows are read: exports
// carry the whole environment of the profiled machine, and kernalyse keeps nothing else of it.
std::string system_env(const Db& db, const std::string& name) {
  auto have = columns_of(db, "TARGET_INFO_SYSTEM_ENV");
  if (!have.count("name") || !have.count("value")) return "";
  Stmt q(db, "SELECT value FROM TARGET_INFO_SYSTEM_ENV WHERE name = ? LIMIT 1");
  q.bind(1, name);
  return q.step() ? std::string(q.text(0)) : "";
}

// A launcher variable of the recorded environment, "" if none: the launched process's own
// environment (META_DATA_CAPTURE "PROCESS_n:ENVIRONMENT_VARIABLE" rows, NAME="VALUE"), a
// TARGET_INFO_SYSTEM_ENV row of that name, or the daemon's environment list (DeviceEnvironment,
// "A=1;B=2"), in that order.
std::string launcher_env(const Db& db, const std::string& name) {
  if (columns_of(db, "META_DATA_CAPTURE").count("value")) {
    Stmt q(db,
           "SELECT value FROM META_DATA_CAPTURE WHERE name LIKE 'PROCESS_%:ENVIRONMENT_VARIABLE' "
           "AND value LIKE ? ORDER BY name LIMIT 1");
    q.bind(1, name + "=%");
    if (q.step())
      if (auto v = env_assignment_value(q.text(0), name)) return *v;
  }
  if (std::string v = system_env(db, name); !v.empty()) return v;
  return env_list_value(system_env(db, "DeviceEnvironment"), name).value_or("");
}

// NCCL's ncclCommInitRank range carries {Rank, No. of ranks, CUDA device} as an NVTX payload
// (NCCL 2.23 on) when the export kept it: as JSON text, or as binary data laid out by the schema
// in NVTX_PAYLOAD_SCHEMA_ENTRIES. Per process, the rank in its largest communicator is kept.
void Importer::comm_init_payload(const Stmt& q, int64_t domain, int64_t pid) {
  int64_t rank = -1, ranks = -1;
  auto json_int = [](std::string_view j, std::string_view key) -> int64_t {
    size_t at = j.find(key);
    if (at == std::string_view::npos) return -1;
    at += key.size();
    while (at < j.size() && (j[at] == ' ' || j[at] == ':' || j[at] == '"')) ++at;
    int64_t v = 0;
    size_t n = 0;
    for (; at < j.size() && n < 10 && j[at] >= '0' && j[at] <= '9'; ++at, ++n)
      v = v * 10 + (j[at] - '0');
    return n > 0 && n < 10 ? v : -1;
  };
  if (std::string_view j = q.text(8); !j.empty() && j.size() <= 65536) {
    rank = json_int(j, "\"Rank\"");
    ranks = json_int(j, "\"No. of ranks\"");
  }
  std::string_view blob = q.bytes(7);
  if (rank < 0 && !blob.empty()) {
    if (!rank_fields_) {  // (domain, schema) → (Rank's type << 32 | offset, No. of ranks' ...)
      rank_fields_.emplace();
      auto have = columns_of(db_, "NVTX_PAYLOAD_SCHEMA_ENTRIES");
      Stmt e(db_, select(have, {"domainId", "schemaId", "name", "type", "offset"},
                         "NVTX_PAYLOAD_SCHEMA_ENTRIES",
                         " WHERE name IN ('Rank', 'No. of ranks') LIMIT 4096"));
      while (!have.empty() && e.step()) {
        if (!e.is_int(0) || !e.is_int(1) || !e.is_int(3)) continue;
        int64_t field = e.i64(3) << 32 | (e.is_int(4) ? (e.i64(4) & 0xFFFFFFFF) : 0);
        auto& f = (*rank_fields_)[{e.i64(0), e.i64(1)}];
        (e.text(2) == "Rank" ? f.first : f.second) = field + 1;  // 0: absent
      }
    }
    // The schema: named in nsys's header (bytes 8-15), else the domain's only layout of "Rank".
    int64_t schema = -1;
    if (blob.size() >= 32) schema = payload_field(blob.substr(0, 16), 18, 8).value_or(-1);
    const std::pair<int64_t, int64_t>* fields = nullptr;
    for (const auto& [key, f] : *rank_fields_)
      if (key.first == domain && f.first && (key.second == schema || schema < 0)) {
        if (fields && fields->first != f.first) return;  // two layouts: which one is not known
        fields = &f;
      }
    if (!fields) return;
    auto read = [&](int64_t f) {
      --f;
      return f < 0 ? -1 : payload_field(blob, f >> 32, f & 0xFFFFFFFF).value_or(-1);
    };
    rank = read(fields->first);
    ranks = fields->second ? read(fields->second) : -1;
  }
  if (rank < 0 || rank > INT32_MAX || (ranks >= 0 && rank >= ranks)) return;
  auto [it, fresh] = init_rank_.try_emplace(pid, ranks, static_cast<int32_t>(rank));
  if (!fresh && ranks > it->second.first) it->second = {ranks, static_cast<int32_t>(rank)};
}

// The processes of the report: the distinct pids of its GPU work (none known: one process).
std::vector<int64_t> Importer::process_pids() const {
  std::set<int64_t> pids;
  for (int64_t p : act_pid_)
    if (p > 0) pids.insert(p);
  return {pids.begin(), pids.end()};
}

// A report with several processes: each one's rows get its index in `pids` as their rank; CPU
// rows of other processes (a launcher's) are dropped and counted as ignored.
void Importer::split_processes(const std::vector<int64_t>& pids) {
  std::unordered_map<int64_t, int32_t> index;
  for (size_t i = 0; i < pids.size(); ++i) index.emplace(pids[i], static_cast<int32_t>(i));
  Activities& a = store_.activities;
  for (size_t i = 0; i < a.size(); ++i) {
    auto it = index.find(act_pid_[i]);
    a.rank[i] = it == index.end() ? 0 : it->second;  // unknown pid: the first process's
  }
  auto keep = [&](auto& t) {
    std::vector<char> drop(t.size(), 0);
    for (size_t i = 0; i < t.size(); ++i) {
      auto it = index.find(t.pid[i]);
      if (it == index.end())
        drop[i] = 1;
      else
        t.rank[i] = it->second;
    }
    const auto n = std::count(drop.begin(), drop.end(), 1);
    if (n == 0) return;
    ignored_ += n;
    for_each_column(t, [&](const auto&, auto& col) {
      size_t w = 0;
      for (size_t r = 0; r < col.size(); ++r)
        if (!drop[r]) col[w++] = col[r];
      col.resize(w);
    });
  };
  keep(store_.launches);
  keep(store_.annotations);
}

// What the whole report says: the launcher's variables, --rank, the file name. Only a report of
// one process applies them (a report of several records one environment for all of them).
void Importer::file_claims(NsysProcess* p) {
  auto ok = [](int64_t v) { return v >= 0 && v <= INT32_MAX; };
  for (const char* var :
       {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    int64_t v;
    if (parse_i64(launcher_env(db_, var), &v) && ok(v))
      p->claims.push_back({static_cast<int32_t>(v), std::string("env:") + var});
  }
  for (const char* var : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}) {
    int64_t v;
    if (parse_i64(launcher_env(db_, var), &v) && ok(v)) {
      p->local_rank = v;
      break;
    }
  }
  if (opt_.rank) p->claims.push_back({*opt_.rank, "--rank"});
  if (auto r = rank_from_filename(db_.path())) p->claims.push_back({*r, "file name"});
}

// What each process says: MPI_RANKS and the "MPI Rank N" thread name of nsys --trace=mpi, NCCL's
// ncclCommInitRank payload and network marks (its rank in the communicator that used the
// network: the world rank for the usual one world communicator). A report of one process takes
// any process's evidence as its own.
void Importer::process_claims(std::vector<NsysProcess>& procs) {
  const bool one = procs.size() == 1;
  std::unordered_map<int64_t, size_t> index;
  for (size_t i = 0; i < procs.size(); ++i) index.emplace(procs[i].pid, i);
  auto owner = [&](int64_t pid) -> NsysProcess* {
    if (one) return &procs[0];
    auto it = index.find(pid);
    return it == index.end() ? nullptr : &procs[it->second];
  };
  auto claim = [&](int64_t pid, int64_t rank, const char* source) {
    NsysProcess* p = owner(pid);
    if (!p || rank < 0 || rank > INT32_MAX) return;
    for (const auto& c : p->claims)
      if (c.source == source) return;  // the first one found
    p->claims.push_back({static_cast<int32_t>(rank), source});
  };
  if (auto have = columns_of(db_, "MPI_RANKS"); have.count("rank")) {
    Stmt q(db_, select(have, {"globalTid", "rank"}, "MPI_RANKS", " LIMIT 65536"));
    while (q.step())
      if (q.is_int(1)) claim(q.is_int(0) ? gid_pid(q.i64(0)) : -1, q.i64(1), "MPI_RANKS");
  }
  if (auto nv = columns_of(db_, "NVTX_EVENTS"); nv.count("text")) {
    Stmt q(db_, select(nv, {"globalTid", "text"}, "NVTX_EVENTS",
                       " WHERE text LIKE 'MPI Rank %' LIMIT 65536"));
    int64_t v;
    while (q.step())
      if (parse_i64(q.text(1).substr(std::min<size_t>(9, q.text(1).size())), &v))
        claim(q.is_int(0) ? gid_pid(q.i64(0)) : -1, v, "MPI rank thread name");
  }
  for (const auto& [pid, nr] : init_rank_) claim(pid, nr.second, "nccl");
  // Marks: the rank most of a process's marks name (each distinct text parsed once).
  std::unordered_map<uint32_t, std::optional<int32_t>> mark_of;
  std::map<int64_t, std::map<int32_t, int64_t>> votes;
  const Annotations& an = store_.annotations;
  for (size_t i = 0; i < an.size(); ++i) {
    auto [it, fresh] = mark_of.try_emplace(an.name_id[i]);
    if (fresh) it->second = network_mark_rank(store_.strings.at(an.name_id[i]));
    if (it->second) ++votes[one ? 0 : an.pid[i]][*it->second];
  }
  for (const auto& [pid, v] : votes) {
    auto best = std::max_element(v.begin(), v.end(), [](const auto& x, const auto& y) {
      return x.second < y.second || (x.second == y.second && x.first > y.first);
    });
    claim(pid, best->first, "network marks");
  }
}

// Name of a CUDA device: TARGET_INFO_CUDA_DEVICE maps CUDA ids to GPU ids (3.x); TARGET_INFO_GPU
// has the names (id or, in old exports, deviceId); TARGET_INFO_CUDA_GPU in the oldest.
std::string Importer::device_name(int64_t cuda_id) {
  auto [it, fresh] = device_names_.try_emplace(cuda_id);
  if (!fresh) return it->second;
  int64_t gpu = cuda_id;
  if (columns_of(db_, "TARGET_INFO_CUDA_DEVICE").count("gpuId")) {
    Stmt q(db_, "SELECT gpuId FROM TARGET_INFO_CUDA_DEVICE WHERE cudaId = ? LIMIT 1");
    q.bind(1, gpu);
    if (q.step() && q.is_int(0)) gpu = q.i64(0);
  }
  for (const char* t : {"TARGET_INFO_GPU", "TARGET_INFO_CUDA_GPU"}) {
    auto have = columns_of(db_, t);
    std::string idcol = have.count("id") ? "id" : have.count("deviceId") ? "deviceId" : "";
    if (idcol.empty() || !have.count("name")) continue;
    Stmt q(db_, std::string("SELECT name FROM \"") + t + "\" WHERE \"" + idcol + "\" = ? LIMIT 1");
    q.bind(1, gpu);
    if (q.step() && !q.text(0).empty()) return it->second = std::string(q.text(0));
  }
  return it->second;
}

// One process's /ranks row; devs: the CUDA devices its GPU work ran on.
RankInfo Importer::rank_info(int32_t index, std::vector<int32_t> devs, const std::string& version,
                             int64_t session) {
  RankInfo info;
  info.rank = index;
  info.source = db_.path();
  std::sort(devs.begin(), devs.end());
  devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
  for (size_t i = 0; i < devs.size(); ++i) info.devices += (i ? "," : "") + std::to_string(devs[i]);
  if (!devs.empty()) info.device_name = device_name(devs[0]);  // the first device's
  info.base_time_ns = session;
  info.clock_method = "none (recording host wall clock, not aligned across ranks)";
  info.collector_status =
      "imported (Nsight Systems" + (version.empty() ? "" : " export schema " + version) + ")";
  info.emulated = synthetic_;
  info.events_total = index == 0 ? events_ : 0;  // the report's counts go with its first process
  info.events_malformed = index == 0 ? malformed_ : 0;
  info.events_ignored = index == 0 ? ignored_ : 0;
  return info;
}

Store Importer::run(ImportStats* stats, std::vector<NsysProcess>* procs) {
  // Version: META_DATA_EXPORT's EXPORT_SCHEMA_VERSION when there is one (older exports have none).
  std::string version;
  if (columns_of(db_, "META_DATA_EXPORT").count("value")) {
    Stmt q(db_, "SELECT value FROM META_DATA_EXPORT WHERE name = 'EXPORT_SCHEMA_VERSION' LIMIT 1");
    if (q.step()) version = std::string(q.text(0));
    // kernalyse-tracegen --format nsys marks its synthetic reports (never NVIDIA's exports).
    Stmt syn(db_, "SELECT value FROM META_DATA_EXPORT WHERE name = 'kernalyseSynthetic' LIMIT 1");
    synthetic_ = syn.step() && syn.text(0) == "true";
  }
  int64_t major = -1;
  if (!version.empty() && parse_i64(version.substr(0, version.find('.')), &major) &&
      (major < 2 || major > 3) && stats)
    stats->warnings.push_back(db_.path() + ": export schema " + version +
                              " is outside the versions read (2.9 to 3.30); importing anyway");
  kernels();
  copies("CUPTI_ACTIVITY_KIND_MEMCPY", Kind::Memcpy);
  copies("CUPTI_ACTIVITY_KIND_MEMSET", Kind::Memset);
  runtime("CUPTI_ACTIVITY_KIND_RUNTIME");
  nvtx();
  nccl_operations(stats);

  // Processes: one per pid of GPU work; numbered 0..P-1 here, ranked by rank_nsys_reports.
  std::vector<int64_t> pids = process_pids();
  if (pids.size() > kMaxProcesses)  // each costs a /ranks row: bounded (docs/limits.md)
    throw Error(db_.path() + ": GPU work of " + std::to_string(pids.size()) +
                " processes; a report of more than " + std::to_string(kMaxProcesses) +
                " is not read (docs/limits.md)");
  if (pids.size() > 1) split_processes(pids);
  const std::string host = system_env(db_, "Hostname");
  procs->clear();
  for (size_t i = 0; i < std::max<size_t>(pids.size(), 1); ++i) {
    NsysProcess p;
    p.file = db_.path();
    p.host = host;
    p.pid = i < pids.size() ? pids[i] : -1;
    p.shared_file = pids.size() > 1;
    procs->push_back(std::move(p));
  }
  if (procs->size() == 1) file_claims(&(*procs)[0]);
  process_claims(*procs);

  // Time: ns since the session start in most exports, epoch ns in some. Relative times are far
  // below half the session's epoch start; absolute ones are not: decide on that, per file.
  int64_t session = 0;
  if (columns_of(db_, "TARGET_INFO_SESSION_START_TIME").count("utcEpochNs")) {
    Stmt q(db_, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME LIMIT 1");
    if (q.step() && q.is_int(0) && q.i64(0) > 0) session = q.i64(0);
  }
  bool absolute = session > 0 && min_time_ != INT64_MAX && min_time_ >= session / 2;
  int64_t shift = session > 0 && !absolute ? session : 0;
  Activities& a = store_.activities;
  LaunchCalls& l = store_.launches;
  Annotations& an = store_.annotations;
  if (shift)
    for (auto* col : {&a.start_ns, &a.end_ns, &l.start_ns, &l.end_ns, &an.start_ns, &an.end_ns})
      for (auto& x : *col) x += shift;
  if (session == 0 && stats)
    stats->warnings.push_back(db_.path() +
                              ": no session start time (TARGET_INFO_SESSION_START_TIME): "
                              "times are ns since the capture started, not epoch ns");
  sort_activities(store_);
  assign_steps(store_);

  std::vector<std::vector<int32_t>> devs(procs->size());
  for (size_t i = 0; i < a.size(); ++i)
    if (static_cast<size_t>(a.rank[i]) < devs.size()) devs[a.rank[i]].push_back(a.device[i]);
  for (auto& d : devs) {  // distinct devices (a process's rows are many, its devices few)
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
  }
  for (size_t i = 0; i < procs->size(); ++i) {
    store_.ranks.push_back(rank_info(static_cast<int32_t>(i), devs[i], version, session));
    store_.ranks.back().host = (*procs)[i].host;
    if ((*procs)[i].shared_file)
      store_.ranks.back().source += " (pid " + std::to_string((*procs)[i].pid) + ")";
  }
  store_.attrs.emulated = synthetic_;
  if (stats) {
    stats->events += events_;
    stats->malformed += malformed_;
    if (malformed_ > 0)
      stats->warnings.push_back(db_.path() + ": " + std::to_string(malformed_) + " of " +
                                std::to_string(events_) + " rows malformed and skipped");
  }
  return std::move(store_);
}

}  // namespace

bool is_sqlite_file(const std::string& path) {
  // Only regular files: SQLite needs random access, and sniffing a pipe (gzip through
  // /dev/stdin) would eat the bytes the Kineto importer must read next.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream f(path, std::ios::binary);
  char magic[16] = {};
  f.read(magic, sizeof magic);
  return f.gcount() == 16 && std::memcmp(magic, "SQLite format 3\0", 16) == 0;
}

Store import_nsys_report(const std::string& path, const ImportOptions& opt, ImportStats* stats,
                         std::vector<NsysProcess>* procs) {
  if (!is_sqlite_file(path)) throw Error(path + ": not an SQLite database (Nsight Systems export)");
  Importer imp(path, opt);
  Store s = imp.run(stats, procs);
  int64_t bytes = input_bytes(path);
  if (opt.progress) opt.progress->advance(bytes);
  if (stats) stats->bytes += bytes;
  return s;
}

Store import_nsys_file(const std::string& path, const ImportOptions& opt, ImportStats* stats) {
  std::vector<Store> parts(1);
  std::vector<std::vector<NsysProcess>> procs(1);
  parts[0] = import_nsys_report(path, opt, stats, &procs[0]);
  rank_nsys_reports(parts, procs, opt.only_input, stats);
  return merge_stores(std::move(parts));
}

}  // namespace kernalyse
