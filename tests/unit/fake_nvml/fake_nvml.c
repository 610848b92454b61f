/* A stand-in for NVML (libnvidia-ml.so.1: its SONAME) on machines without a GPU driver, so that
 * the power sampler's own loop runs in the unit tests (test_nvml_power.cpp). One device; its
 * power reading is FAKE_NVML_POWER_MW milliwatts, or NVML_ERROR_NOT_SUPPORTED (3) when that is
 * negative, as some VMs and boards answer. Prototypes as collector/src/nvml_power.cpp declares
 * them (NVML's own are the same ABI: int results, opaque device handles). */
#include <stdlib.h>

static int power_mw(void) {
  const char* v = getenv("FAKE_NVML_POWER_MW");
  return v ? atoi(v) : 0;
}
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 1;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** h) {
  if (i != 0) return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *h = (void*)0x1;
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, void** h) {
  (void)uuid;
  *h = (void*)0x1;
  return 0;
}
int nvmlDeviceGetPowerUsage(void* h, unsigned* mw) {
  (void)h;
  if (power_mw() < 0) return 3; /* NVML_ERROR_NOT_SUPPORTED */
  *mw = (unsigned)power_mw();
  return 0;
}
const char* nvmlErrorString(int rc) { return rc == 3 ? "Not Supported" : "Unknown Error"; }
