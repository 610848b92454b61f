// See cuda_presence.h. No CUDA header here: this file is built with or without the toolkit.
#include "cuda_presence.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <vector>

namespace kernalyse::collector {
namespace {

std::atomic<bool> g_injected{false};
std::atomic<CuptiFlushFn> g_flush{nullptr};

// Basename of a mapped object when it is a CUDA user-space library.
bool is_cuda_library(const char* path) {
  const char* base = std::strrchr(path, '/');
  base = base ? base + 1 : path;
  for (const char* p : {"libcudart.so", "libcuda.so", "libnccl.so", "libcublas.so"})
    if (std::strncmp(base, p, std::strlen(p)) == 0) return true;
  return false;
}

int find_mapped(dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name && is_cuda_library(info->dlpi_name)) {
    *static_cast<std::string*>(data) = info->dlpi_name;
    return 1;
  }
  return 0;
}

// nvcc links cudart statically by default: such an executable maps no CUDA library until
// cudart dlopens libcuda.so.1 (which fails without a driver), but carries a .nv_fatbin section.
bool exe_has_fatbin() {
  int fd = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool found = false;
  Elf64_Ehdr eh{};
  if (::pread(fd, &eh, sizeof eh, 0) == static_cast<ssize_t>(sizeof eh) &&
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
      eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum > 0 && eh.e_shstrndx < eh.e_shnum) {
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    const ssize_t want = static_cast<ssize_t>(sh.size() * sizeof(Elf64_Shdr));
    if (::pread(fd, sh.data(), want, static_cast<off_t>(eh.e_shoff)) == want) {
      const Elf64_Shdr& strtab = sh[eh.e_shstrndx];
      std::vector<char> names(strtab.sh_size + 1, '\0');
      if (::pread(fd, names.data(), strtab.sh_size, static_cast<off_t>(strtab.sh_offset)) ==
          static_cast<ssize_t>(strtab.sh_size)) {
        for (const Elf64_Shdr& s : sh)
          if (s.sh_name < strtab.sh_size && std::strcmp(&names[s.sh_name], ".nv_fatbin") == 0)
            found = true;
      }
    }
  }
  ::close(fd);
  return found;
}

}  // namespace

std::string cuda_libraries_mapped() {
  std::string name;
  dl_iterate_phdr(find_mapped, &name);
  if (name.empty() && exe_has_fatbin()) name = "CUDA device code in the executable";
  return name;
}

std::string cuda_absent_reason() {
  // Already loaded: a driver exists (the application simply never initialised CUDA, or did
  // after our injection failed, which reported itself).
  if (void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD)) {
    dlclose(h);
    return "";
  }
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h) {
    dlclose(h);
    return "";
  }
  const char* err = dlerror();
  return std::string("no CUDA device: libcuda.so.1 not found (dlopen: ") +
         (err ? err : "unknown error") + ")";
}

void note_cuda_injection() { g_injected.store(true); }
bool cuda_injection_seen() { return g_injected.load(); }

void register_cupti_flush(CuptiFlushFn fn) { g_flush.store(fn); }
void cupti_flush_registered(bool forced) {
  if (CuptiFlushFn fn = g_flush.load()) fn(forced);
}

}  // namespace kernalyse::collector
