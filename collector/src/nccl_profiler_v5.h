// The NCCL profiler plugin ABI, version 5 (NCCL 2.28.x), declared by kernalyse itself: NCCL
// ships no plugin headers (only nccl.h, which lacks the logger type), and its README tells
// plugin authors to carry their own copies. Field order and types follow NVIDIA/nccl v2.28.9-1:
//   src/include/plugin/profiler/profiler_v5.h   (descriptor, state args, function table)
//   src/include/plugin/nccl_profiler.h          (event type bits, event states)
//   src/include/nccl_common.h                   (ncclDebugLogger_t, log levels, subsystems)
//   src/include/nccl.h / nccl.h.in              (ncclResult_t values)
// Everything lives in a namespace so this header compiles without CUDA and next to nccl.h; the
// exported object (`ncclProfiler_v5`) is looked up by name only, so the namespace does not
// change the ABI. The static_asserts pin the x86-64/aarch64 (LP64) layout NCCL was built with.
#pragma once

#include <sys/types.h>  // pid_t

#include <cstddef>
#include <cstdint>

namespace kernalyse::ncclabi {

// nccl.h: ncclResult_t (an int-sized C enum).
enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

// nccl_common.h
enum ncclDebugLogLevel : int {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5,
};
// Subsystem flags (the `flags` argument of the logger); only the ones we use.
constexpr unsigned long NCCL_INIT = 0x1;
constexpr unsigned long NCCL_PROFILE = 0x4000;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);

// nccl_profiler.h: event type bits (descriptor `type`, activation mask).
enum : uint64_t {
  ncclProfileGroup = (1 << 0),  // one per kernel plan (legacy "group"); Coll/P2p parentGroup
  ncclProfileColl = (1 << 1),   // host collective task
  ncclProfileP2p = (1 << 2),    // host point-to-point task
  ncclProfileProxyOp = (1 << 3),
  ncclProfileProxyStep = (1 << 4),
  ncclProfileProxyCtrl = (1 << 5),
  ncclProfileKernelCh = (1 << 6),
  ncclProfileNetPlugin = (1 << 7),
  ncclProfileGroupApi = (1 << 8),       // ncclGroupStart..End (outermost), or an implicit group
  ncclProfileCollApi = (1 << 9),        // one ncclAllReduce(...) call
  ncclProfileP2pApi = (1 << 10),        // one ncclSend/ncclRecv call
  ncclProfileKernelLaunch = (1 << 11),  // brackets cuLaunchKernelEx of one plan
  ncclProfileKnownV5 = (1 << 12) - 1,   // bits defined by v5 (2.29 adds CE events at 1<<12..)
};

// nccl_profiler.h: ncclProfilerEventState_t (v5 uses the common enum).
enum ncclProfilerEventState_v5_t : int {
  ncclProfilerProxyOpSendPosted = 0,  // 0..7 deprecated in v4
  ncclProfilerProxyOpSendRemFifoWait = 1,
  ncclProfilerProxyOpSendTransmitted = 2,
  ncclProfilerProxyOpSendDone = 3,
  ncclProfilerProxyOpRecvPosted = 4,
  ncclProfilerProxyOpRecvReceived = 5,
  ncclProfilerProxyOpRecvTransmitted = 6,
  ncclProfilerProxyOpRecvDone = 7,
  ncclProfilerProxyOpInProgress_v4 = 19,
  ncclProfilerProxyStepSendGPUWait = 8,
  ncclProfilerProxyStepSendPeerWait_v4 = 20,
  ncclProfilerProxyStepSendWait = 9,
  ncclProfilerProxyStepRecvWait = 10,
  ncclProfilerProxyStepRecvFlushWait = 11,
  ncclProfilerProxyStepRecvGPUWait = 12,
  ncclProfilerProxyCtrlIdle = 13,
  ncclProfilerProxyCtrlActive = 14,
  ncclProfilerProxyCtrlSleep = 15,
  ncclProfilerProxyCtrlWakeup = 16,
  ncclProfilerProxyCtrlAppend = 17,
  ncclProfilerProxyCtrlAppendEnd = 18,
  ncclProfilerNetPluginUpdate = 21,
  ncclProfilerKernelChStop = 22,
  ncclProfilerGroupStartApiStop = 23,
  ncclProfilerGroupEndApiStart = 24,
};

// profiler_v5.h
struct ncclProfilerEventDescr_v5_t {
  uint64_t type;    // one ncclProfile* bit
  void* parentObj;  // handle of the parent event (Coll: its CollApi; CollApi: its GroupApi)
  int rank;         // originating rank
  union {
    struct {
      bool graphCaptured;
      int groupDepth;
    } groupApi;

    struct {
      const char* func;
      size_t count;
      const char* datatype;
      int root;
      void* stream;
      bool graphCaptured;
    } collApi;

    struct {
      const char* func;
      size_t count;
      const char* datatype;
      void* stream;
      bool graphCaptured;
    } p2pApi;

    struct {
      void* stream;
    } kernelLaunch;

    struct {
      uint64_t seqNumber;
      const char* func;
      void const* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
      void* parentGroup;  // the plan's ncclProfileGroup handle
    } coll;

    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
      void* parentGroup;
    } p2p;

    struct {
      pid_t pid;  // originating process: with PXN, parentObj belongs to another address space
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;

    struct {
      int step;
    } proxyStep;

    struct {
      uint8_t channelId;
      uint64_t pTimer;  // GPU %globaltimer at channel start
    } kernelCh;

    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
};

union ncclProfilerEventStateArgs_v5_t {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // GPU %globaltimer at channel stop
  } kernelCh;
};

struct ncclProfiler_v5_t {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName,
                       int nNodes, int nranks, int rank, ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, ncclProfilerEventState_v5_t eState,
                                   ncclProfilerEventStateArgs_v5_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
};

#if defined(__LP64__)
static_assert(sizeof(ncclResult_t) == 4 && sizeof(ncclProfilerEventState_v5_t) == 4);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, type) == 0);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, parentObj) == 8);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, rank) == 16);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, groupApi) == 24);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.seqNumber) == 24);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.count) == 24 + 32);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.root) == 24 + 40);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.datatype) == 24 + 48);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.nChannels) == 24 + 56);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.nWarps) == 24 + 57);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.algo) == 24 + 64);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, coll.parentGroup) == 24 + 80);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, collApi.root) == 24 + 24);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, collApi.graphCaptured) == 24 + 40);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, p2pApi.graphCaptured) == 24 + 32);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, p2p.count) == 24 + 24);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, p2p.peer) == 24 + 32);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, p2p.nChannels) == 24 + 36);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, p2p.parentGroup) == 24 + 40);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, proxyOp.channelId) == 24 + 4);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, proxyOp.isSend) == 24 + 20);
static_assert(offsetof(ncclProfilerEventDescr_v5_t, kernelCh.pTimer) == 24 + 8);
static_assert(sizeof(ncclProfilerEventDescr_v5_t) == 24 + 88);  // the coll member is the largest
static_assert(sizeof(ncclProfilerEventStateArgs_v5_t) == 8);
static_assert(sizeof(ncclProfiler_v5_t) == 6 * sizeof(void*));
#endif

}  // namespace kernalyse::ncclabi
