#include "traces/output.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "traces/error.hpp"

namespace dtsim {

void write_outputs(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError("cannot create output directory '" + dir + "': " + ec.message());
  const std::string suffix = ".tmp-" + std::to_string(::getpid());
  std::vector<fs::path> written;
  auto cleanup = [&] {
    for (const auto& p : written) fs::remove(p, ec);
  };
  for (const auto& [name, content] : files) {
    fs::path tmp = fs::path(dir) / (name + suffix);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) {
      written.push_back(tmp);
      out.write(content.data(), static_cast<std::streamsize>(content.size()));
      out.close();
    }
    if (!out) {
      cleanup();
      throw ConfigError("cannot write '" + tmp.string() + "'");
    }
  }
  for (const auto& [name, content] : files) {
    (void)content;
    fs::rename(fs::path(dir) / (name + suffix), fs::path(dir) / name, ec);
    if (ec) {
      cleanup();
      throw ConfigError("cannot rename output into '" + (fs::path(dir) / name).string() + "': " + ec.message());
    }
  }
}

}  // namespace dtsim
