// Weak stand-ins for the collector's process_sink()/now_ns() (sink.h), so that
// libkernalyse_collector.so links and loads while collector.cpp does not define them yet: the NCCL
// plugin then sees "not recording" and refuses every communicator. collector.cpp's strong
// definitions replace these at link time; this file can go once they exist.
#include <time.h>

#include "sink.h"

namespace kernalyse::collector {

__attribute__((weak)) Sink* process_sink() { return nullptr; }

__attribute__((weak)) int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace kernalyse::collector
