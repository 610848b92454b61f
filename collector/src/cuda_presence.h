// CUDA-free checks and hooks between the Collector (collector.cpp, always built) and the CUPTI
// source (cupti_source.cpp, built only with the CUDA toolkit). CUDA loads our injection
// (InitializeInjection) only from cuInit, i.e. only when a driver exists: on a machine without
// one nothing of ours runs inside CUDA, so the Collector itself has to notice at finish that the
// application used CUDA but GPU activity could not be recorded. docs/collector.md "CUPTI source".
#pragma once

#include <string>

namespace kernalyse::collector {

// The first CUDA library found mapped in this process ("libcudart.so.13", "libcuda.so.1", ...;
// an executable with device code, i.e. a .nv_fatbin section, counts: statically linked cudart),
// or "" when the process shows no sign of CUDA. libcupti alone does not count: we link it.
std::string cuda_libraries_mapped();

// Why this process cannot have GPU activity recorded, or "" when a CUDA driver is present
// (libcuda.so.1 loads). E.g. "no CUDA device: libcuda.so.1 not found (dlopen: ...)".
std::string cuda_absent_reason();

// Set by InitializeInjection (cupti_source.cpp) as soon as CUDA calls it, success or not.
void note_cuda_injection();
bool cuda_injection_seen();

// The CUPTI source's forced flush, registered by InitializeInjection once CUPTI records; the
// Collector calls cupti_flush_registered(true) at MPI_Finalize and exit, before it writes. No-op
// when nothing is registered (no CUDA toolkit at build time, no driver, injection failed).
// Never call it while holding a lock that Sink methods take: the flush delivers records
// through the Sink on the calling thread.
using CuptiFlushFn = void (*)(bool forced);
void register_cupti_flush(CuptiFlushFn fn);
void cupti_flush_registered(bool forced);

}  // namespace kernalyse::collector
