/* kernalyse emulated-device API (C ABI). An application that plays a GPU without one (the
 * emulated device of examples/vicuna_tp) reports what it ran in the form CUPTI would: activity
 * records (kernel/memcpy/memset on a device and stream, with a correlation id), the CPU launch
 * call that issued each one, and NCCL tags for collectives. The collector library, injected by
 * kernalyse-run, implements these; an application looks them up with
 * dlsym(RTLD_DEFAULT, "kernalyse_emu_record_activity") and runs unprofiled when they are absent.
 * All times are int64 ns of CLOCK_MONOTONIC_RAW (kernalyse_emu_now_ns), the clock the collector
 * aligns across ranks. Every record taken this way is marked emulated in the store. */
#ifndef KERNALYSE_EMU_H
#define KERNALYSE_EMU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum kernalyse_emu_kind {
  KERNALYSE_EMU_KERNEL = 0,
  KERNALYSE_EMU_MEMCPY = 1,
  KERNALYSE_EMU_MEMSET = 2
};

typedef struct kernalyse_emu_activity {
  int32_t kind; /* kernalyse_emu_kind */
  int32_t device;
  int32_t stream;
  int64_t start_ns;
  int64_t end_ns;
  int64_t correlation;
  const char* name; /* copied (interned) by the collector */
} kernalyse_emu_activity;

typedef struct kernalyse_emu_launch {
  int64_t start_ns;
  int64_t end_ns;
  int64_t correlation;
  int64_t thread;   /* OS thread id of the launching thread */
  const char* name; /* "cudaLaunchKernel", "ncclAllReduce", ... */
} kernalyse_emu_launch;

/* NCCL tags for a communication kernel: links to the activity with the same correlation. */
typedef struct kernalyse_emu_nccl {
  int64_t correlation;
  uint64_t comm_hash;
  const char* collective; /* "AllReduce", "AllGather", "ReduceScatter", "Send", "Recv" */
  int64_t seq;
  int64_t count;     /* elements */
  const char* dtype; /* "BFloat16", "Float", ... */
  int64_t bytes;
  int32_t nranks;
  int32_t peer;       /* -1 for collectives */
  const char* algo;   /* "RING", "TREE", ...; NULL if unknown */
  const char* proto;  /* "LL", "LL128", "SIMPLE"; NULL if unknown */
  int32_t n_channels; /* -1 if unknown */
  int32_t comm_rank;  /* this rank in the communicator, -1 if unknown */
} kernalyse_emu_nccl;

/* A device memory allocation (bytes > 0) or release (bytes < 0), as CUPTI's MEMORY2 records
 * report them; the store turns them into the per-device "memory in use" counter. */
typedef struct kernalyse_emu_memory {
  int64_t ts_ns;
  int32_t device;
  int32_t stream; /* -1 unless stream-ordered */
  int64_t bytes;
  uint64_t address;
} kernalyse_emu_memory;

/* A sampled per-device value (power in mW from NVML, ...): the counter holds `value` from
 * `ts_ns` on. `name` is a store counter name ("gpu_power_mw"). */
typedef struct kernalyse_emu_counter {
  int64_t ts_ns;
  int32_t device;
  const char* name;
  int64_t value;
} kernalyse_emu_counter;

/* A host-side range (NVTX-like): "ProfilerStep#N" marks step N; other names are user ranges. */
typedef struct kernalyse_emu_range {
  int64_t start_ns;
  int64_t end_ns;
  int64_t thread;
  const char* name;
} kernalyse_emu_range;

/* A rank's progress through a collective, for hang and desync reports (kernalyse-merge --hang):
 * state 0 when the rank enters collective `seq` of communicator `comm_hash` (its device reaches
 * it and starts waiting for the others), 1 when it completes. `seq` counts the communicator's
 * collectives in issue order, the same on every member. */
typedef struct kernalyse_emu_coll_mark {
  int64_t ts_ns;
  uint64_t comm_hash;
  int64_t seq;
  const char* collective; /* "AllReduce", ... */
  int64_t bytes;
  int32_t nranks;
  int32_t comm_rank;
  int32_t state; /* 0 entered, 1 completed */
} kernalyse_emu_coll_mark;

typedef int64_t (*kernalyse_emu_now_ns_fn)(void);
typedef void (*kernalyse_emu_record_range_fn)(const kernalyse_emu_range*);
typedef void (*kernalyse_emu_record_activity_fn)(const kernalyse_emu_activity*);
typedef void (*kernalyse_emu_record_launch_fn)(const kernalyse_emu_launch*);
typedef void (*kernalyse_emu_record_nccl_fn)(const kernalyse_emu_nccl*);
typedef void (*kernalyse_emu_record_memory_fn)(const kernalyse_emu_memory*);
typedef void (*kernalyse_emu_record_counter_fn)(const kernalyse_emu_counter*);
typedef void (*kernalyse_emu_record_coll_mark_fn)(const kernalyse_emu_coll_mark*);

int64_t kernalyse_emu_now_ns(void);
void kernalyse_emu_record_activity(const kernalyse_emu_activity* a);
void kernalyse_emu_record_launch(const kernalyse_emu_launch* l);
void kernalyse_emu_record_nccl(const kernalyse_emu_nccl* n);
void kernalyse_emu_record_range(const kernalyse_emu_range* r);
void kernalyse_emu_record_memory(const kernalyse_emu_memory* m);
void kernalyse_emu_record_counter(const kernalyse_emu_counter* c);
void kernalyse_emu_record_coll_mark(const kernalyse_emu_coll_mark* m);

#ifdef __cplusplus
}
#endif

#endif
