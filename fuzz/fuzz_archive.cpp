// Compressed files and archives (.gz/.bz2/.xz, .tar.gz with one trace per rank): the readers every importer
// opens files with. They take paths, so the input goes to a temporary file first.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "fuzz/fuzz_common.hpp"
#include "traces/archive.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/dtsim_fuzz_archive_" + std::to_string(::getpid()) + ".tar.gz";
  }();
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  dtsim::fuzz::only_errors([&] { (void)dtsim::read_maybe_compressed(path); });
  dtsim::fuzz::only_errors([&] { (void)dtsim::read_archive_members(path); });
  std::remove(path.c_str());
  return 0;
}
