// Performance-model formulas (perfmodel.h) on hand-written shapes, the peak table's lookup, the
// units of work and rate, and the /ops table's round trip through a store file.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kernalyse/error.h"
#include "kernalyse/kineto.h"
#include "kernalyse/perfmodel.h"
#include "kernalyse/store_io.h"
#include "kernalyse/units.h"

namespace kernalyse {
namespace {

OpWork work(const char* op, const char* dims, const char* types, const char* concrete = "") {
  std::vector<OpInput> in;
  parse_op_inputs(dims, types, concrete, &in);
  return op_work(op, in);
}

TEST(PerfModel, GemmFamily) {
  // mm: 2·M·N·K; bytes (MK + KN + MN)·2 in bf16.
  OpWork w = work("aten::mm", "[[8,16],[16,4]]", R"(["c10::BFloat16","c10::BFloat16"])");
  ASSERT_TRUE(w.known);
  EXPECT_EQ(w.family, OpFamily::Gemm);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 8 * 4 * 16);
  EXPECT_DOUBLE_EQ(w.bytes, (8 * 16 + 16 * 4 + 8 * 4) * 2.0);
  EXPECT_EQ(w.dtype, "bf16");
  // addmm: + M·N for the bias; the bias is read once.
  w = work("aten::addmm", "[[4],[8,16],[16,4],[],[]]",
           R"(["float","float","float","Scalar","Scalar"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 8 * 4 * 16 + 8 * 4);
  EXPECT_DOUBLE_EQ(w.bytes, (4 + 8 * 16 + 16 * 4 + 8 * 4) * 4.0);
  EXPECT_EQ(w.dtype, "fp32");
  // bmm and baddbmm: the batch multiplies.
  w = work("aten::bmm", "[[3,8,16],[3,16,4]]", R"(["c10::Half","c10::Half"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 3 * 8 * 4 * 16);
  EXPECT_EQ(w.dtype, "fp16");
  w = work("aten::baddbmm", "[[3,8,4],[3,8,16],[3,16,4],[],[]]",
           R"(["c10::Half","c10::Half","c10::Half","Scalar","Scalar"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 3 * 8 * 4 * 16 + 3 * 8 * 4);
  // linear: leading dims of the input are M; weight [N, K]; optional bias.
  w = work("aten::linear", "[[2,5,16],[4,16],[4]]",
           R"(["c10::BFloat16","c10::BFloat16","c10::BFloat16"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 10 * 4 * 16 + 10 * 4);
  w = work("aten::linear", "[[2,5,16],[4,16],[]]", R"(["c10::BFloat16","c10::BFloat16",""])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 10 * 4 * 16);
  // matmul broadcasts the batch dims: [2,1,8,16] · [3,16,4] → batch 2·3.
  w = work("aten::matmul", "[[2,1,8,16],[3,16,4]]", R"(["float","float"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 6 * 8 * 4 * 16);
  // matmul of a vector: [16] · [16, 4] → M = 1.
  w = work("aten::matmul", "[[16],[16,4]]", R"(["float","float"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 4 * 16);
  // _scaled_mm: fp8 inputs, bf16 output, scales not counted.
  w = work("aten::_scaled_mm", "[[32,64],[64,16],[],[]]",
           R"(["c10::Float8_e4m3fn","c10::Float8_e4m3fn","float","float"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 32 * 16 * 64);
  EXPECT_EQ(w.dtype, "fp8");
  EXPECT_DOUBLE_EQ(w.bytes, 32 * 64 + 64 * 16 + 32 * 16 * 2.0);
  // Wrong arity: not modelled, never an exception.
  EXPECT_FALSE(work("aten::mm", "[[8,16,3],[16,4]]", R"(["float","float"])").known);
}

TEST(PerfModel, Attention) {
  // _flash_attention_forward: [B, S, H, D], is_causal at position 8.
  const char* types =
      R"(["c10::BFloat16","c10::BFloat16","c10::BFloat16","","","Scalar","Scalar","Scalar","Scalar"])";
  OpWork w = work("aten::_flash_attention_forward",
                  "[[2,128,4,64],[2,128,4,64],[2,128,4,64],[],[],[],[],[],[]]", types,
                  R"(["","","","","","128","128","0.","False"])");
  ASSERT_TRUE(w.known);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 2 * 4 * 128 * 128 * (64 + 64));
  EXPECT_DOUBLE_EQ(w.bytes, 4.0 * 2 * 128 * 4 * 64 * 2);
  w = work("aten::_flash_attention_forward",
           "[[2,128,4,64],[2,128,4,64],[2,128,4,64],[],[],[],[],[],[]]", types,
           R"(["","","","","","128","128","0.","True"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 2 * 4 * 128 * 128 * (64 + 64) / 2);
  // SDPA entry points: [B, H, S, D]; cross attention Sq ≠ Sk.
  w = work(
      "aten::_scaled_dot_product_flash_attention", "[[2,4,16,64],[2,4,32,64],[2,4,32,64],[],[]]",
      R"(["c10::Half","c10::Half","c10::Half","Scalar","Scalar"])", R"(["","","","0.","False"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 2 * 4 * 16 * 32 * 128);
  w = work("aten::_scaled_dot_product_efficient_attention",
           "[[2,4,16,64],[2,4,16,64],[2,4,16,64],[],[],[],[]]",
           R"(["c10::Half","c10::Half","c10::Half","","Scalar","Scalar","Scalar"])",
           R"(["","","","","True","0.","True"])");
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 2 * 4 * 16 * 16 * 128 / 2);
  // No causal flag recorded: not guessed.
  w = work("aten::_scaled_dot_product_flash_attention", "[[2,4,16,64],[2,4,32,64],[2,4,32,64]]",
           R"(["c10::Half","c10::Half","c10::Half"])");
  EXPECT_FALSE(w.known);
  EXPECT_EQ(w.why, "causal flag not recorded");
}

TEST(PerfModel, Convolution) {
  // The H100 owlv2 patch embedding: cudnn_convolution(x[1,3,1008,1008], w[1024,3,14,14],
  // padding [0,0], stride [14,14], dilation [1,1], groups 1) → out 72×72.
  OpWork w =
      work("aten::cudnn_convolution", "[[1,3,1008,1008],[1024,3,14,14],[],[],[],[]]",
           R"(["c10::BFloat16","c10::BFloat16","ScalarList","ScalarList","ScalarList","Scalar"])",
           R"(["","","[0, 0]","[14, 14]","[1, 1]","1"])");
  ASSERT_TRUE(w.known);
  EXPECT_DOUBLE_EQ(w.flops, 2.0 * 1 * 1024 * 72 * 72 * 3 * 14 * 14);
  // conv2d(input, weight, bias, stride, padding, dilation, groups), padded, grouped, with bias.
  w = work("aten::conv2d", "[[2,8,10,10],[16,4,3,3],[16],[],[],[],[]]",
           R"(["float","float","float","ScalarList","ScalarList","ScalarList","Scalar"])",
           R"(["","","","[1, 1]","[1, 1]","[1, 1]","2"])");
  ASSERT_TRUE(w.known);
  const double out = 2.0 * 16 * 10 * 10;
  EXPECT_DOUBLE_EQ(w.flops, 2 * out * 4 * 9 + out);
  // A hostile stride of 0 (or a huge padding) is "not modelled", never a division by zero.
  EXPECT_FALSE(work("aten::conv2d", "[[2,8,10,10],[16,4,3,3],[16],[],[],[],[]]",
                    R"(["float","float","float","ScalarList","ScalarList","ScalarList","Scalar"])",
                    R"(["","","","[0, 0]","[1, 1]","[1, 1]","1"])")
                   .known);
  EXPECT_TRUE(work("aten::conv2d", "[[2,8,10,10],[16,4,3,3],[16],[],[],[],[]]",
                   R"(["float","float","float","ScalarList","ScalarList","ScalarList","Scalar"])",
                   R"(["","","","[1, 1]","[9223372036854775807, 1]","[1, 1]","1"])")
                  .known);
  // Stride / padding not recorded: not modelled.
  EXPECT_FALSE(
      work("aten::conv2d", "[[2,8,10,10],[16,4,3,3],[16]]", R"(["float","float","float"])").known);
}

TEST(PerfModel, BytesOnlyFamilies) {
  // Elementwise: inputs read, broadcast output written; no FLOPs counted.
  OpWork w = work("aten::mul", "[[16,559,1024],[16,559,1]]", R"(["float","float"])");
  ASSERT_TRUE(w.known);
  EXPECT_EQ(w.family, OpFamily::Elementwise);
  EXPECT_DOUBLE_EQ(w.flops, 0);
  EXPECT_DOUBLE_EQ(w.bytes, (16.0 * 559 * 1024 + 16 * 559) * 4 + 16.0 * 559 * 1024 * 4);
  // Scalars ("Scalar", "double") are not tensors.
  w = work("aten::add", "[[16,559,1],[],[]]", R"(["float","double","Scalar"])");
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * 16 * 559 * 4);
  // copy_(self, src): src read in its type, self written in its own.
  w = work("aten::copy_", "[[1,1,559],[1,1,559],[]]", R"(["float","long int","Scalar"])");
  EXPECT_EQ(w.family, OpFamily::Copy);
  EXPECT_DOUBLE_EQ(w.bytes, 559.0 * 8 + 559.0 * 4);
  // Norm and softmax: output like the input; weights read.
  w = work("aten::native_layer_norm", "[[2,8,64],[],[64],[64],[]]",
           R"(["c10::BFloat16","ScalarList","c10::BFloat16","c10::BFloat16","Scalar"])");
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * (2 * 8 * 64) * 2 + 2 * 64 * 2);
  w = work("aten::_softmax", "[[4,16,16],[],[]]", R"(["c10::BFloat16","Scalar","Scalar"])");
  EXPECT_EQ(w.family, OpFamily::Softmax);
  EXPECT_DOUBLE_EQ(w.bytes, 2.0 * 4 * 16 * 16 * 2);
  // A tensor list's element type is not recorded: not modelled (nothing invented).
  w = work("aten::cat", "[[[2,3],[2,3]],[]]", R"(["TensorList","Scalar"])");
  EXPECT_FALSE(w.known);
  // No shapes at all, an unknown op.
  EXPECT_EQ(work("aten::mm", "", "").why, "no shapes recorded");
  EXPECT_EQ(work("aten::index_select", "[[4,4],[],[2]]", R"(["float","Scalar","long int"])").why,
            "no formula for this op");
}

TEST(PerfModel, PeakTable) {
  auto p = find_peaks("NVIDIA H100 80GB HBM3");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->name, "NVIDIA H100 SXM");
  EXPECT_DOUBLE_EQ(p->bytes_per_s, 3.35e12);
  EXPECT_DOUBLE_EQ(peak_flops(*p, "bf16"), 989.5e12);
  EXPECT_EQ(find_peaks("NVIDIA H100 PCIe")->name, "NVIDIA H100 PCIe");
  EXPECT_EQ(find_peaks("NVIDIA A100-SXM4-40GB")->name, "NVIDIA A100 SXM4 40GB");
  EXPECT_EQ(find_peaks("NVIDIA A100-SXM4-80GB")->name, "NVIDIA A100 SXM4 80GB");
  EXPECT_EQ(find_peaks("Tesla V100-SXM2-16GB")->name, "NVIDIA V100 SXM2");
  EXPECT_EQ(find_peaks("NVIDIA GeForce RTX 4060 Ti")->name, "NVIDIA GeForce RTX 4060 Ti");
  EXPECT_EQ(find_peaks("NVIDIA L40S")->name, "NVIDIA L40S");
  EXPECT_EQ(find_peaks("NVIDIA L4")->name, "NVIDIA L4");
  EXPECT_EQ(find_peaks("AMD Instinct MI300X")->name, "AMD Instinct MI300X");
  EXPECT_EQ(find_peaks("NVIDIA B200")->name, "NVIDIA B200");
  EXPECT_FALSE(find_peaks("NVIDIA GeForce RTX 2080 Ti"));
  EXPECT_FALSE(find_peaks(""));
  // Every entry has a bandwidth, a source and at least one FLOP/s figure.
  for (const DevicePeaks& d : builtin_peaks()) {
    EXPECT_GT(d.bytes_per_s, 0) << d.name;
    EXPECT_FALSE(d.source.empty()) << d.name;
    EXPECT_GT(d.fp32, 0) << d.name;
  }
}

TEST(PerfModel, Units) {
  EXPECT_EQ(format_flops(812), "812 FLOP");
  EXPECT_EQ(format_flops(1.234e9), "1.23 GFLOP");
  EXPECT_EQ(format_flop_rate(456.7e12), "457 TFLOP/s");
  EXPECT_EQ(format_flop_rate(45.67e12), "45.7 TFLOP/s");
  EXPECT_EQ(format_bandwidth(3.35e12), "3.35 TB/s");
}

TEST(PerfModel, OpsTableRoundTrip) {
  // A minimal trace with shapes: the op joins its launch by External id, survives the store file.
  const std::string json = R"({"traceEvents":[
    {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":5,
     "args":{"External id":7,"Input Dims":[[8, 16], [16, 4]],"Input type":["float","float"]}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":11,"dur":1,
     "args":{"External id":7,"correlation":99}},
    {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":20,"dur":3,
     "args":{"device":0,"stream":7,"correlation":99}}]})";
  ImportOptions io;
  io.rank = 0;
  Store s = import_kineto_string(json, "t.json", io, nullptr);
  ASSERT_EQ(s.ops.size(), 1u);
  EXPECT_EQ(s.strings.at(s.ops.name_id[0]), "aten::mm");
  EXPECT_EQ(s.strings.at(s.ops.dims_id[0]), "[[8,16],[16,4]]");  // whitespace removed
  EXPECT_EQ(s.ops.correlation[0], 99);
  EXPECT_EQ(s.ops.external_id[0], 7);
  const std::string path = testing::TempDir() + "/perfmodel_ops.h5";
  std::filesystem::remove(path);
  write_store(s, path, {});
  Store r = read_store(path, ColumnSelection::all());
  ASSERT_EQ(r.ops.size(), 1u);
  EXPECT_EQ(r.strings.at(r.ops.types_id[0]), R"(["float","float"])");
  EXPECT_EQ(r.ops.start_ns[0], 10000);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kernalyse
