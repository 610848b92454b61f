// kernalyse-tracegen --format nsys: one rank's planted workload (or several processes, one per
// rank) as an Nsight Systems SQLite export (the tables and columns `nsys export --type sqlite`
// schema 3.17 writes that kernalyse reads), so truth tests and the benchmark run on both formats.
// Times are written as nsys does: ns since the session start, with
// TARGET_INFO_SESSION_START_TIME holding the epoch anchor. The rank evidence a real export may
// carry is written on request (NsysProcessOut): the launched process's environment
// (META_DATA_CAPTURE), NCCL's ncclCommInitRank payload (binaryData after nsys's 32-byte header,
// the schema in NVTX_PAYLOAD_SCHEMA_ENTRIES, as in the real allreduce pair's schema rows) and
// NCCL's network marks.
#include "nsys_writer.h"

#include <sqlite3.h>

#include <stdexcept>
#include <string>
#include <string_view>

namespace {

using kernalyse::Store;

class Db {
 public:
  explicit Db(const std::string& path) {
    if (sqlite3_open(path.c_str(), &db_) != SQLITE_OK) fail(path);
  }
  ~Db() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK)
      fail(sql.substr(0, 80));
  }
  sqlite3_stmt* prepare(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
      fail(sql.substr(0, 80));
    return st;
  }
  void run(sqlite3_stmt* st) {
    if (sqlite3_step(st) != SQLITE_DONE) fail("insert");
    sqlite3_reset(st);
  }
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error(what + ": " + (db_ ? sqlite3_errmsg(db_) : "cannot open"));
  }

 private:
  sqlite3* db_ = nullptr;
};

// CUPTI memcpy and memory kinds from Kineto's copy name "Memcpy HtoD (Pinned -> Device)".
int copy_kind(std::string_view n) {
  static const char* kKinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                 "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  for (int i = 0; i < 11; ++i)
    if (n.rfind(std::string("Memcpy ") + kKinds[i], 0) == 0) return i;
  return 0;
}
int mem_kind(std::string_view n) {
  static const char* kKinds[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                 "Array",   "Managed",  "Device Static", "Managed Static"};
  for (int i = 7; i >= 0; --i)
    if (n == kKinds[i]) return i;
  return 0;
}
// "Memcpy HtoD (Pinned -> Device)" → src "Pinned", dst "Device"; "Memset (Device)" → "Device".
std::pair<int, int> mem_kinds(std::string_view n) {
  size_t o = n.find('('), c = n.rfind(')');
  if (o == std::string_view::npos || c == std::string_view::npos || c < o) return {0, 0};
  std::string_view in = n.substr(o + 1, c - o - 1);
  size_t arrow = in.find(" -> ");
  if (arrow == std::string_view::npos) return {mem_kind(in), mem_kind(in)};
  return {mem_kind(in.substr(0, arrow)), mem_kind(in.substr(arrow + 4))};
}

constexpr const char* kSchema =
    "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);"
    "CREATE TABLE META_DATA_CAPTURE (name TEXT NOT NULL, value TEXT);"
    "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime "
    "TEXT);"
    "CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL, name "
    "TEXT NOT NULL, nameEnum INTEGER NOT NULL, value TEXT NOT NULL);"
    "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT);"
    "CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER "
    "NOT NULL);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
    "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
    "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER "
    "NOT NULL);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, "
    "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
    "correlationId INTEGER, globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, "
    "srcKind INTEGER, dstKind INTEGER);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, "
    "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, "
    "correlationId INTEGER, globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, "
    "memKind INTEGER);"
    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, "
    "eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT "
    "NULL, returnValue INTEGER NOT NULL, callchainId INTEGER);"
    "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
    "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, "
    "endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, jsonText TEXT, binaryData TEXT);"
    "CREATE TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES (domainId INTEGER NOT NULL, schemaId INTEGER NOT "
    "NULL, idx INTEGER NOT NULL, flags INTEGER, type INTEGER, name TEXT, description TEXT, "
    "arrayOrUnionDetail INTEGER, offset INTEGER);";

// globalTid / globalPid as nsys serializes them: pid << 24 | tid (24 bits each).
int64_t gtid(int64_t pid, int64_t tid) { return ((pid & 0xFFFFFF) << 24) | (tid & 0xFFFFFF); }

std::string q(const std::string& v) {  // an SQL string literal
  std::string out = "'";
  for (char c : v) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// GPU activities (kernels, copies, memsets) of one process; string ids offset by `sid`.
void write_activities(Db& db, const NsysProcessOut& p, int64_t t0, int64_t sid) {
  const Store& s = *p.store;
  sqlite3_stmt* k =
      db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)");
  sqlite3_stmt* mc =
      db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, 1, ?, ?, ?, 0, ?, ?, ?)");
  sqlite3_stmt* ms =
      db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, ?, 1, ?, ?, ?, 0, 0, ?)");
  const auto& a = s.activities;
  for (size_t i = 0; i < a.size(); ++i) {
    auto kind = static_cast<kernalyse::Kind>(a.kind[i]);
    sqlite3_stmt* st = kind == kernalyse::Kind::Kernel   ? k
                       : kind == kernalyse::Kind::Memcpy ? mc
                       : kind == kernalyse::Kind::Memset ? ms
                                                         : nullptr;
    if (!st) continue;  // syncs and host events have no table here
    sqlite3_bind_int64(st, 1, a.start_ns[i] - t0);
    sqlite3_bind_int64(st, 2, a.end_ns[i] - t0);
    sqlite3_bind_int64(st, 3, a.device[i]);
    sqlite3_bind_int64(st, 4, a.stream[i]);
    if (a.correlation[i] == kernalyse::kNoCorrelation)
      sqlite3_bind_null(st, 5);
    else
      sqlite3_bind_int64(st, 5, a.correlation[i]);
    sqlite3_bind_int64(st, 6, gtid(p.pid, 0));
    const std::string& name = s.strings.at(a.name_id[i]);
    auto [src, dst] = mem_kinds(name);
    if (st == k) {
      sqlite3_bind_int64(st, 7, sid + a.name_id[i]);
      sqlite3_bind_int64(st, 8, sid + a.name_id[i]);
    } else if (st == mc) {
      sqlite3_bind_int64(st, 7, copy_kind(name));
      sqlite3_bind_int64(st, 8, src);
      sqlite3_bind_int64(st, 9, dst);
    } else {
      sqlite3_bind_int64(st, 7, dst);
    }
    db.run(st);
  }
  sqlite3_finalize(k);
  sqlite3_finalize(mc);
  sqlite3_finalize(ms);
}

// CUDA runtime calls and NVTX ranges of one process: steps and CPU ranges as push/pop ranges (59)
// on their thread (GPU annotations have no NVTX form).
void write_cpu(Db& db, const NsysProcessOut& p, int64_t t0, int64_t sid) {
  const Store& s = *p.store;
  sqlite3_stmt* rt =
      db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, ?, 0, NULL)");
  const auto& l = s.launches;
  for (size_t i = 0; i < l.size(); ++i) {
    sqlite3_bind_int64(rt, 1, l.start_ns[i] - t0);
    sqlite3_bind_int64(rt, 2, l.end_ns[i] - t0);
    sqlite3_bind_int64(rt, 3, gtid(p.pid, l.tid[i]));
    if (l.correlation[i] == kernalyse::kNoCorrelation)
      sqlite3_bind_null(rt, 4);
    else
      sqlite3_bind_int64(rt, 4, l.correlation[i]);
    sqlite3_bind_int64(rt, 5, sid + l.name_id[i]);
    db.run(rt);
  }
  sqlite3_finalize(rt);
  sqlite3_stmt* nv = db.prepare(
      "INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, NULL, ?, ?, ?, 0, NULL, NULL)");
  const auto& an = s.annotations;
  for (size_t i = 0; i < an.size(); ++i) {
    if (static_cast<kernalyse::AnnotationKind>(an.kind[i]) == kernalyse::AnnotationKind::GpuUser)
      continue;
    sqlite3_bind_int64(nv, 1, an.start_ns[i] - t0);
    sqlite3_bind_int64(nv, 2, an.end_ns[i] - t0);
    sqlite3_bind_int64(nv, 3, gtid(p.pid, an.tid[i]));
    sqlite3_bind_int64(nv, 4, gtid(p.pid, an.tid[i]));
    sqlite3_bind_int64(nv, 5, sid + an.name_id[i]);
    db.run(nv);
  }
  sqlite3_finalize(nv);
}

// NCCL's evidence of the rank: the ncclCommInitRank range with its payload {Rank, No. of ranks,
// CUDA device} (three ints after nsys's 32-byte header: domain, schema, payload size, total
// size), and network marks on the first collectives (the sender's ncclNetIsend mark at its
// kernel's start, the receiver's ncclNetIrecv at its kernel's start and ncclNetRecvTest at its
// end: a receive completes after the send started, in true time).
void write_nccl_evidence(Db& db, const NsysProcessOut& p, int64_t t0, int32_t rank) {
  const Store& s = *p.store;
  const int64_t tid = gtid(p.pid, p.pid);
  if (p.comm_rank >= 0) {
    std::string blob(44, '\0');
    auto put = [&](size_t at, uint64_t v, size_t n) {
      for (size_t b = 0; b < n; ++b) blob[at + b] = static_cast<char>((v >> (8 * b)) & 0xFF);
    };
    put(0, 1, 8), put(8, 16777216, 8), put(16, 12, 8), put(24, 44, 8);
    put(32, static_cast<uint32_t>(p.comm_rank), 4), put(36, static_cast<uint32_t>(p.comm_size), 4);
    int32_t dev = 0;
    if (!s.activities.device.empty()) dev = s.activities.device[0];
    put(40, static_cast<uint32_t>(dev), 4);
    sqlite3_stmt* nv = db.prepare(
        "INSERT INTO NVTX_EVENTS VALUES (0, 1000, 59, NULL, NULL, NULL, 'ncclCommInitRank', ?, ?, "
        "NULL, 1, NULL, ?)");
    sqlite3_bind_int64(nv, 1, tid);
    sqlite3_bind_int64(nv, 2, tid);
    sqlite3_bind_blob(nv, 3, blob.data(), static_cast<int>(blob.size()), SQLITE_STATIC);
    db.run(nv);
    sqlite3_finalize(nv);
  }
  if (p.send_to < 0 && p.recv_from < 0) return;
  sqlite3_stmt* mk = db.prepare(
      "INSERT INTO NVTX_EVENTS VALUES (?, NULL, 34, NULL, NULL, NULL, ?, ?, NULL, NULL, 0, NULL, "
      "NULL)");
  auto mark = [&](int64_t t, const std::string& text) {
    sqlite3_bind_int64(mk, 1, t - t0);
    sqlite3_bind_text(mk, 2, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(mk, 3, tid);
    db.run(mk);
  };
  const auto& a = s.activities;
  int seq = 0;
  for (size_t i = 0; i < a.size() && seq < 4; ++i) {
    if (static_cast<kernalyse::Kind>(a.kind[i]) != kernalyse::Kind::Kernel ||
        static_cast<kernalyse::Category>(a.category[i]) != kernalyse::Category::Communication)
      continue;
    auto msg = [&](int32_t from, int32_t to) {
      return "Data_Size: 1048576, Sender_Rank: " + std::to_string(from) +
             ", Receiver_Rank: " + std::to_string(to) +
             ", Channel_ID: 0, Sequence: " + std::to_string(seq);
    };
    if (p.send_to >= 0) mark(a.start_ns[i], "ncclNetIsend(): " + msg(rank, p.send_to));
    if (p.recv_from >= 0) {
      mark(a.start_ns[i], "ncclNetIrecv(): " + msg(p.recv_from, rank));
      mark(a.end_ns[i], "ncclNetRecvTest(): " + msg(p.recv_from, rank));
    }
    ++seq;
  }
  sqlite3_finalize(mk);
}

// Devices of one process (TARGET_INFO_GPU, TARGET_INFO_CUDA_DEVICE), from RankInfo::devices.
void write_devices(Db& db, const NsysProcessOut& p) {
  const auto& ri = p.store->ranks.at(0);
  sqlite3_stmt* gpu = db.prepare("INSERT INTO TARGET_INFO_GPU VALUES (0, ?, ?)");
  sqlite3_stmt* cud = db.prepare("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, ?)");
  std::string d = ri.devices;
  for (size_t at = 0; !d.empty() && at <= d.size();) {
    size_t c = std::min(d.find(',', at), d.size());
    int64_t id = std::stoll(d.substr(at, c - at));
    sqlite3_bind_int64(gpu, 1, id);
    sqlite3_bind_text(gpu, 2, ri.device_name.data(), static_cast<int>(ri.device_name.size()),
                      SQLITE_STATIC);
    db.run(gpu);
    sqlite3_bind_int64(cud, 1, id);
    sqlite3_bind_int64(cud, 2, id);
    sqlite3_bind_int64(cud, 3, p.pid);
    db.run(cud);
    at = c + 1;
  }
  sqlite3_finalize(gpu);
  sqlite3_finalize(cud);
}

}  // namespace

void write_nsys_report(const std::vector<NsysProcessOut>& procs, const std::string& path) {
  if (procs.empty()) throw std::runtime_error(path + ": no process to write");
  Db db(path);
  db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;");
  db.exec(kSchema);
  // Anchor: the earliest time of all processes, so every written time is ns since the start.
  int64_t t0 = INT64_MAX;
  bool emulated = false;
  for (const auto& p : procs) {
    const Store& s = *p.store;
    for (auto v : s.activities.start_ns) t0 = std::min(t0, v);
    for (auto v : s.launches.start_ns) t0 = std::min(t0, v);
    for (auto v : s.annotations.start_ns) t0 = std::min(t0, v);
    emulated = emulated || s.ranks.at(0).emulated;
  }
  if (t0 == INT64_MAX) t0 = 0;
  db.exec(
      "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.17.1'),"
      "('EXPORT_PRODUCT_NAME', 'kernalyse-tracegen (synthetic, not NVIDIA Nsight Systems)')" +
      std::string(emulated ? ",('kernalyseSynthetic', 'true');" : ";"));
  db.exec("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (" + std::to_string(t0) +
          ", '', '');");
  db.exec("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, 'Global', 'Hostname', 0, " +
          q(procs[0].host) + ");");
  if (procs[0].system_rank >= 0)
    db.exec("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, 'Global', 'RANK', 0, '" +
            std::to_string(procs[0].system_rank) + "');");
  for (const auto& [k, v] : procs[0].env)
    db.exec("INSERT INTO META_DATA_CAPTURE VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', " +
            q(k + "=\"" + v + "\"") + ");");
  db.exec(
      "INSERT INTO NVTX_PAYLOAD_SCHEMA_ENTRIES VALUES (1, 16777216, 0, NULL, 5, 'Rank', NULL, "
      "NULL, NULL), (1, 16777216, 1, NULL, 5, 'No. of ranks', NULL, NULL, 4), (1, 16777216, 2, "
      "NULL, 5, 'CUDA device', NULL, NULL, 8);");
  int64_t sid = 0;  // each process's string ids, after the previous processes' ones
  sqlite3_stmt* str = db.prepare("INSERT INTO StringIds VALUES (?, ?)");
  for (const auto& p : procs) {
    const Store& s = *p.store;
    for (size_t i = 0; i < s.strings.size(); ++i) {
      sqlite3_bind_int64(str, 1, sid + static_cast<int64_t>(i));
      const std::string& v = s.strings.at(static_cast<uint32_t>(i));
      sqlite3_bind_text(str, 2, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
      db.run(str);
    }
    write_devices(db, p);
    write_activities(db, p, t0, sid);
    write_cpu(db, p, t0, sid);
    write_nccl_evidence(db, p, t0, s.ranks.at(0).rank);
    sid += static_cast<int64_t>(s.strings.size());
  }
  sqlite3_finalize(str);
  db.exec("COMMIT;");
}

void write_nsys_rank(const Store& s, const std::string& path) {
  NsysProcessOut p;
  p.store = &s;
  const auto& ri = s.ranks.at(0);
  p.host = ri.host.empty() ? "tracegen-node" + std::to_string(ri.rank) : ri.host;
  p.system_rank = ri.rank;
  p.pid = s.launches.size() ? s.launches.pid[0] : 0;
  write_nsys_report({p}, path);
}
