// The CUPTI activity source (see cupti_source.h): the only translation unit that includes CUPTI
// headers. Record conversion (RecordParser), the bounded buffer pool, and the injection glue
// CUDA calls from cuInit (InitializeInjection). docs/collector.md, "CUPTI source".
#include "cupti_source.h"

#include <cupti.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <thread>

#include "cuda_presence.h"
#include "kernalyse/run_env.h"
#include "nccl_link.h"

// Defined by the Collector (collector.cpp) and the NCCL plugin (nccl_plugin.cpp). Weak here so
// this source links and loads in builds (and test binaries) that lack them: a null address
// means "not there" (no sink: not recording; no plugin: no NCCL join).
namespace kernalyse::collector {
Sink* process_sink() __attribute__((weak));
int64_t now_ns() __attribute__((weak));
bool nccl_on_driver_launch(uint64_t correlation_id) __attribute__((weak));
}  // namespace kernalyse::collector

namespace kernalyse::collector::cupti {
namespace {

int64_t clock_ns() {
  if (now_ns) return now_ns();
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Kineto's names ("Memcpy HtoD (Pageable -> Device)", "Memset (Device)"), so imported Kineto
// traces and collector runs classify alike.
const char* copy_kind_str(unsigned k) {
  static const char* const s[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                  "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return k < sizeof s / sizeof s[0] ? s[k] : "Unknown";
}
const char* memory_kind_str(unsigned k) {
  static const char* const s[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                  "Array",   "Managed",  "Device Static", "Managed Static"};
  return k < sizeof s / sizeof s[0] ? s[k] : "Unknown";
}
constexpr unsigned kCopyKinds = 11, kMemKinds = 8;

// Stable name pointers for every (copy, src, dst) combination: built once, never freed.
const char* memcpy_name(unsigned copy, unsigned src, unsigned dst) {
  static const std::vector<std::string>* table = [] {
    auto* t = new std::vector<std::string>;
    for (unsigned c = 0; c < kCopyKinds; ++c)
      for (unsigned s = 0; s < kMemKinds; ++s)
        for (unsigned d = 0; d < kMemKinds; ++d)
          t->push_back(std::string("Memcpy ") + copy_kind_str(c) + " (" + memory_kind_str(s) +
                       " -> " + memory_kind_str(d) + ")");
    return t;
  }();
  if (copy >= kCopyKinds) copy = 0;
  if (src >= kMemKinds) src = 0;
  if (dst >= kMemKinds) dst = 0;
  return (*table)[(copy * kMemKinds + src) * kMemKinds + dst].c_str();
}
const char* memset_name(unsigned mem) {
  static const char* const s[] = {
      "Memset (Unknown)", "Memset (Pageable)", "Memset (Pinned)",        "Memset (Device)",
      "Memset (Array)",   "Memset (Managed)",  "Memset (Device Static)", "Memset (Managed Static)"};
  return mem < kMemKinds ? s[mem] : s[0];
}

bool untimed(uint64_t start, uint64_t end) { return start == 0 && end == 0; }

}  // namespace

// ---- RecordParser ------------------------------------------------------------------------------

size_t RecordParser::process_buffer(const uint8_t* buf, size_t valid_bytes) {
  size_t n = 0;
  if (buf && valid_bytes > 0) {
    std::lock_guard<std::mutex> g(mu_);
    CUpti_Activity* rec = nullptr;
    // GetNextRecord takes a non-const buffer but only reads it.
    uint8_t* b = const_cast<uint8_t*>(buf);
    for (;;) {
      CUptiResult r = cuptiActivityGetNextRecord(b, valid_bytes, &rec);
      if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the valid bytes (or a cut record)
      if (r != CUPTI_SUCCESS) {
        // INVALID_KIND (zeroed/corrupt memory): CUPTI cannot size the record, so nothing after
        // it can be found. Count it once and abandon the rest of this buffer.
        ++stats_.skipped;
        ++stats_.unterminated_buffers;
        ++losses_.skipped;
        break;
      }
      ++n;
      ++stats_.records;
      on_record(rec);
    }
  }
  report_losses();
  return n;
}

void RecordParser::on_record(const void* p) {
  const auto* rec = static_cast<const CUpti_Activity*>(p);
  auto skip = [&] {
    ++stats_.skipped;
    ++losses_.skipped;
  };
  auto no_timing = [&] {
    // CUPTI could not time it (e.g. its device buffer ran out): CUPTI's loss, not a parse error.
    ++stats_.no_timing;
    ++losses_.dropped_cupti;
  };
  // Kernels, copies and memsets: the same timing checks and the same record form.
  auto timed = [&](int32_t kind, const auto* r, const char* name, int64_t& counter) {
    if (untimed(r->start, r->end)) return no_timing();
    if (r->end < r->start) return skip();
    kernalyse_emu_activity a{kind,
                             static_cast<int32_t>(r->deviceId),
                             static_cast<int32_t>(r->streamId),
                             static_cast<int64_t>(r->start),
                             static_cast<int64_t>(r->end),
                             static_cast<int64_t>(r->correlationId),
                             name};
    ++counter;
    sink_.activity(a, false);
    device_used(r->deviceId);
  };
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      return timed(KERNALYSE_EMU_KERNEL, k, k->name ? k->name : "<unnamed kernel>", stats_.kernels);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      return timed(KERNALYSE_EMU_MEMCPY, m, memcpy_name(m->copyKind, m->srcKind, m->dstKind),
                   stats_.memcpys);
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {  // peer-to-peer: device = the one that ran the copy
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(rec);
      return timed(KERNALYSE_EMU_MEMCPY, m, memcpy_name(m->copyKind, m->srcKind, m->dstKind),
                   stats_.memcpys);
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      return timed(KERNALYSE_EMU_MEMSET, m, memset_name(m->memoryKind), stats_.memsets);
    }
    case CUPTI_ACTIVITY_KIND_DRIVER:
    case CUPTI_ACTIVITY_KIND_RUNTIME: {
      const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      if (untimed(api->start, api->end)) return no_timing();
      if (api->end < api->start) return skip();
      kernalyse_emu_launch l{static_cast<int64_t>(api->start), static_cast<int64_t>(api->end),
                             static_cast<int64_t>(api->correlationId),
                             static_cast<int64_t>(api->threadId),
                             api_name(rec->kind == CUPTI_ACTIVITY_KIND_DRIVER, api->cbid)};
      ++stats_.api_calls;
      sink_.launch(l);
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      // Precedes the API record it tags. Kept (bounded) for the join; not stored yet.
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
      if (external_.size() >= (1u << 20)) external_.clear();
      external_[e->correlationId] = e->externalId;
      ++stats_.external_correlations;
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemory4*>(rec);
      if (m->timestamp == 0) return no_timing();
      // Device memory only: MEMORY2 also reports pinned host (cudaMallocHost) and managed
      // allocations, which are not GPU memory in use.
      if (m->memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
        ++stats_.memory_not_device;
        return;
      }
      int64_t bytes = static_cast<int64_t>(m->bytes);
      if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
        bytes = -bytes;
      else if (m->memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
        return skip();
      kernalyse_emu_memory mem{
          static_cast<int64_t>(m->timestamp), static_cast<int32_t>(m->deviceId),
          m->isAsync ? static_cast<int32_t>(m->streamId) : -1, bytes, m->address};
      ++stats_.memory;
      sink_.memory(mem);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MARKER: {
      // NVTX: a START and an END with the same id make one range; INSTANTANEOUS a zero-length one.
      const auto* m = reinterpret_cast<const CUpti_ActivityMarker2*>(rec);
      const int64_t ts = static_cast<int64_t>(m->timestamp);
      const int64_t thread = (m->objectKind == CUPTI_ACTIVITY_OBJECT_THREAD ||
                              m->objectKind == CUPTI_ACTIVITY_OBJECT_PROCESS)
                                 ? static_cast<int64_t>(m->objectId.pt.threadId)
                                 : 0;
      if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        if (open_ranges_.size() >= (1u << 16)) open_ranges_.clear();  // ENDs lost: bound it
        open_ranges_[m->id] = {ts, thread, m->name ? m->name : ""};
        return;
      }
      if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        auto it = open_ranges_.find(m->id);
        if (it == open_ranges_.end()) return skip();  // END without START
        kernalyse_emu_range r{it->second.start_ns, ts, it->second.thread, it->second.name.c_str()};
        if (r.end_ns < r.start_ns) {
          open_ranges_.erase(it);
          return skip();
        }
        ++stats_.ranges;
        sink_.range(r);
        open_ranges_.erase(it);
        return;
      }
      if (m->flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
        if (ts == 0) return no_timing();
        kernalyse_emu_range r{ts, ts, thread, m->name ? m->name : ""};
        ++stats_.ranges;
        sink_.range(r);
        return;
      }
      return skip();  // sync markers etc.: not used
    }
    case CUPTI_ACTIVITY_KIND_DEVICE: {
      const auto* d = reinterpret_cast<const CUpti_ActivityDevice5*>(rec);
      ++stats_.devices;
      if (d->id <= 1024) {
        if (device_uuids_.size() <= d->id) device_uuids_.resize(d->id + 1);
        const auto* u = reinterpret_cast<const unsigned char*>(&d->uuid);
        char buf[48];
        std::snprintf(buf, sizeof buf,
                      "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                      u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                      u[12], u[13], u[14], u[15]);
        device_uuids_[d->id] = buf;
      }
      device_seen(d->id, d->name);
      return;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT:
      ++stats_.contexts;  // ids only; nothing stored yet
      return;
    case CUPTI_ACTIVITY_KIND_STREAM:
      ++stats_.streams;
      return;
    default:
      return skip();  // a kind we did not enable (or do not know): never guess its layout
  }
}

const char* RecordParser::api_name(bool driver, uint32_t cbid) {
  auto& names = api_names_[driver ? 1 : 0];
  auto it = names.find(cbid);
  if (it != names.end()) return it->second.c_str();
  const char* cname = nullptr;
  std::string name;
  if (cuptiGetCallbackName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API, cbid,
                           &cname) == CUPTI_SUCCESS &&
      cname && *cname) {
    name = cname;
    // "cudaLaunchKernel_v7000" → "cudaLaunchKernel": the version suffix is CUPTI's, not the API's.
    size_t v = name.rfind("_v");
    if (v != std::string::npos && v + 2 < name.size() &&
        name.find_first_not_of("0123456789", v + 2) == std::string::npos)
      name.resize(v);
  } else {
    name = std::string(driver ? "cuda driver API " : "cuda runtime API ") + std::to_string(cbid);
  }
  return names.emplace(cbid, std::move(name)).first->second.c_str();
}

void RecordParser::device_used(uint32_t id) {
  if (id > 1024) return;
  if (devices_used_.size() <= id) devices_used_.resize(id + 1, 0);
  if (devices_used_[id]) return;
  devices_used_[id] = 1;
  const std::string uuid = id < device_uuids_.size() ? device_uuids_[id] : "";
  sink_.gpu_device_used(static_cast<int32_t>(id), uuid.c_str());
}

void RecordParser::device_seen(uint32_t id, const char* name) {
  if (id > 1024) return;
  if (device_names_.size() <= id) device_names_.resize(id + 1);
  device_names_[id] = name && *name ? name : "unnamed CUDA device";
  // One status line naming every device seen so far; the latest report wins.
  std::string line = "cupti: ";
  int n = 0;
  std::string list;
  for (size_t i = 0; i < device_names_.size(); ++i) {
    if (device_names_[i].empty()) continue;
    if (n++) list += ", ";
    list += std::to_string(i) + ": " + device_names_[i];
  }
  line += std::to_string(n) + (n == 1 ? " CUDA device (" : " CUDA devices (") + list + ")" +
          status_suffix_;
  sink_.status(line.c_str(), device_names_[id].c_str());
}

void RecordParser::add_dropped_cupti(int64_t n) {
  if (n <= 0) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    losses_.dropped_cupti += n;
  }
  report_losses();
}

void RecordParser::add_dropped_ours(int64_t n) {
  if (n <= 0) return;
  {
    std::lock_guard<std::mutex> g(mu_);
    losses_.dropped_ours += n;
  }
  report_losses();
}

ParseStats RecordParser::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

LossCounts RecordParser::losses() const {
  std::lock_guard<std::mutex> g(mu_);
  return losses_;
}

int64_t RecordParser::external_id(uint32_t correlation) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = external_.find(correlation);
  return it == external_.end() ? -1 : static_cast<int64_t>(it->second);
}

void RecordParser::report_losses() { sink_.losses(losses()); }

// ---- BufferPool --------------------------------------------------------------------------------

BufferPool::~BufferPool() {
  for (uint8_t* b : free_) std::free(b);
}

uint8_t* BufferPool::get() {
  std::lock_guard<std::mutex> g(mu_);
  if (!free_.empty()) {
    uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  if (allocated_ >= max_) {
    ++refused_;
    return nullptr;
  }
  // CUPTI wants 8-byte alignment; a cache line costs nothing more.
  const size_t size = (bytes_ + 63) / 64 * 64;
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(64, size));
  if (!b) {
    ++refused_;
    return nullptr;
  }
  ++allocated_;
  return b;
}

void BufferPool::put(uint8_t* buf) {
  if (!buf) return;
  std::lock_guard<std::mutex> g(mu_);
  free_.push_back(buf);
}

size_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> g(mu_);
  return allocated_;
}

int64_t BufferPool::refused() const {
  std::lock_guard<std::mutex> g(mu_);
  return refused_;
}

// ---- ActivityBuffers ---------------------------------------------------------------------------

uint8_t* ActivityBuffers::request(size_t* size) {
  uint8_t* b = pool_.get();
  *size = b ? pool_.buffer_bytes() : 0;
  if (!b) parser_.add_dropped_ours(1);  // a refused buffer: at least one record lost
  return b;
}

void ActivityBuffers::complete(uint8_t* buf, size_t valid_bytes, int64_t dropped_cupti,
                               bool convert) {
  if (convert) {
    parser_.process_buffer(buf, valid_bytes);
    parser_.add_dropped_cupti(dropped_cupti);
  }
  pool_.put(buf);
}

// ---- configuration and messages ----------------------------------------------------------------

Config config_from_env() {
  Config c;
  auto num = [](const char* k, long long dflt, long long lo, long long hi) {
    const char* v = std::getenv(k);
    if (!v || !*v) return dflt;
    char* end = nullptr;
    long long x = std::strtoll(v, &end, 10);
    if (end == v || *end) return dflt;  // not a number: keep the default
    return x < lo ? lo : x > hi ? hi : x;
  };
  c.buffer_bytes =
      static_cast<size_t>(num(env_name(RunEnv::CuptiBufferKb), 4096, 64, 1 << 20)) * 1024;
  c.buffers = static_cast<size_t>(num(env_name(RunEnv::CuptiBuffers), 32, 2, 4096));
  c.flush_ms = num(env_name(RunEnv::CuptiFlushMs), 1000, 10, 3'600'000);
  if (const char* v = std::getenv(env_name(RunEnv::CuptiSkip))) c.skip = std::string(",") + v + ",";
  return c;
}

bool driver_api_recorded(const std::string& name) {
  static const char* const kKept[] = {"cuLaunch",
                                      "cuGraphLaunch",
                                      "cuMemcpy",
                                      "cuMemset",
                                      "cuMemAlloc",
                                      "cuMemFree",
                                      "cuMemHostAlloc",
                                      "cuMemCreate",
                                      "cuMemMap",
                                      "cuMemUnmap",
                                      "cuMemRelease",
                                      "cuMemPrefetch",
                                      "cuStreamSynchronize",
                                      "cuCtxSynchronize",
                                      "cuEventSynchronize",
                                      "cuStreamWaitEvent",
                                      "cuEventRecord",
                                      "cuModuleLoad",
                                      "cuLibraryLoad",
                                      "cuStreamBeginCapture",
                                      "cuStreamEndCapture",
                                      "cuGraphInstantiate"};
  for (const char* k : kKept)
    if (name.rfind(k, 0) == 0) return true;
  return false;
}

namespace {

// Driver API records only for the calls driver_api_recorded keeps.
void filter_driver_records() {
  for (uint32_t id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS || !name)
      continue;
    if (!driver_api_recorded(name)) cuptiActivityEnableDriverApi(id, 0);
  }
}

}  // namespace

std::string failure_line(const char* call, int result, const char* other) {
  const auto r = static_cast<CUptiResult>(result);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    std::string who = other && *other ? other
                                      : "Nsight Systems/Compute, cuda-gdb, compute-sanitizer or a "
                                        "profiler inside the application";
    return "another CUPTI client (" + who + ") is already subscribed; GPU activity not recorded";
  }
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
  std::string what = std::string(call) + ": " + s;
  if (r == CUPTI_ERROR_UNKNOWN || r == CUPTI_ERROR_NOT_INITIALIZED ||
      r == CUPTI_ERROR_INVALID_DEVICE)
    return "no CUDA device (" + what + "); GPU activity not recorded";
  return "CUPTI unusable (" + what + "); GPU activity not recorded";
}

// ---- injection ---------------------------------------------------------------------------------

namespace {

struct Injection {
  std::mutex init_mu;
  bool initialised = false;
  std::atomic<bool> active{false};
  long pid = 0;
  Sink* sink = nullptr;
  std::unique_ptr<ActivityBuffers> buffers;
  Config config;
  CUpti_SubscriberHandle subscriber = nullptr;
  std::thread flusher;
  std::mutex flush_mu;
  std::condition_variable flush_cv;
  bool stop_flusher = false;
};

Injection& inj() {
  static Injection* i = new Injection;  // never destroyed: CUPTI may call back during exit
  return *i;
}

bool here(const Injection& I) {
  return I.active.load(std::memory_order_acquire) && static_cast<long>(getpid()) == I.pid;
}

uint64_t CUPTIAPI timestamp() { return static_cast<uint64_t>(clock_ns()); }

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *max_records = 0;
  *size = 0;
  ActivityBuffers* ab = inj().buffers.get();
  *buffer = ab ? ab->request(size) : nullptr;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t,
                               size_t valid) {
  Injection& I = inj();
  const bool convert = here(I);
  size_t dropped = 0;  // a CUPTI call: made before (not under) any lock of ours
  if (!convert || cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) != CUPTI_SUCCESS)
    dropped = 0;
  if (ActivityBuffers* ab = I.buffers.get())
    ab->complete(buffer, valid, static_cast<int64_t>(dropped), convert);
}

const CUpti_CallbackId kLaunchCbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz};

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const void* data) {
  Injection& I = inj();
  if (!here(I)) return;
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    // A context on a device: its power is sampled from now on. Waiting for the device's first
    // kernel record (parsed at a flush) lost the first second, and every sample of a run
    // shorter than the flush period (the first GPU run's check g: no power counter at all).
    const auto* rd = static_cast<const CUpti_ResourceData*>(data);
    uint32_t dev = 0;
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED && I.sink && rd->context &&
        cuptiGetDeviceId(rd->context, &dev) == CUPTI_SUCCESS)
      I.sink->gpu_device_used(static_cast<int32_t>(dev), "");
    return;
  }
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite != CUPTI_API_ENTER) return;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    // NCCL launches with cuLaunchKernelEx inside its KernelLaunch event: bind the id.
    if (nccl_on_driver_launch) nccl_on_driver_launch(cb->correlationId);
  } else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
             cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) {
    cupti_flush_all(true);  // the reset discards what CUPTI still holds for the device
  }
}

void flusher_loop() {
  Injection& I = inj();
  std::unique_lock<std::mutex> lk(I.flush_mu);
  while (!I.stop_flusher) {
    I.flush_cv.wait_for(lk, std::chrono::milliseconds(I.config.flush_ms));
    if (I.stop_flusher) break;
    lk.unlock();  // never hold our lock across a CUPTI call
    cupti_flush_all(false);
    lk.lock();
  }
}

void stop_flusher() {
  Injection& I = inj();
  {
    std::lock_guard<std::mutex> g(I.flush_mu);
    I.stop_flusher = true;
  }
  I.flush_cv.notify_all();
  if (I.flusher.joinable()) I.flusher.join();
}

void at_exit() {
  Injection& I = inj();
  if (!here(I)) return;  // a forked child: CUDA is undefined there, leave it alone
  stop_flusher();
  cupti_flush_all(true);
}

// CUDA calls between fork and exec are undefined: the child records nothing.
void on_fork_child() { inj().active.store(false); }

int env_rank() {
  for (const char* k : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"})
    if (const char* v = std::getenv(k); v && *v) return std::atoi(v);
  return 0;
}

// One warning line and the rank's status; the application runs on, unprofiled on the GPU.
int give_up(Injection& I, const std::string& line) {
  I.active.store(false);
  std::fprintf(stderr, "kernalyse: rank %d: %s\n", env_rank(), line.c_str());
  std::fflush(stderr);
  if (I.sink) I.sink->status(line.c_str(), nullptr);
  return 1;
}

}  // namespace

void cupti_flush_all(bool forced) {
  Injection& I = inj();
  if (!here(I)) return;
  // No lock of ours is held here: CUPTI calls buffer_completed on this thread.
  cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

}  // namespace kernalyse::collector::cupti

extern "C" int InitializeInjection(void) {
  using namespace kernalyse::collector;
  using namespace kernalyse::collector::cupti;
  note_cuda_injection();
  Injection& I = inj();
  std::lock_guard<std::mutex> g(I.init_mu);
  if (I.initialised) return 1;
  I.initialised = true;
  Sink* sink = process_sink ? process_sink() : nullptr;
  if (!sink) return 1;  // not the profiled process (or no collector): stay out of CUDA's way
  I.sink = sink;
  I.pid = static_cast<long>(getpid());
  I.config = config_from_env();
  I.buffers = std::make_unique<ActivityBuffers>(*sink, I.config.buffer_bytes, I.config.buffers);
  // A diagnostic run (KERNALYSE_CUPTI_SKIP): every status line of its store says what it lacks.
  const std::string diagnostic =
      I.config.skip.empty() ? ""
                            : "; DIAGNOSTIC: KERNALYSE_CUPTI_SKIP=" +
                                  I.config.skip.substr(1, I.config.skip.size() - 2) + " left off";
  I.buffers->parser().set_status_suffix(diagnostic);

  // 0. Record layouts are those of the headers we were built with: an older libcupti (another
  //    one on the library path) would write shorter records that we would misread.
  uint32_t version = 0;
  if (cuptiGetVersion(&version) != CUPTI_SUCCESS || version < CUPTI_API_VERSION)
    return give_up(I, "CUPTI unusable (libcupti API version " + std::to_string(version) +
                          ", built for " + std::to_string(CUPTI_API_VERSION) +
                          "); GPU activity not recorded");
  // 1. Subscribe first: if another CUPTI client owns the process, touch nothing else.
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 64] = {0};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "kernalyse";
  params.oldSubscriberName = other;
  params.oldSubscriberSize = sizeof other;
  CUptiResult r = cuptiSubscribe_v2(&I.subscriber, on_callback, nullptr, &params);
  if (r != CUPTI_SUCCESS) {
    I.subscriber = nullptr;
    return give_up(I, failure_line("cuptiSubscribe_v2", r, other));
  }
  std::vector<CUpti_ActivityKind> enabled;
  auto fail = [&](const char* call, CUptiResult res) {
    for (CUpti_ActivityKind k : enabled) cuptiActivityDisable(k);
    cuptiUnsubscribe(I.subscriber);
    I.subscriber = nullptr;
    return give_up(I, failure_line(call, res, nullptr));
  };
  const Config& cf = I.config;
  if (!cf.skips("callbacks")) {
    std::vector<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>> cbs = {
        {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020},
        {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED}};
    for (CUpti_CallbackId id : kLaunchCbids) cbs.emplace_back(CUPTI_CB_DOMAIN_DRIVER_API, id);
    for (const auto& [domain, id] : cbs)
      if ((r = cuptiEnableCallback(1, I.subscriber, domain, id)) != CUPTI_SUCCESS)
        return fail("cuptiEnableCallback", r);
  }
  // 2. Our clock before any kind is enabled: every record is then in the collector's time.
  if (!cf.skips("clock") &&
      (r = cuptiActivityRegisterTimestampCallback(timestamp)) != CUPTI_SUCCESS)
    return fail("cuptiActivityRegisterTimestampCallback", r);
  if ((r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed)) != CUPTI_SUCCESS)
    return fail("cuptiActivityRegisterCallbacks", r);
  I.active.store(true, std::memory_order_release);
  // 3. Kinds. CONCURRENT_KERNEL, never KERNEL (which serialises every kernel on the GPU).
  for (CUpti_ActivityKind k :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
        CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_DRIVER,
        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
        CUPTI_ACTIVITY_KIND_MEMORY2, CUPTI_ACTIVITY_KIND_DEVICE, CUPTI_ACTIVITY_KIND_CONTEXT}) {
    if ((k == CUPTI_ACTIVITY_KIND_DRIVER && cf.skips("driver")) ||
        (k == CUPTI_ACTIVITY_KIND_RUNTIME && cf.skips("runtime")) ||
        (k == CUPTI_ACTIVITY_KIND_MEMORY2 && cf.skips("memory")))
      continue;
    if ((r = cuptiActivityEnable(k)) != CUPTI_SUCCESS) return fail("cuptiActivityEnable", r);
    enabled.push_back(k);
  }
  // Optional: NVTX ranges arrive only if NVTX is routed into CUPTI (NVTX_INJECTION64_PATH).
  if (!cf.skips("marker") && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MARKER) == CUPTI_SUCCESS)
    enabled.push_back(CUPTI_ACTIVITY_KIND_MARKER);
  // Frequent, cheap, uninteresting API records (as Kineto does): not worth a launch row each.
  if (!cf.skips("driverfilter")) filter_driver_records();
  for (CUpti_CallbackId id : {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020,
                              CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
                              CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020})
    cuptiActivityEnableRuntimeApi(id, 0);

  // 4. Flushing: periodic thread, forced at cudaDeviceReset (callback), MPI_Finalize (the
  //    Collector, through the registered hook) and exit. fork() children record nothing.
  register_cupti_flush(&cupti_flush_all);
  pthread_atfork(nullptr, nullptr, on_fork_child);
  std::atexit(at_exit);
  try {
    I.flusher = std::thread(flusher_loop);
  } catch (const std::exception&) {
    // no periodic flush: the forced ones still happen
  }
  std::string line = "cupti: recording (CUPTI API " + std::to_string(version) + ")";
  if (!cf.skip.empty()) line += diagnostic;
  sink->status(line.c_str(), nullptr);
  return 1;
}
