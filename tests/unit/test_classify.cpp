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
  EXPECT_EQ(c.classify(Kind::Memcpy, "Memcpy DtoD (Device -> Device)"), Category::Memory);
  EXPECT_EQ(c.classify(Kind::Memset, "Memset (Device)"), Category::Memory);
  EXPECT_EQ(c.classify(Kind::Sync, "Stream Sync"), Category::Other);
}

TEST(Classify, UserRegexExtendsCommunication) {
  Classifier c({"^my_allgather", "ring_exchange"});
  EXPECT_EQ(c.classify(Kind::Kernel, "my_allgather_kernel<bf16, 8>"), Category::Communication);
  EXPECT_EQ(c.classify(Kind::Kernel, "void mylib::ring_exchange(int)"), Category::Communication);
  EXPECT_EQ(Classifier().classify(Kind::Kernel, "my_allgather_kernel<bf16, 8>"),
            Category::Computation);
  EXPECT_EQ(c.classify(Kind::Kernel, "gemm"), Category::Computation);
  // The built-in families stay communication with user patterns given.
  EXPECT_EQ(c.classify(Kind::Kernel, "void deep_ep::internode::combine<8>(int)"),
            Category::Communication);
}

// Communication kernels of libraries other than NCCL, by default (docs/analyses.md), with the
// names as their sources and real profiles spell them.
TEST(Classify, OtherLibrariesCommunicationKernels) {
  Classifier c;
  for (const char* n :
       {// DeepEP (deep_ep::intranode / internode / internode_ll) and DeepSeek's own build
        "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int, int const*, int*)",
        "void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*, int*)",
        "void deep_ep::intranode::cached_notify_combine<8>(void**, int*, int, int)",
        "void deep_ep::internode::combine<true, 2, 8>(int4*, float*)",
        "void deep_ep::internode::cached_notify<false>(int, int, int)",
        "void deep_ep::internode_ll::dispatch<true, 3, 7168>(void*, float*)",
        "void deep_ep::internode_ll::clean_low_latency_buffer<256>(int*, int, int*, int)",
        "dpsk::ep::internode::dispatch", "dpsk::ep::internode::notify_dispatch",
        // NVSHMEM's on-stream kernels
        "void nvshmemi_proxy_rma_entrypoint<(nvshmemi_op_t)1, 0>(void*, void*, int)",
        "nvshmemi_proxy_quiet_entrypoint()",
        "void nvshmemi_reduce_kernel<float, (rdxn_ops_t)4>(int, int, int, float*)",
        // vLLM / SGLang / aiter custom all-reduce, QuickReduce
        "void vllm::cross_device_reduce_1stage<c10::BFloat16, 8>(vllm::RankData*, "
        "vllm::RankSignals, vllm::Signal*, c10::BFloat16*, int, int)",
        "void vllm::cross_device_reduce_2stage<__half, 4>(vllm::RankData*)",
        "aiter::cross_device_reduce_2stage",
        "void quickreduce::allreduce_prototype_twoshot<AllReduceTwoshot<__half, "
        "CodecQ4<__half, 4>, true>, __half>(__half const*, __half*, unsigned int)",
        // TensorRT-LLM / SGLang trt_reduce, FlashInfer fusion
        "void tensorrt_llm::kernels::oneShotAllReduceKernel<__nv_bfloat16, 8>(AllReduceParams)",
        "void trt_llm::twoShotAllReduceKernel<float, 4>(trt_llm::AllReduceParams)",
        "void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<"
        "(flashinfer::trtllm_allreduce_fusion::AllReduceFusionPattern)1, __nv_bfloat16, 8, "
        "false, false>(flashinfer::trtllm_allreduce_fusion::AllReduceFusionParams<"
        "__nv_bfloat16>)",
        // PyTorch symmetric memory (the B200 trace in ../shared/traces has this one)
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>("
        "c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)",
        "void (anonymous namespace)::two_shot_all_reduce_kernel_inplace<c10::BFloat16, 16, "
        "2>(c10::BFloat16**, unsigned long, unsigned long, unsigned int**)",
        "c10d::symmetric_memory::one_shot_all_reduce_kernel<float, 8>"}) {
    EXPECT_EQ(c.classify(Kind::Kernel, n), Category::Communication) << n;
  }
}

// Real compute kernels (from the traces in ../shared/traces) whose names come close to those
// patterns stay computation.
TEST(Classify, ComputeKernelsNamedLikeCollectivesStayComputation) {
  Classifier c;
  for (const char* n :
       {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
        "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >("
        "at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, "
        "unsigned int, float, 4, 4>)",
        "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, true, "
        "false, false>(cublasLt::cublasSplitKParams<float>, float const*)",
        "void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*>>(long*)",
        "void at::native::_scatter_gather_elementwise_kernel<128, 4, "
        "at::native::_cuda_scatter_gather_internal_kernel<true, float>::operator()<"
        "at::native::ReduceAdd>(at::TensorIterator&, long, long, long)",
        "void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int)",
        "void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float, "
        "float, long>(float*, float*, float*, long*, float*, bool, long, long, long, long)",
        "void clover::par_reduce_kernel<field_summary(global_variables &, parallel_ &)>(T1)",
        "reduce_segments", "_combined_routing_compute", "triton_poi_fused_add_all_reduce_4",
        // MoE routing kernels that are local computation, not the exchange itself
        "void moe::dispatch_tokens_kernel<float>(float*)", "dispatch", "combine",
        "void my::internode_helper::dispatch(int)"}) {
    EXPECT_EQ(c.classify(Kind::Kernel, n), Category::Computation) << n;
  }
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
