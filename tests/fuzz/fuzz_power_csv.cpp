// libFuzzer target: the nvidia-smi power-log CSV parser (--power-log), on the text as given.
// kernalyse::Error is its answer to a log it cannot use (one line naming the file and line);
// anything else is a finding. Parsed samples must carry finite, non-negative power.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernalyse/power_log.h"
#include "kernalyse/store_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    // A fixed offset: the target must not depend on the machine's time zone.
    kernalyse::PowerLog log = kernalyse::parse_nvsmi_power_csv(text, "fuzz.csv", int64_t{0});
    for (const auto& smp : log.samples)
      if (smp.mw < 0) __builtin_trap();
  } catch (const kernalyse::Error&) {
  }
  return 0;
}
