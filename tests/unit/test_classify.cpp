#include <gtest/gtest.h>

#include "kernalyse/classify.h"

using namespace kernalyse;

TEST(Classify, OldAndNewNcclNamesAreCommunication) {
  Classifier c;
  for (const char* n :
       {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)",
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "ncclDevKernel_Generic", "ncclSymkDevKernel_AllReduce_bf16",
        "void ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "rcclGenericKernel<1>"}) {
    EXPECT_EQ(c.classify(Kind::Kernel, n), Category::Communication) << n;
  }
  EXPECT_EQ(c.classify(Kind::Kernel, "void at::native::elementwise_kernel<4>(int)"),
            Category::Computation);
  EXPECT_EQ(c.classify(Kind::Kernel, "cross_device_reduce_1stage<bf16, 8>"), Category::Computation);
  EXPECT_EQ(c.classify(Kind::Memcpy, "Memcpy DtoD (Device -> Device)"), Category::Memory);
  EXPECT_EQ(c.classify(Kind::Memset, "Memset (Device)"), Category::Memory);
  EXPECT_EQ(c.classify(Kind::Sync, "Stream Sync"), Category::Other);
}

TEST(Classify, UserRegexExtendsCommunication) {
  Classifier c({"^cross_device_reduce", "nvshmem"});
  EXPECT_EQ(c.classify(Kind::Kernel, "cross_device_reduce_1stage<bf16, 8>"),
            Category::Communication);
  EXPECT_EQ(c.classify(Kind::Kernel, "void nvshmemi_proxy_kernel()"), Category::Communication);
  EXPECT_EQ(c.classify(Kind::Kernel, "gemm"), Category::Computation);
}

TEST(Simplify, FoldsTemplatesAndParameters) {
  EXPECT_EQ(simplify_kernel_name("void at::native::elementwise_kernel<128, 2, "
                                 "at::native::gpu_kernel_impl<foo(int)::{lambda()#1}>>(int, "
                                 "at::native::Foo<float>)"),
            "at::native::elementwise_kernel");
  EXPECT_EQ(simplify_kernel_name("void at::native::(anonymous namespace)::CatArrayBatchedCopy<"
                                 "at::native::(anonymous namespace)::OpaqueType<2u>, unsigned "
                                 "int, 1, 128, 1>(int*)"),
            "at::native::(anonymous namespace)::CatArrayBatchedCopy");
  EXPECT_EQ(
      simplify_kernel_name("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
      "ncclDevKernel_AllGather_RING_LL");
  EXPECT_EQ(simplify_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64");
  EXPECT_EQ(simplify_kernel_name("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>(Params)"),
            "cutlass::Kernel");
  EXPECT_EQ(simplify_kernel_name("Foo<int>::bar<float>(x)"), "Foo::bar");
  EXPECT_EQ(simplify_kernel_name(""), "");
}
