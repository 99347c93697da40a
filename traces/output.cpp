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
  const std::string pid = std::to_string(::getpid());
  struct Entry {
    fs::path target, tmp, backup;
    bool had_old = false, installed = false;
  };
  std::vector<Entry> entries;
  for (const auto& [name, content] : files) {
    (void)content;
    fs::path target = fs::path(dir) / name;
    entries.push_back({target, fs::path(target.string() + ".tmp-" + pid), fs::path(target.string() + ".old-" + pid)});
  }
  // Undo everything done so far; `reason` is captured before any clean-up can overwrite it.
  auto roll_back = [&](const std::string& message) {
    std::error_code ignore;
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      if (it->installed) fs::remove(it->target, ignore);
      if (it->had_old) fs::rename(it->backup, it->target, ignore);
      fs::remove(it->tmp, ignore);
    }
    throw ConfigError(message);
  };
  // 1. Every file to a temporary name.
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::ofstream out(entries[i].tmp, std::ios::binary | std::ios::trunc);
    if (out) out.write(files[i].second.data(), static_cast<std::streamsize>(files[i].second.size()));
    out.close();
    if (!out) roll_back("cannot write '" + entries[i].tmp.string() + "'");
  }
  // 2. Move previous outputs aside, 3. install the new ones; any failure restores the previous state.
  for (auto& e : entries) {
    if (fs::exists(e.target, ec) && !fs::is_regular_file(e.target, ec))
      roll_back("cannot rename output into '" + e.target.string() + "': it exists and is not a regular file");
    if (fs::exists(e.target, ec)) {
      fs::rename(e.target, e.backup, ec);
      if (ec) roll_back("cannot replace '" + e.target.string() + "': " + ec.message());
      e.had_old = true;
    }
    fs::rename(e.tmp, e.target, ec);
    if (ec) roll_back("cannot rename output into '" + e.target.string() + "': " + ec.message());
    e.installed = true;
  }
  // 4. Drop the previous outputs.
  for (auto& e : entries)
    if (e.had_old) fs::remove(e.backup, ec);
}

}  // namespace dtsim
