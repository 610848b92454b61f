// The NCCL profiler plugin (ABI v5, NCCL 2.28.x): NCCL dlopens libkernalyse_collector.so
// (NCCL_PROFILER_PLUGIN, set by kernalyse-run) and looks up the data symbol `ncclProfiler_v5`.
// For every collective and p2p operation it emits one kernalyse_emu_nccl record that carries the
// CUPTI correlation id of the kernel launch that ran it (see nccl_link.h and docs/collector.md,
// "NCCL profiler plugin"). No CUDA or CUPTI headers here: the plugin is always built.
//
// Event order in NCCL 2.28 (src/enqueue.cc, src/plugin/profiler.cc), per thread that ends a group:
//   GroupApi start → {CollApi | P2pApi} start/stop (one per API call) → per plan (one per
//   communicator, or more for large groups): KernelLaunch start → cuLaunchKernelEx (CUPTI
//   driver callback → nccl_on_driver_launch) → KernelLaunch stop → Group (the plan) start →
//   Coll/P2p start (parent: its CollApi/P2pApi; parentGroup: the plan) … stop → GroupApi stop.
// With CUDA graphs alive the Coll/P2p part runs later on a host-callback thread; hence handles
// are reference counted and correlations live in the GroupApi handle, not in thread-locals.
#include "nccl_plugin.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "kernalyse/emu.h"
#include "kernalyse/nccl_dtypes.h"
#include "nccl_link.h"
#include "nccl_profiler_v5.h"
#include "sink.h"

using namespace kernalyse::ncclabi;

namespace kernalyse::collector {
namespace {

// What we ask NCCL for. Group (one event per plan) fires anyway once Coll/P2p are on; we use its
// handle to tell the plans of one group apart. No proxy or KernelCh events: the kernel's timing
// comes from CUPTI, and KernelCh would also change which graph-captured collectives get a
// seqNumber.
constexpr int kActivationMask = ncclProfileGroup | ncclProfileColl | ncclProfileP2p |
                                ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                                ncclProfileKernelLaunch;

constexpr size_t kChunk = 1024;  // events per pool chunk (chunks never move)
constexpr size_t kDefaultLimit = 64 * kChunk;
constexpr int kMaxLaunches = 16;  // plans remembered per GroupApi

struct CommCtx {
  uint64_t id;  // unique per init: a freed context's address may come back
  uint64_t hash;
  int rank, nranks;
  std::string name;
  ncclDebugLogger_t log;
};

enum class Kind : uint32_t { Free, GroupApi, CollApi, P2pApi, KernelLaunch, Plan, Coll, P2p };

struct LaunchSlot {
  CommCtx* comm;
  int64_t correlation;  // -1 until the CUPTI callback reports it
  uint64_t plan;        // serial of the plan (Group event) whose tasks took this slot; 0: none yet
};

struct Event {
  Kind kind = Kind::Free;
  uint32_t gen = 0;  // bumped on free: stale references (parent + gen) are detected
  bool stopped = false;
  bool consumed = false;  // CollApi/P2pApi: its Coll/P2p task has stopped
  bool pinned = false;    // graph-captured API event: replays refer to it, freed at finalize
  bool no_task = false;   // CollApi/P2pApi that NCCL completes without a task (1 rank, count 0)
  int32_t refs = 0;       // live children referring to this event
  CommCtx* comm = nullptr;
  Event* parent = nullptr;
  uint32_t parent_gen = 0;
  uint64_t serial = 0;  // Plan: identity across pool reuse; API events: when they started
  int slot = -1;        // KernelLaunch: index in its GroupApi's launches
  int64_t correlation = -1;
  int n_launches = 0;  // GroupApi
  LaunchSlot launches[kMaxLaunches];
  kernalyse_emu_nccl rec{};  // Coll/P2p
};

struct State {
  std::mutex mu;
  std::vector<std::unique_ptr<Event[]>> chunks;
  std::vector<Event*> free_list;
  size_t live = 0;
  size_t limit = kDefaultLimit;
  uint64_t next_serial = 0;
  NcclPluginCounts counts;
  bool warned_refusal = false;
  uint64_t group_starts = 0;  // GroupApi starts, paces the sweep of API events left behind
};

// Never destroyed: NCCL's proxy and host-callback threads may still call in during exit.
State& state() {
  static State* s = new State;
  return *s;
}

struct CurrentLaunch {
  Event* ev = nullptr;
  uint32_t gen = 0;
};
thread_local CurrentLaunch t_launch;  // inside KernelLaunch start..stop on this thread
struct LastLaunch {
  uint64_t comm = 0;  // CommCtx::id
  int64_t correlation = -1;
};
thread_local LastLaunch t_last_launch;  // fallback when a task's parent handle is unknown

Event* alloc_event(State& s, Kind k, CommCtx* comm) {
  if (s.live >= s.limit) {
    ++s.counts.pool_exhausted;
    return nullptr;
  }
  if (s.free_list.empty()) {  // every slot is live and live < limit: grow by one chunk
    s.chunks.emplace_back(new Event[kChunk]);
    Event* c = s.chunks.back().get();
    for (size_t i = kChunk; i-- > 0;) s.free_list.push_back(&c[i]);
  }
  Event* e = s.free_list.back();
  s.free_list.pop_back();
  uint32_t gen = e->gen;
  *e = Event{};
  e->gen = gen;
  e->kind = k;
  e->comm = comm;
  ++s.live;
  return e;
}

void free_event(State& s, Event* e) {
  e->kind = Kind::Free;
  ++e->gen;
  s.free_list.push_back(e);
  --s.live;
}

// A pointer NCCL hands back (handle or parentObj) → our live event of kind k, else null. Only
// compares addresses before dereferencing: parentObj may come from another process (PXN).
Event* lookup_any(State& s, const void* h) {
  if (!h) return nullptr;
  auto p = reinterpret_cast<uintptr_t>(h);
  for (const auto& c : s.chunks) {
    auto b = reinterpret_cast<uintptr_t>(c.get());
    if (p < b || p >= b + kChunk * sizeof(Event)) continue;
    if ((p - b) % sizeof(Event) != 0) break;
    Event* e = const_cast<Event*>(static_cast<const Event*>(h));
    return e->kind != Kind::Free ? e : nullptr;
  }
  return nullptr;
}

Event* lookup(State& s, const void* h, Kind k) {
  Event* e = lookup_any(s, h);
  return e && e->kind == k ? e : nullptr;
}

Event* deref(Event* p, uint32_t gen, Kind k) {
  return p && p->kind == k && p->gen == gen ? p : nullptr;
}

void set_parent(Event* child, Event* parent) {
  if (!parent) return;
  child->parent = parent;
  child->parent_gen = parent->gen;
  ++parent->refs;
}

void maybe_free(State& s, Event* e);

void release_parent(State& s, Event* child, Kind parent_kind) {
  Event* p = deref(child->parent, child->parent_gen, parent_kind);
  child->parent = nullptr;
  if (!p) return;
  --p->refs;
  maybe_free(s, p);
}

void maybe_free(State& s, Event* e) {
  if (!e->stopped || e->refs > 0) return;
  if (e->kind == Kind::GroupApi) {
    free_event(s, e);
  } else if ((e->kind == Kind::CollApi || e->kind == Kind::P2pApi) && (e->consumed || e->no_task) &&
             !e->pinned) {
    release_parent(s, e, Kind::GroupApi);
    free_event(s, e);
  }
}

// Backstop for API events whose task never comes (calls NCCL completes some other way than the
// cases no_task knows): once the pool is half full, every 1024th group frees stopped, unpinned,
// childless API events that started more than kSweepAge serials ago, so that the pool can never
// fill up with them and stop NCCL recording for the rest of the run.
constexpr uint64_t kSweepAge = 1 << 16;
void sweep_stale_api_events(State& s) {
  if (s.live <= s.limit / 2 || ++s.group_starts % 1024 != 0) return;
  for (const auto& c : s.chunks)
    for (size_t i = 0; i < kChunk; ++i) {
      Event* e = &c[i];
      if ((e->kind != Kind::CollApi && e->kind != Kind::P2pApi) || !e->stopped || e->pinned ||
          e->refs > 0 || e->serial + kSweepAge > s.next_serial)
        continue;
      ++s.counts.ignored;
      release_parent(s, e, Kind::GroupApi);
      free_event(s, e);
    }
}

void fill_dtype(kernalyse_emu_nccl& r, const char* nccl_name, size_t count) {
  r.count = static_cast<int64_t>(count);
  r.dtype = nccl_name;  // unknown names pass through (NCCL's strings are static)
  r.bytes = -1;
  if (const NcclDtype* d = find_nccl_dtype(nccl_name)) {  // kernalyse/nccl_dtypes.h
    r.dtype = d->name;
    r.bytes = static_cast<int64_t>(count) * d->size;
  }
}

// NCCL 2.28's profiler passes ncclAlgoToString/ncclProtoToString ("RING", "LL128", "SIMPLE": the
// store's vocabulary); its tuning tables spell them "Ring", "Simple", ... Normalise those, and
// "" / "Unknown" to NULL (unknown).
const char* normalise_algo_proto(const char* s) {
  static constexpr std::pair<const char*, const char*> kNames[] = {
      {"Ring", "RING"},
      {"Tree", "TREE"},
      {"CollNetDirect", "COLLNET_DIRECT"},
      {"CollNetChain", "COLLNET_CHAIN"},
      {"NVLSTree", "NVLS_TREE"},
      {"Simple", "SIMPLE"}};
  if (!s || !*s || std::strcmp(s, "Unknown") == 0) return nullptr;
  for (const auto& [from, to] : kNames)
    if (std::strcmp(s, from) == 0) return to;
  return s;
}

// The correlation of the kernel that runs a task of communicator `comm` in GroupApi `g`. A group
// holds one launch per plan, in launch order; tasks of one plan share its Group handle
// (`parentGroup`), and NCCL reports plans' tasks in launch order, so the first plan serial seen
// takes the first unclaimed launch of that communicator (per-communicator FIFO). Without a plan
// handle, the communicator's latest launch in the group (exact when tasks follow their launch on
// the launching thread, NCCL's eager path).
int64_t resolve_correlation(Event* g, CommCtx* comm, uint64_t plan) {
  LaunchSlot* last = nullptr;
  LaunchSlot* unclaimed = nullptr;
  for (int i = 0; i < g->n_launches; ++i) {
    LaunchSlot& l = g->launches[i];
    if (l.comm != comm) continue;
    if (plan && l.plan == plan) return l.correlation;
    if (!unclaimed && l.plan == 0) unclaimed = &l;
    last = &l;
  }
  if (plan && unclaimed) {
    unclaimed->plan = plan;
    return unclaimed->correlation;
  }
  return last ? last->correlation : -1;
}

// Starts a Coll or P2p task event: its record is complete from here on (correlation included,
// since the plan's launch precedes its tasks); it is emitted at stop.
Event* start_task(State& s, CommCtx* ctx, const ncclProfilerEventDescr_v5_t* d, bool is_coll) {
  Event* e = alloc_event(s, is_coll ? Kind::Coll : Kind::P2p, ctx);
  if (!e) return nullptr;
  kernalyse_emu_nccl& r = e->rec;
  r.comm_hash = ctx->hash;
  r.nranks = ctx->nranks;
  r.comm_rank = ctx->rank;
  if (is_coll) {
    r.collective = d->coll.func;
    r.seq = static_cast<int64_t>(d->coll.seqNumber);
    fill_dtype(r, d->coll.datatype, d->coll.count);
    r.peer = -1;
    r.algo = normalise_algo_proto(d->coll.algo);
    r.proto = normalise_algo_proto(d->coll.proto);
    r.n_channels = d->coll.nChannels;
  } else {
    r.collective = d->p2p.func;
    r.seq = -1;  // NCCL numbers collectives only; p2p is matched per pair and order
    fill_dtype(r, d->p2p.datatype, d->p2p.count);
    r.peer = d->p2p.peer;
    r.algo = nullptr;
    r.proto = nullptr;
    r.n_channels = d->p2p.nChannels;
  }
  r.correlation = -1;

  Event* api = lookup(s, d->parentObj, is_coll ? Kind::CollApi : Kind::P2pApi);
  if (!api) {
    if (d->parentObj) ++s.counts.bad_handle;
    // No API handle (pool exhausted, or not ours): the launch just finished on this thread.
    if (t_last_launch.comm == ctx->id) r.correlation = t_last_launch.correlation;
    return e;
  }
  set_parent(e, api);
  // A graph-captured operation's kernels run from cudaGraphLaunch, not from the launch we saw
  // during capture: no kernel carries that launch's correlation id.
  if (api->pinned) return e;
  Event* g = deref(api->parent, api->parent_gen, Kind::GroupApi);
  if (!g) return e;
  uint64_t plan = 0;
  if (Event* p = lookup(s, is_coll ? d->coll.parentGroup : d->p2p.parentGroup, Kind::Plan))
    plan = p->serial;
  r.correlation = resolve_correlation(g, ctx, plan);
  return e;
}

void count_record(State& s, const kernalyse_emu_nccl& r) {
  ++s.counts.records;
  if (r.correlation < 0) ++s.counts.unlinked;
}

void emit(const kernalyse_emu_nccl& r) {
  if (Sink* sink = process_sink()) sink->nccl(r);
}

// ---------------------------------------------------------------- the v5 function table
ncclResult_t plugin_init(void** context, uint64_t commId, int* eActivationMask,
                         const char* commName, int /*nNodes*/, int nranks, int rank,
                         ncclDebugLogger_t logfn) {
  if (context) *context = nullptr;
  State& s = state();
  if (!process_sink() || !context) {
    bool first;
    {
      std::lock_guard lk(s.mu);
      ++s.counts.refused;
      first = !s.warned_refusal;
      s.warned_refusal = true;
    }
    const char* msg =
        "kernalyse: NCCL profiler plugin loaded but the collector is not recording in this "
        "process; no NCCL records for communicator";
    if (first) std::fprintf(stderr, "%s %s\n", msg, commName ? commName : "");
    if (logfn)
      logfn(NCCL_LOG_WARN, NCCL_INIT | NCCL_PROFILE, __FILE__, __LINE__, "%s %s", msg,
            commName ? commName : "");
    // The mask is process-wide in NCCL: leave it to communicators we accepted.
    return ncclInvalidUsage;
  }
  auto* ctx = new CommCtx{0, commId, rank, nranks, commName ? commName : "", logfn};
  {
    std::lock_guard lk(s.mu);
    ++s.counts.comms;
    ctx->id = ++s.next_serial;
  }
  if (eActivationMask) *eActivationMask = kActivationMask;
  *context = ctx;
  if (logfn)
    logfn(NCCL_LOG_INFO, NCCL_INIT | NCCL_PROFILE, __FILE__, __LINE__,
          "kernalyse: profiling communicator %s (hash 0x%llx, rank %d of %d)", ctx->name.c_str(),
          static_cast<unsigned long long>(commId), rank, nranks);
  return ncclSuccess;
}

// A collective entered (Coll start: issued and launched) or completed (Coll stop), for the hang
// and desync report (kernalyse-merge --hang). NCCL stops a Coll event when its task is done,
// which for a collective without network proxy operations is right after its launch: there
// "completed" means issued, and only "never entered" is meaningful. P2p operations have no
// sequence number: none.
kernalyse_emu_coll_mark coll_mark(const kernalyse_emu_nccl& r, int32_t state) {
  kernalyse_emu_coll_mark m{};
  m.ts_ns = now_ns();
  m.comm_hash = r.comm_hash;
  m.seq = r.seq;
  m.collective = r.collective;
  m.bytes = r.bytes;
  m.nranks = r.nranks;
  m.comm_rank = r.comm_rank;
  m.state = state;
  return m;
}

void emit_mark(const kernalyse_emu_coll_mark& m) {
  if (Sink* sink = process_sink()) sink->coll_mark(m);
}

ncclResult_t plugin_start_locked(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* d,
                                 kernalyse_emu_coll_mark* mark, bool* has_mark);

ncclResult_t plugin_start(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* d) {
  kernalyse_emu_coll_mark mark{};
  bool has_mark = false;
  const ncclResult_t rc = plugin_start_locked(context, eHandle, d, &mark, &has_mark);
  if (has_mark) emit_mark(mark);  // outside our lock: the sink may flush to disk
  return rc;
}

ncclResult_t plugin_start_locked(void* context, void** eHandle, ncclProfilerEventDescr_v5_t* d,
                                 kernalyse_emu_coll_mark* mark, bool* has_mark) {
  if (!eHandle) return ncclSuccess;
  *eHandle = nullptr;
  State& s = state();
  std::lock_guard lk(s.mu);
  auto* ctx = static_cast<CommCtx*>(context);
  if (!d) {
    ++s.counts.unknown_type;
    return ncclSuccess;
  }
  const uint64_t t = d->type;
  if (t == 0 || (t & (t - 1)) != 0 || (t & ~uint64_t(ncclProfileKnownV5)) != 0) {
    ++s.counts.unknown_type;
    return ncclSuccess;
  }
  if (!ctx || !(t & kActivationMask)) {  // a refused communicator, or proxy/KernelCh/net events
    ++s.counts.ignored;
    return ncclSuccess;
  }
  Event* e = nullptr;
  switch (t) {
    case ncclProfileGroupApi:
      sweep_stale_api_events(s);
      // A KernelLaunch whose stop never came (an NCCL error path) must not bind this thread's
      // next ordinary kernel launch to an old collective.
      t_launch = {};
      e = alloc_event(s, Kind::GroupApi, ctx);
      break;
    case ncclProfileCollApi:
    case ncclProfileP2pApi: {
      bool coll = t == ncclProfileCollApi;
      e = alloc_event(s, coll ? Kind::CollApi : Kind::P2pApi, ctx);
      if (!e) break;
      e->pinned = coll ? d->collApi.graphCaptured : d->p2pApi.graphCaptured;
      e->serial = ++s.next_serial;
      // NCCL returns from these without a task (enqueue.cc taskAppend): a one-rank communicator
      // (a plain copy) or nothing to move. Their API events are freed at their stop.
      e->no_task = coll ? (ctx->nranks == 1 || d->collApi.count == 0) : d->p2pApi.count == 0;
      Event* g = lookup(s, d->parentObj, Kind::GroupApi);
      if (!g && d->parentObj) ++s.counts.bad_handle;
      set_parent(e, g);
      break;
    }
    case ncclProfileKernelLaunch: {
      e = alloc_event(s, Kind::KernelLaunch, ctx);
      if (!e) break;
      Event* g = lookup(s, d->parentObj, Kind::GroupApi);
      if (!g && d->parentObj) ++s.counts.bad_handle;
      if (g) {
        set_parent(e, g);
        // A group with more plans than slots: the last slot is reused (its earlier plan's tasks
        // have normally been resolved already, on the eager path).
        int i = g->n_launches < kMaxLaunches ? g->n_launches++ : kMaxLaunches - 1;
        g->launches[i] = {ctx, -1, 0};
        e->slot = i;
      }
      t_launch = {e, e->gen};
      break;
    }
    case ncclProfileGroup:
      e = alloc_event(s, Kind::Plan, ctx);
      if (e) e->serial = ++s.next_serial;
      break;
    case ncclProfileColl:
    case ncclProfileP2p:
      e = start_task(s, ctx, d, t == ncclProfileColl);
      if (e && t == ncclProfileColl) {
        *mark = coll_mark(e->rec, 0);
        *has_mark = true;
      }
      break;
    default:
      ++s.counts.ignored;
      break;
  }
  *eHandle = e;
  return ncclSuccess;
}

ncclResult_t plugin_stop(void* eHandle) {
  if (!eHandle) return ncclSuccess;
  State& s = state();
  kernalyse_emu_nccl rec;
  {
    std::lock_guard lk(s.mu);
    Event* e = lookup_any(s, eHandle);
    if (!e || e->stopped) {
      ++s.counts.bad_handle;
      return ncclSuccess;
    }
    switch (e->kind) {
      case Kind::Coll:
      case Kind::P2p: {
        rec = e->rec;
        count_record(s, rec);
        Event* api =
            deref(e->parent, e->parent_gen, e->kind == Kind::Coll ? Kind::CollApi : Kind::P2pApi);
        if (api) api->consumed = true;
        release_parent(s, e, e->kind == Kind::Coll ? Kind::CollApi : Kind::P2pApi);
        free_event(s, e);
        break;
      }
      case Kind::KernelLaunch:
        t_last_launch = {e->comm->id, e->correlation};
        if (t_launch.ev == e) t_launch = {};
        release_parent(s, e, Kind::GroupApi);
        free_event(s, e);
        return ncclSuccess;
      case Kind::Plan:
        free_event(s, e);
        return ncclSuccess;
      default:  // API events stay until their tasks are done (tasks start after the API stop)
        e->stopped = true;
        maybe_free(s, e);
        return ncclSuccess;
    }
  }
  emit(rec);  // outside our lock: the sink may flush to disk
  if (rec.seq >= 0) emit_mark(coll_mark(rec, 1));
  return ncclSuccess;
}

ncclResult_t plugin_record_state(void* eHandle, ncclProfilerEventState_v5_t,
                                 ncclProfilerEventStateArgs_v5_t*) {
  // GroupApi states (GroupStartApiStop, GroupEndApiStart) carry nothing we record.
  (void)eHandle;
  return ncclSuccess;
}

ncclResult_t plugin_finalize(void* context) {
  auto* ctx = static_cast<CommCtx*>(context);
  if (!ctx) return ncclSuccess;
  State& s = state();
  std::vector<kernalyse_emu_nccl> pending;
  NcclPluginCounts c;
  {
    std::lock_guard lk(s.mu);
    // Tasks still open (the communicator is destroyed mid-operation): flush their records.
    for (auto& chunk : s.chunks)
      for (size_t i = 0; i < kChunk; ++i) {
        Event& e = chunk[i];
        if (e.comm == ctx && (e.kind == Kind::Coll || e.kind == Kind::P2p)) {
          pending.push_back(e.rec);
          count_record(s, e.rec);
        }
      }
    // Free everything of this communicator; parents of other communicators lose a reference.
    for (auto& chunk : s.chunks)
      for (size_t i = 0; i < kChunk; ++i) {
        Event& e = chunk[i];
        if (e.kind == Kind::Free || e.comm != ctx) continue;
        for (Kind pk : {Kind::GroupApi, Kind::CollApi, Kind::P2pApi}) {
          Event* p = deref(e.parent, e.parent_gen, pk);
          if (p && p->comm != ctx) {
            --p->refs;
            maybe_free(s, p);
          }
        }
        free_event(s, &e);
      }
    c = s.counts;
  }
  for (const auto& r : pending) emit(r);
  if (ctx->log)
    ctx->log(NCCL_LOG_INFO, NCCL_INIT | NCCL_PROFILE, __FILE__, __LINE__,
             "kernalyse: communicator %s done; process totals: %lld records, %lld without kernel "
             "correlation, "
             "%lld events ignored, %lld unknown, %lld bad handles, %lld untracked (pool full)",
             ctx->name.c_str(), (long long)c.records, (long long)c.unlinked, (long long)c.ignored,
             (long long)c.unknown_type, (long long)c.bad_handle, (long long)c.pool_exhausted);
  delete ctx;
  return ncclSuccess;
}

}  // namespace

bool nccl_on_driver_launch(uint64_t correlation_id) {
  CurrentLaunch cur = t_launch;
  if (!cur.ev) return false;
  State& s = state();
  std::lock_guard lk(s.mu);
  Event* e = deref(cur.ev, cur.gen, Kind::KernelLaunch);
  if (!e) return false;
  e->correlation = static_cast<int64_t>(correlation_id);
  if (Event* g = deref(e->parent, e->parent_gen, Kind::GroupApi); g && e->slot >= 0)
    g->launches[e->slot].correlation = e->correlation;
  return true;
}

NcclPluginCounts nccl_plugin_counts() {
  State& s = state();
  std::lock_guard lk(s.mu);
  return s.counts;
}

void nccl_plugin_set_pool_limit(size_t n) {
  State& s = state();
  std::lock_guard lk(s.mu);
  s.limit = n ? n : kDefaultLimit;
}

}  // namespace kernalyse::collector

// The symbol NCCL 2.28 looks up first (2.29+ try v6/v7, then fall back to v5).
extern "C" {
__attribute__((visibility("default"))) kernalyse::ncclabi::ncclProfiler_v5_t ncclProfiler_v5 = {
    "kernalyse",
    kernalyse::collector::plugin_init,
    kernalyse::collector::plugin_start,
    kernalyse::collector::plugin_stop,
    kernalyse::collector::plugin_record_state,
    kernalyse::collector::plugin_finalize,
};
}
