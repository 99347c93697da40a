#include "traces/archive.hpp"

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "traces/error.hpp"

namespace dtsim {
namespace {

using ArchivePtr = std::unique_ptr<struct archive, int (*)(struct archive*)>;

ArchivePtr open_reader(const std::string& path, bool raw) {
  if (!std::filesystem::is_regular_file(path)) throw ConfigError(path + ": cannot open file (not found)");
  ArchivePtr a(archive_read_new(), archive_read_free);
  DTSIM_ASSERT(a, "archive_read_new failed");
  archive_read_support_filter_all(a.get());
  if (raw) {
    archive_read_support_format_raw(a.get());
  } else {
    archive_read_support_format_tar(a.get());
    archive_read_support_format_gnutar(a.get());
    archive_read_support_format_raw(a.get());
  }
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    throw FormatError(path + ": cannot read (" +
                      std::string(archive_error_string(a.get()) ? archive_error_string(a.get()) : "unknown error") +
                      ")");
  return a;
}

std::string read_entry(struct archive* a, const std::string& path) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    la_ssize_t n = archive_read_data(a, buf, sizeof buf);
    if (n < 0) {
      const char* msg = archive_error_string(a);
      throw FormatError(path + ": truncated or corrupt compressed data (" + std::string(msg ? msg : "read error") +
                        ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace

std::string read_maybe_compressed(const std::string& path) {
  // Uncompressed files are read directly (libarchive's raw format would also do, but this keeps large plain
  // JSON files on the fast path).
  {
    std::ifstream probe(path, std::ios::binary);
    if (!probe) throw ConfigError(path + ": cannot open file");
    unsigned char magic[6] = {0, 0, 0, 0, 0, 0};
    probe.read(reinterpret_cast<char*>(magic), 6);
    const bool gz = magic[0] == 0x1f && magic[1] == 0x8b;
    const bool bz = magic[0] == 'B' && magic[1] == 'Z' && magic[2] == 'h';
    const bool xz = magic[0] == 0xfd && magic[1] == '7' && magic[2] == 'z' && magic[3] == 'X';
    if (!gz && !bz && !xz) {
      probe.clear();
      probe.seekg(0, std::ios::end);
      std::string out(static_cast<std::size_t>(probe.tellg()), '\0');
      probe.seekg(0);
      probe.read(out.data(), static_cast<std::streamsize>(out.size()));
      if (!probe) throw ConfigError(path + ": read error");
      return out;
    }
  }
  ArchivePtr a = open_reader(path, /*raw=*/true);
  struct archive_entry* entry = nullptr;
  int r = archive_read_next_header(a.get(), &entry);
  if (r != ARCHIVE_OK) throw FormatError(path + ": not a readable compressed file");
  std::string out = read_entry(a.get(), path);
  // A tar inside the compression is not a single document.
  if (out.size() >= 512 && out.compare(257, 5, "ustar") == 0)
    throw FormatError(path + ": is a tar archive, expected a single (compressed) file");
  return out;
}

std::vector<ArchiveMember> read_archive_members(const std::string& path) {
  ArchivePtr a = open_reader(path, /*raw=*/false);
  std::vector<ArchiveMember> members;
  struct archive_entry* entry = nullptr;
  for (;;) {
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      const char* msg = archive_error_string(a.get());
      throw FormatError(path + ": truncated or corrupt archive (" + std::string(msg ? msg : "bad header") + ")");
    }
    const bool raw = archive_format(a.get()) == ARCHIVE_FORMAT_RAW;
    if (!raw && archive_entry_filetype(entry) != AE_IFREG) {
      archive_read_data_skip(a.get());
      continue;
    }
    ArchiveMember m;
    m.name = raw ? std::filesystem::path(path).filename().string() : archive_entry_pathname(entry);
    m.content = read_entry(a.get(), path);
    members.push_back(std::move(m));
  }
  return members;
}

}  // namespace dtsim
