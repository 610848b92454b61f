// kernalyse-tracegen --format nsys: one rank's planted workload as an Nsight Systems SQLite
// export (the tables and columns `nsys export --type sqlite` schema 3.17 writes that kernalyse
// reads), so truth tests and the benchmark run on both formats. Times are written as nsys does:
// ns since the session start, with TARGET_INFO_SESSION_START_TIME holding the epoch anchor.
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

}  // namespace

void write_nsys_rank(const Store& s, const std::string& path) {
  Db db(path);
  db.exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN;");
  db.exec(
      "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);"
      "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime "
      "TEXT);"
      "CREATE TABLE TARGET_INFO_SYSTEM_ENV (globalVid INTEGER, devStateName TEXT NOT NULL, name "
      "TEXT "
      "NOT NULL, nameEnum INTEGER NOT NULL, value TEXT NOT NULL);"
      "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT);"
      "CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER NOT NULL, pid INTEGER "
      "NOT NULL);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
      "deviceId "
      "INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId "
      "INTEGER, "
      "globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, "
      "deviceId "
      "INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId "
      "INTEGER, "
      "globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, "
      "dstKind "
      "INTEGER);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, "
      "deviceId "
      "INTEGER NOT NULL, contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId "
      "INTEGER, "
      "globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER);"
      "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, "
      "eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT "
      "NULL, "
      "returnValue INTEGER NOT NULL, callchainId INTEGER);"
      "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
      "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, "
      "endGlobalTid "
      "INTEGER, textId INTEGER, domainId INTEGER);");
  const auto& ri = s.ranks.at(0);
  // Anchor: the earliest time of the rank, so every written time is ns since the session start.
  int64_t t0 = INT64_MAX;
  for (auto v : s.activities.start_ns) t0 = std::min(t0, v);
  for (auto v : s.launches.start_ns) t0 = std::min(t0, v);
  for (auto v : s.annotations.start_ns) t0 = std::min(t0, v);
  if (t0 == INT64_MAX) t0 = 0;
  const std::string meta =
      "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '3.17.1'),"
      "('EXPORT_PRODUCT_NAME', 'kernalyse-tracegen (synthetic, not NVIDIA Nsight Systems)')" +
      std::string(ri.emulated ? ",('kernalyseSynthetic', 'true');" : ";");
  db.exec(meta);
  db.exec("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (" + std::to_string(t0) +
          ", '', '');");
  db.exec("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (0, 'Global', 'RANK', 0, '" +
          std::to_string(ri.rank) + "'), (0, 'Global', 'Hostname', 0, '" +
          (ri.host.empty() ? "tracegen-node" + std::to_string(ri.rank) : ri.host) + "');");
  {
    sqlite3_stmt* st = db.prepare("INSERT INTO StringIds VALUES (?, ?)");
    for (size_t i = 0; i < s.strings.size(); ++i) {
      sqlite3_bind_int64(st, 1, static_cast<int64_t>(i));
      const std::string& v = s.strings.at(static_cast<uint32_t>(i));
      sqlite3_bind_text(st, 2, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
      db.run(st);
    }
    sqlite3_finalize(st);
  }
  sqlite3_stmt* gpu = db.prepare("INSERT INTO TARGET_INFO_GPU VALUES (0, ?, ?)");
  sqlite3_stmt* cud = db.prepare("INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (?, ?, 0)");
  {
    std::string d = ri.devices;
    for (size_t p = 0; !d.empty() && p <= d.size();) {
      size_t c = std::min(d.find(',', p), d.size());
      int64_t id = std::stoll(d.substr(p, c - p));
      sqlite3_bind_int64(gpu, 1, id);
      sqlite3_bind_text(gpu, 2, ri.device_name.data(), static_cast<int>(ri.device_name.size()),
                        SQLITE_STATIC);
      db.run(gpu);
      sqlite3_bind_int64(cud, 1, id);
      sqlite3_bind_int64(cud, 2, id);
      db.run(cud);
      p = c + 1;
    }
  }
  sqlite3_finalize(gpu);
  sqlite3_finalize(cud);
  sqlite3_stmt* k =
      db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, ?, ?, 0, ?, ?)");
  sqlite3_stmt* mc =
      db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, 1, ?, ?, 0, 0, ?, ?, ?)");
  sqlite3_stmt* ms =
      db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, ?, 1, ?, ?, 0, 0, 0, ?)");
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
    const std::string& name = s.strings.at(a.name_id[i]);
    auto [src, dst] = mem_kinds(name);
    if (st == k) {
      sqlite3_bind_int64(st, 6, a.name_id[i]);
      sqlite3_bind_int64(st, 7, a.name_id[i]);
    } else if (st == mc) {
      sqlite3_bind_int64(st, 6, copy_kind(name));
      sqlite3_bind_int64(st, 7, src);
      sqlite3_bind_int64(st, 8, dst);
    } else {
      sqlite3_bind_int64(st, 6, dst);
    }
    db.run(st);
  }
  sqlite3_finalize(k);
  sqlite3_finalize(mc);
  sqlite3_finalize(ms);
  // globalTid as nsys serializes it: pid << 24 | tid (24 bits each).
  auto gtid = [](int64_t pid, int64_t tid) { return ((pid & 0xFFFFFF) << 24) | (tid & 0xFFFFFF); };
  sqlite3_stmt* rt =
      db.prepare("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 1, ?, ?, ?, 0, NULL)");
  const auto& l = s.launches;
  for (size_t i = 0; i < l.size(); ++i) {
    sqlite3_bind_int64(rt, 1, l.start_ns[i] - t0);
    sqlite3_bind_int64(rt, 2, l.end_ns[i] - t0);
    sqlite3_bind_int64(rt, 3, gtid(l.pid[i], l.tid[i]));
    if (l.correlation[i] == kernalyse::kNoCorrelation)
      sqlite3_bind_null(rt, 4);
    else
      sqlite3_bind_int64(rt, 4, l.correlation[i]);
    sqlite3_bind_int64(rt, 5, l.name_id[i]);
    db.run(rt);
  }
  sqlite3_finalize(rt);
  // Steps and CPU ranges as NVTX push/pop ranges (59) on their thread; GPU annotations have no
  // NVTX form.
  sqlite3_stmt* nv =
      db.prepare("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, NULL, ?, ?, ?, 0)");
  const auto& an = s.annotations;
  for (size_t i = 0; i < an.size(); ++i) {
    if (static_cast<kernalyse::AnnotationKind>(an.kind[i]) == kernalyse::AnnotationKind::GpuUser)
      continue;
    sqlite3_bind_int64(nv, 1, an.start_ns[i] - t0);
    sqlite3_bind_int64(nv, 2, an.end_ns[i] - t0);
    sqlite3_bind_int64(nv, 3, gtid(an.pid[i], an.tid[i]));
    sqlite3_bind_int64(nv, 4, gtid(an.pid[i], an.tid[i]));
    sqlite3_bind_int64(nv, 5, an.name_id[i]);
    db.run(nv);
  }
  sqlite3_finalize(nv);
  db.exec("COMMIT;");
}
