// kernalyse-tracegen --nccl-ops (nccl_ops_gen.h). Every rank runs S steps of 10 ms; in step s:
//   a GEMM on stream 7, longer by 300 us on rank s % R: it arrives last at the all-reduce;
//   an all-reduce on stream 23 (ends together on every rank);
//   an all-to-all(v) on stream 23 whose splits are planted uneven: rank i sends
//   kA2aUnit * (1 + (i * R + j) % 5) elements to rank j (BFloat16), beside a second GEMM;
//   a send to rank r + 1 on stream 23 and a receive from rank r - 1 on stream 24;
//   with ce: an all-gather on the copy engines, a device-to-device copy on stream 25 (no kernel).
// Kineto files carry PyTorch's collective args (Seq, Comms Id, split sizes); Nsight Systems files
// carry NCCL_GPU_OPERATIONS(_COLLECTIVE) with operationId, seqNumber and the communicator's hash.
// The truth file lists what was planted: each all-reduce's last rank, the all-to-all byte matrix,
// the send/receive pairs, per rank the communication time (copy-engine collectives included).
#include "nccl_ops_gen.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernalyse/store.h"
#include "nsys_writer.h"

namespace {

using kernalyse::Store;
using i64 = int64_t;

constexpr i64 kUs = 1000, kPeriod = 10000 * kUs, kBase = 1700000000000000000;
constexpr i64 kA2aUnit = 4096;
constexpr uint64_t kCommHash = 0x5eed0000c0ffee01ULL;

uint64_t op_id(int kind, int step, int src) {
  uint64_t z = 0x9e3779b97f4a7c15ULL * (uint64_t(kind) * 1000003 + uint64_t(step) * 1009 + src + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  return (z ^ (z >> 27)) | 1;  // never 0 (0 = no id)
}

i64 a2a_elems(int i, int j, int n) { return kA2aUnit * (1 + (i * n + j) % 5); }

std::string list(const std::vector<i64>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// One GPU op of a rank with its NCCL metadata (coll empty: computation).
struct Op {
  i64 start, end;
  int stream;
  bool copy;
  std::string name, coll, nsys_name;
  i64 seq = -1, nelems = -1;
  uint64_t id = 0;
  std::string in_split = "[]", out_split = "[]";
};

std::vector<Op> rank_ops(const NcclOpsOptions& o, int r) {
  const int n = o.ranks;
  std::vector<Op> v;
  for (int s = 0; s < o.steps; ++s) {
    const i64 t = kBase + s * kPeriod, late = r == s % n ? 300 * kUs : 0;
    v.push_back({t + 100 * kUs, t + 2000 * kUs + late, 7, false, "gemm_kernel_a", "", ""});
    if (!(s == 0 && r == o.late_rank)) {
      Op ar{t + 2000 * kUs + late + r * 5 * kUs,
            t + 2900 * kUs,
            23,
            false,
            "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "allreduce",
            "AllReduce"};
      ar.seq = 3 * s, ar.nelems = 1 << 20, ar.id = op_id(0, s, 0);
      v.push_back(ar);
    }
    v.push_back({t + 3000 * kUs, t + 5000 * kUs, 7, false, "gemm_kernel_b", "", ""});
    Op a2a{t + 3500 * kUs + r * 7 * kUs, t + 4500 * kUs, 23,        false,
           "ncclDevKernel_SendRecv",     "all_to_allv",  "AllToAll"};
    std::vector<i64> in, out;
    for (int j = 0; j < n; ++j) in.push_back(a2a_elems(r, j, n)), out.push_back(a2a_elems(j, r, n));
    a2a.seq = 3 * s + 1, a2a.id = op_id(1, s, 0), a2a.in_split = list(in),
    a2a.out_split = list(out);
    a2a.nelems = 0;
    for (i64 e : in) a2a.nelems += e;
    v.push_back(a2a);
    Op send{t + 5500 * kUs + r * 3 * kUs, t + 6000 * kUs, 23,    false,
            "ncclDevKernel_SendRecv",     "send",         "Send"};
    send.nelems = 1 << 16, send.id = op_id(2, s, r), send.seq = 3 * s + 2;
    Op recv = send;
    recv.stream = 24, recv.coll = "recv", recv.nsys_name = "Recv";
    recv.id = op_id(2, s, (r + n - 1) % n);
    v.push_back(send), v.push_back(recv);
    if (o.ce) {
      Op ce{t + 6500 * kUs,    t + 7500 * kUs, 25, true, "Memcpy PtoP (Device -> Device)",
            "_allgather_base", "AllGather"};
      ce.seq = 3 * s + 2, ce.nelems = 1 << 18, ce.id = op_id(3, s, 0);
      v.push_back(ce);
    }
  }
  return v;
}

std::string host_of(const NcclOpsOptions& o, int r) {
  return "tracegen-node" + std::to_string(o.ranks_per_host > 0 ? r / o.ranks_per_host : 0);
}

std::string ts_us(i64 ns) {
  char b[48];
  std::snprintf(b, sizeof b, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
  return b;
}

void write_kineto(const NcclOpsOptions& o, int r, const std::vector<Op>& ops) {
  const std::string ranks = [&] {
    std::vector<i64> v;
    for (int i = 0; i < o.ranks; ++i) v.push_back(i);
    return list(v);
  }();
  std::string j =
      "{\"schemaVersion\": 1, \"kernalyseSynthetic\": true, \"deviceProperties\": "
      "[{\"id\": 0, \"name\": \"kernalyse synthetic GPU (emulated)\"}],\n"
      "\"distributedInfo\": {\"backend\": \"nccl\", \"rank\": " +
      std::to_string(r) + ", \"world_size\": " + std::to_string(o.ranks) +
      "}, \"baseTimeNanoseconds\": " + std::to_string(kBase) + ",\n\"traceEvents\": [";
  const int pid = 1000 + r;
  for (int s = 0; s < o.steps; ++s)
    j += std::string(s ? "," : "") +
         "\n{\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": " + "\"ProfilerStep#" +
         std::to_string(s) + "\", \"pid\": " + std::to_string(pid) +
         ", \"tid\": 1, \"ts\": " + ts_us(s * kPeriod) + ", \"dur\": " + ts_us(kPeriod) + "}";
  i64 corr = 1;
  for (const Op& op : ops) {
    const std::string c = std::to_string(corr++);
    j += ",\n{\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"" +
         std::string(op.copy ? "cudaMemcpyAsync" : "cudaLaunchKernel") +
         "\", \"pid\": " + std::to_string(pid) +
         ", \"tid\": 1, \"ts\": " + ts_us(op.start - kBase - 50 * kUs) +
         ", \"dur\": 5.000, \"args\": {\"correlation\": " + c + "}}";
    j += ",\n{\"ph\": \"X\", \"cat\": \"" + std::string(op.copy ? "gpu_memcpy" : "kernel") +
         "\", \"name\": \"" + op.name + "\", \"pid\": 0, \"tid\": " + std::to_string(op.stream) +
         ", \"ts\": " + ts_us(op.start - kBase) + ", \"dur\": " + ts_us(op.end - op.start) +
         ", \"args\": {\"device\": 0, \"stream\": " + std::to_string(op.stream) +
         ", \"correlation\": " + c;
    if (!op.coll.empty()) {
      j += ", \"Collective name\": \"" + op.coll +
           "\", \"In msg nelems\": " + std::to_string(op.nelems) +
           ", \"Out msg nelems\": " + std::to_string(op.nelems) +
           ", \"Group size\": " + std::to_string(o.ranks) +
           ", \"dtype\": \"BFloat16\", \"In split size\": \"" + op.in_split +
           "\", \"Out split size\": \"" + op.out_split +
           "\", \"Process Group Name\": \"0\", \"Process Group Description\": \"default_pg\", "
           "\"Process Group Ranks\": \"" +
           ranks + "\"";
      if (op.seq >= 0) j += ", \"Seq\": " + std::to_string(op.seq);
      if (o.ids) j += ", \"Comms Id\": " + std::to_string(op.id);
    }
    j += "}}";
  }
  j += "\n]}\n";
  // tensorboard_trace_handler's name: <host>_<pid>.<ts>.pt.trace.json (the host comes from it).
  const std::string path =
      (std::filesystem::path(o.out) /
       (host_of(o, r) + "_" + std::to_string(pid) + "." + std::to_string(r) + ".pt.trace.json"))
          .string();
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(j.data(), 1, j.size(), f) != j.size() || std::fclose(f) != 0)
    throw std::runtime_error("cannot write " + path);
}

Store rank_store(const NcclOpsOptions& o, int r, const std::vector<Op>& ops) {
  Store s;
  auto& a = s.activities;
  auto& l = s.launches;
  i64 corr = 1;
  for (const Op& op : ops) {
    a.rank.push_back(r), a.device.push_back(0), a.stream.push_back(op.stream);
    a.kind.push_back(uint8_t(op.copy ? kernalyse::Kind::Memcpy : kernalyse::Kind::Kernel));
    a.category.push_back(0), a.start_ns.push_back(op.start), a.end_ns.push_back(op.end);
    a.name_id.push_back(s.strings.intern(op.name)), a.correlation.push_back(corr);
    a.step.push_back(kernalyse::kNoStep);
    l.rank.push_back(r), l.pid.push_back(1000 + r), l.tid.push_back(1);
    l.start_ns.push_back(op.start - 50 * kUs), l.end_ns.push_back(op.start - 45 * kUs);
    l.name_id.push_back(s.strings.intern(op.copy ? "cudaMemcpyAsync" : "cudaLaunchKernel"));
    l.correlation.push_back(corr++), l.step.push_back(kernalyse::kNoStep);
  }
  auto& an = s.annotations;
  for (int k = 0; k < o.steps; ++k) {
    an.rank.push_back(r), an.kind.push_back(uint8_t(kernalyse::AnnotationKind::Step));
    an.pid.push_back(1000 + r), an.tid.push_back(1), an.start_ns.push_back(kBase + k * kPeriod);
    an.end_ns.push_back(kBase + (k + 1) * kPeriod);
    an.name_id.push_back(s.strings.intern("ProfilerStep#" + std::to_string(k)));
    an.step.push_back(k);
  }
  kernalyse::RankInfo ri;
  ri.rank = r, ri.world_size = o.ranks, ri.host = host_of(o, r), ri.devices = "0";
  ri.device_name = "kernalyse synthetic GPU (emulated)", ri.emulated = true;
  s.ranks = {ri};
  return s;
}

// NCCL_GPU_OPERATIONS and NCCL_GPU_OPERATIONS_COLLECTIVE with the columns of NVIDIA's recipe
// composite tables; times as the writer's (ns since the session start, t0 = the first step).
void write_nsys_ops(const std::string& path, int r, const std::vector<Op>& ops) {
  sqlite3* db = nullptr;
  auto fail = [&](const char* what) {
    std::string m = std::string(what) + ": " + (db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_close(db);
    throw std::runtime_error(path + ": " + m);
  };
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) fail("open");
  if (sqlite3_exec(db,
                   "BEGIN; CREATE TABLE NCCL_GPU_OPERATIONS (localId INTEGER, text TEXT, start "
                   "INTEGER, end INTEGER, commHash INTEGER, commRank INTEGER, count INTEGER, "
                   "dataType TEXT, operationClass TEXT, operationId INTEGER);"
                   "CREATE TABLE NCCL_GPU_OPERATIONS_COLLECTIVE (localId INTEGER, text TEXT, start "
                   "INTEGER, end INTEGER, commHash INTEGER, commRank INTEGER, count INTEGER, "
                   "dataType TEXT, seqNumber INTEGER, apiId INTEGER);",
                   nullptr, nullptr, nullptr) != SQLITE_OK)
    fail("create");
  sqlite3_stmt *g = nullptr, *c = nullptr;
  if (sqlite3_prepare_v2(db, "INSERT INTO NCCL_GPU_OPERATIONS VALUES (?,?,?,?,?,?,?,?,?,?)", -1, &g,
                         nullptr) != SQLITE_OK ||
      sqlite3_prepare_v2(db,
                         "INSERT INTO NCCL_GPU_OPERATIONS_COLLECTIVE VALUES (?,?,?,?,?,?,?,?,?,?)",
                         -1, &c, nullptr) != SQLITE_OK)
    fail("prepare");
  i64 local = 0;
  for (const Op& op : ops) {
    if (op.coll.empty()) continue;
    const bool p2p = op.coll == "send" || op.coll == "recv";
    // One GPU operation merged from its channels' events: inside the kernel or copy.
    const i64 s = op.start - kBase + kUs, e = op.end - kBase - kUs;
    for (sqlite3_stmt* st : {g, c}) {
      if (st == c && p2p) continue;
      sqlite3_bind_int64(st, 1, local);
      sqlite3_bind_text(st, 2, op.nsys_name.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_int64(st, 3, s), sqlite3_bind_int64(st, 4, e);
      sqlite3_bind_int64(st, 5, i64(kCommHash)), sqlite3_bind_int64(st, 6, r);
      sqlite3_bind_int64(st, 7, op.nelems);
      sqlite3_bind_text(st, 8, "ncclBfloat16", -1, SQLITE_STATIC);
      if (st == g) {
        sqlite3_bind_text(st, 9, p2p ? "p2p" : "collective", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 10, i64(op.id));
      } else {
        sqlite3_bind_int64(st, 9, op.seq), sqlite3_bind_int64(st, 10, op.seq);
      }
      if (sqlite3_step(st) != SQLITE_DONE) fail("insert");
      sqlite3_reset(st);
    }
    ++local;
  }
  sqlite3_finalize(g), sqlite3_finalize(c);
  if (sqlite3_exec(db, "COMMIT;", nullptr, nullptr, nullptr) != SQLITE_OK) fail("commit");
  sqlite3_close(db);
}

// |U(intervals)| in ns.
i64 union_len(std::vector<std::pair<i64, i64>> v) {
  std::sort(v.begin(), v.end());
  i64 len = 0, cs = 0, ce = -1;
  for (auto [s, e] : v) {
    if (s > ce) {
      if (ce > cs) len += ce - cs;
      cs = s, ce = e;
    } else {
      ce = std::max(ce, e);
    }
  }
  if (ce > cs) len += ce - cs;
  return len;
}

void write_truth(const NcclOpsOptions& o, const std::vector<std::vector<Op>>& all) {
  const int n = o.ranks;
  std::string j = "{\n  \"ranks\": " + std::to_string(n) +
                  ", \"steps\": " + std::to_string(o.steps) +
                  ", \"late_rank\": " + std::to_string(o.late_rank) +
                  ", \"ids\": " + (o.ids ? "true" : "false") +
                  ", \"ce\": " + (o.ce ? "true" : "false") + ",\n  \"allreduce_last_rank\": {";
  bool first = true;
  for (int s = 0; s < o.steps; ++s) {
    if (s == 0 && o.late_rank >= 0) continue;  // one rank has no record of it: unmatched
    j += std::string(first ? "" : ", ") + "\"" + std::to_string(s) + "\": " + std::to_string(s % n);
    first = false;
  }
  j += "},\n  \"alltoall_bytes\": [";
  for (int i = 0; i < n; ++i) {
    std::vector<i64> row;
    for (int k = 0; k < n; ++k) row.push_back(a2a_elems(i, k, n) * 2 * o.steps);
    j += std::string(i ? ", " : "") + list(row);
  }
  j += "],\n  \"p2p_pairs\": " + std::to_string(o.steps * n) + ",\n  \"hosts\": [";
  for (int r = 0; r < n; ++r) j += std::string(r ? ", " : "") + "\"" + host_of(o, r) + "\"";
  j += "],\n  \"comm_us\": [";
  std::string ce = "],\n  \"ce_us\": [";
  for (int r = 0; r < n; ++r) {
    std::vector<std::pair<i64, i64>> comm, copies;
    for (const Op& op : all[size_t(r)])
      if (!op.coll.empty()) (op.copy ? copies : comm).push_back({op.start, op.end});
    const i64 c = union_len(copies);
    comm.insert(comm.end(), copies.begin(), copies.end());
    j += std::string(r ? ", " : "") + ts_us(union_len(comm));
    ce += std::string(r ? ", " : "") + ts_us(c);
  }
  j += ce + "]\n}\n";
  FILE* f = std::fopen(o.truth.c_str(), "wb");
  if (!f || std::fwrite(j.data(), 1, j.size(), f) != j.size() || std::fclose(f) != 0)
    throw std::runtime_error("cannot write " + o.truth);
}

}  // namespace

void write_nccl_ops_job(const NcclOpsOptions& o) {
  if (o.ranks < 2) throw std::runtime_error("--nccl-ops needs --ranks 2 or more");
  if (o.format != "json" && o.format != "nsys")
    throw std::runtime_error("--nccl-ops writes --format json or nsys");
  std::filesystem::create_directories(o.out);
  std::vector<std::vector<Op>> all;
  for (int r = 0; r < o.ranks; ++r) {
    all.push_back(rank_ops(o, r));
    if (o.format == "json") {
      write_kineto(o, r, all.back());
      continue;
    }
    const std::string path =
        (std::filesystem::path(o.out) / ("rank-" + std::to_string(r) + ".sqlite")).string();
    std::filesystem::remove(path);
    write_nsys_rank(rank_store(o, r, all.back()), path);
    if (o.ids) write_nsys_ops(path, r, all.back());
  }
  if (!o.truth.empty()) write_truth(o, all);
}
