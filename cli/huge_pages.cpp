// Transparent huge pages for the dtsim executable's large allocations.
//
// A large unfolded run touches gigabytes of fresh memory (task arrays, dependency lists, per-task engine state),
// and with 4 KiB pages a page fault every 4 KiB was the largest single cost of lowering a 1,024-GPU graph (perf,
// 2026-11-26: about a sixth of the time in the kernel's fault path). Most Linux systems run transparent huge pages in
// "madvise" mode, where only regions a program marks get 2 MiB pages. This replaces the global operator new of the
// executable (not of the library: embedding programs keep their own allocator) so that every allocation of at least
// kHugeFrom bytes is marked with madvise(MADV_HUGEPAGE) before it is first touched. Memory still comes from malloc
// and goes back through free; smaller allocations are untouched. Where THP is off, or madvise refuses, nothing
// changes.
//
// Off unless DTSIM_HUGE_PAGES=1 is in the environment (since 2026-12-05). Whether huge pages pay depends on the
// machine, not on dtsim, and their worst case is far worse than small pages': on this 2-core virtual machine on
// 2026-12-05, touching 3 GiB of fresh memory took 1.15 s in 4 KiB pages and 30 s in madvised huge pages, and with
// them the skewed DeepSeek-V3 case of bench/speed2026.sh took 63 s instead of 28 s and Llama 3 405B on NVL72 7.6-14.3
// s instead of 3.7 s, while on 2026-11-26 they had cut an unfolded 1,024-GPU run by a fifth. A probe of a few huge
// pages does not tell the cases apart (there 2 MiB and 64 MiB still faulted in three times faster as huge pages):
// the slowness came with gigabytes. Small pages cost about 0.4 s per GiB touched at worst.
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kHugeFrom = std::size_t{8} << 20;  ///< at least four whole huge pages inside

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DTSIM_HUGE_PAGES");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

void* allocate(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  if (n >= kHugeFrom && enabled()) {
    // The whole huge pages inside [p, p + n): malloc serves blocks this large from their own mapping.
    const std::size_t off = (kHugePage - reinterpret_cast<std::uintptr_t>(p) % kHugePage) % kHugePage;
    const std::size_t whole = n > off ? (n - off) / kHugePage * kHugePage : 0;
    if (whole > 0) madvise(static_cast<char*>(p) + off, whole, MADV_HUGEPAGE);
  }
  return p;
}

}  // namespace

void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
