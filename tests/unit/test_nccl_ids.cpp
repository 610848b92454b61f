// NCCL's own ids and copy-engine collectives: Kineto's "Comms Id", split sizes and NCCL args on a
// copy; the join of Nsight Systems' NCCL GPU operations to kernels and copies; the matcher's tiers.
#include <gtest/gtest.h>

#include "../../aggregator/src/nccl_ops.h"
#include "kernalyse/collectives.h"
#include "kernalyse/kineto.h"
#include "kernalyse/store.h"

using namespace kernalyse;

namespace {

Store kineto(const std::string& events) {
  ImportOptions o;
  o.rank = 0;
  return import_kineto_string(
      R"({"distributedInfo": {"rank": 0, "world_size": 2}, "traceEvents": [)" + events + "]}",
      "t.json", o, nullptr);
}

const char* kKernel =
    R"({"ph": "X", "cat": "kernel", "name": "ncclDevKernel_SendRecv", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 1, "Collective name": "all_to_allv", "In msg nelems": 8, "Out msg nelems": 8, "dtype": "Float", "In split size": "[2, 6]", "Out split size": "[3, 5]", "Process Group Name": "0", "seq": 4, "Comms Id": 18446744073709551615}})";

}  // namespace

TEST(NcclIds, KinetoCommsIdSplitsAndLowercaseSeq) {
  Store s = kineto(kKernel);
  ASSERT_EQ(s.nccl.size(), 1u);
  EXPECT_EQ(s.nccl.op_id[0], UINT64_MAX);  // above INT64_MAX: read as unsigned
  EXPECT_EQ(s.nccl.seq[0], 4);
  EXPECT_EQ(s.strings.at(s.nccl.in_splits_id[0]), "[2, 6]");
  EXPECT_EQ(s.strings.at(s.nccl.out_splits_id[0]), "[3, 5]");
  EXPECT_EQ(s.nccl.msg_bytes[0], 32);
}

TEST(NcclIds, KinetoCommsIdAsTextAndAbsent) {
  std::string e = kKernel;
  e.replace(e.find("18446744073709551615"), 20, "\"42\"");
  EXPECT_EQ(kineto(e).nccl.op_id[0], 42u);
  e.replace(e.find(", \"Comms Id\": \"42\""), 18, "");
  EXPECT_EQ(kineto(e).nccl.op_id[0], 0u);  // no id: unknown
}

TEST(NcclIds, KinetoCopyWithNcclArgsIsCommunication) {
  Store s = kineto(
      R"J({"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 9, "ts": 10, "dur": 5, "args": {
  "device" : 0, "stream" : 9, "correlation" : 1,
      "Collective name" : "_allgather_base", "In msg nelems" : 4, "dtype" : "Float"}},
         {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 9, "ts": 20, "dur": 5, "args": {"device": 0, "stream": 9, "correlation": 2}})J");
  ASSERT_EQ(s.activities.size(), 2u);
  ASSERT_EQ(s.nccl.size(), 1u);
  const size_t ce = s.nccl.activity[0], plain = 1 - ce;
  EXPECT_EQ(s.activities.kind[ce], static_cast<uint8_t>(Kind::Memcpy));
  EXPECT_EQ(s.activities.category[ce], static_cast<uint8_t>(Category::Communication));
  EXPECT_EQ(s.activities.category[plain], static_cast<uint8_t>(Category::Memory));
}

namespace {

void add(Store& s, int32_t rank, Kind k, Category c, int64_t t0, int64_t t1, const char* name) {
  Activities& a = s.activities;
  a.rank.push_back(rank), a.device.push_back(0), a.stream.push_back(k == Kind::Memcpy ? 9 : 7);
  a.kind.push_back(static_cast<uint8_t>(k)), a.category.push_back(static_cast<uint8_t>(c));
  a.start_ns.push_back(t0), a.end_ns.push_back(t1), a.name_id.push_back(s.strings.intern(name));
  a.correlation.push_back(kNoCorrelation), a.step.push_back(kNoStep);
}

}  // namespace

TEST(NcclIds, JoinOpsToKernelsAndCopies) {
  Store s;
  add(s, 0, Kind::Kernel, Category::Computation, 100, 200, "gemm");
  add(s, 0, Kind::Kernel, Category::Communication, 100, 200, "ncclDevKernel_SendRecv");
  add(s, 0, Kind::Memcpy, Category::Memory, 300, 400, "Memcpy PtoP");
  std::vector<NcclOpRecord> ops(3);
  ops[0] = {110, 190, "Send", 0xabcULL, 1, 10, "ncclBfloat16", 77, -1};
  ops[1] = {310, 390, "AllGather", 0xabcULL, 1, 8, "ncclFloat32", 78, 5};
  ops[2] = {500, 600, "AllReduce", 0xabcULL, 1, 8, "ncclFloat32", 79, 6};  // nothing there
  NcclOpJoin j = join_nccl_ops(s, ops);
  EXPECT_EQ(j.joined, 2u);
  EXPECT_EQ(j.copies, 1u);
  EXPECT_EQ(j.unjoined, 1u);
  ASSERT_EQ(s.nccl.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const uint64_t row = s.nccl.activity[i];
    EXPECT_NE(row, 0u) << "the compute kernel took no op";
    EXPECT_EQ(s.strings.at(s.nccl.pg_name_id[i]), "comm:0000000000000abc");
    EXPECT_EQ(s.nccl.comm_rank[i], 1);
    if (row == 1) {
      EXPECT_EQ(s.nccl.op_id[i], 77u);
      EXPECT_EQ(s.strings.at(s.nccl.collective_id[i]), "Send");
      EXPECT_EQ(s.nccl.msg_bytes[i], 20);
      EXPECT_EQ(s.strings.at(s.nccl.dtype_id[i]), "BFloat16");
    } else {
      EXPECT_EQ(row, 2u);
      EXPECT_EQ(s.nccl.op_id[i], 78u);
      EXPECT_EQ(s.nccl.seq[i], 5);
      EXPECT_EQ(s.activities.category[2], static_cast<uint8_t>(Category::Communication));
    }
  }
}

namespace {

// Two ranks' all-reduces (and a send/recv pair) with NCCL rows; rank 1 misses the first.
Store two_ranks(bool ids) {
  Store s;
  auto coll = [&](int32_t rank, int64_t t, const char* op, uint64_t id) {
    add(s, rank, Kind::Kernel, Category::Communication, t, t + 10, "ncclDevKernel_AllReduce");
    NcclInfo& n = s.nccl;
    n.activity.push_back(s.activities.size() - 1);
    n.collective_id.push_back(s.strings.intern(op));
    n.pg_name_id.push_back(s.strings.intern("comm:1"));
    n.op_id.push_back(ids ? id : 0);
  };
  coll(0, 0, "AllReduce", 11);
  coll(0, 100, "AllReduce", 12);
  coll(1, 105, "AllReduce", 12);
  coll(0, 200, "Send", 13);
  coll(1, 205, "Recv", 13);
  fill_unknown_columns(s);
  return s;
}

std::vector<uint32_t> all_rows(const Store& s) {
  std::vector<uint32_t> r(s.activities.size());
  for (uint32_t i = 0; i < r.size(); ++i) r[i] = i;
  return r;
}

}  // namespace

TEST(NcclIds, MatcherUsesOperationIdsBeforeOrder) {
  const Store s = two_ranks(true);
  const CollectiveMatch m = match_collectives(s, all_rows(s));
  EXPECT_EQ(m.method, "nccl operation id");
  EXPECT_EQ(matched_by(m.method), "operation id");
  ASSERT_EQ(m.matched.size(), 1u);
  EXPECT_EQ(m.matched[0].arrivals[0].row, 1u);  // rank 0's second all-reduce, id 12
  EXPECT_EQ(m.matched[0].arrivals[1].row, 2u);
  ASSERT_EQ(m.p2p.size(), 1u);  // the send and the receive share id 13
  EXPECT_EQ(m.unmatched_count, 1u);

  const Store o = two_ranks(false);
  const CollectiveMatch mo = match_collectives(o, all_rows(o));
  EXPECT_EQ(matched_by(mo.method), "order");
  ASSERT_EQ(mo.matched.size(), 1u);
  EXPECT_EQ(mo.matched[0].arrivals[0].row, 0u);  // order pairs rank 0's first with rank 1's
  EXPECT_EQ(matched_by("nccl (process group, collective, Seq)"), "(pg, seq)");
  EXPECT_EQ(matched_by("collector (communicator, collective, seq)"), "(pg, seq)");
  EXPECT_EQ(matched_by("kernel (name, stream, occurrence)"), "order");
}
