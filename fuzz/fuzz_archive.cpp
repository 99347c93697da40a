// Compressed files and archives (.gz/.bz2/.xz, .tar.gz with one trace per rank): the readers every importer
// opens files with, fed from memory (the path readers share the same code after opening the file).
#include <string>

#include "fuzz/fuzz_common.hpp"
#include "traces/archive.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  dtsim::fuzz::only_errors([&] { (void)dtsim::decompress_bytes(bytes, "fuzz.gz"); });
  dtsim::fuzz::only_errors([&] { (void)dtsim::archive_members_of_bytes(bytes, "fuzz.tar.gz"); });
  return 0;
}
