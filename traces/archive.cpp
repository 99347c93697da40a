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

/// Where an archive's bytes come from: a file (streamed) or a buffer already in memory.
struct Source {
  const std::string& name;   ///< for messages: the path, or the caller's name for the buffer
  const std::string* bytes;  ///< null: read the file `name`
};

ArchivePtr open_reader(const Source& src, bool raw) {
  if (!src.bytes && !std::filesystem::is_regular_file(src.name))
    throw ConfigError(src.name + ": cannot open file (not found)");
  ArchivePtr a(archive_read_new(), archive_read_free);
  DTSIM_ASSERT(a, "archive_read_new failed");
  // Only the compressions dtsim documents, all linked into libarchive: filter_all would also register filters
  // that run an external program (lrzip, lzop, grzip, ...) when a file starts with their magic bytes.
  for (auto* enable : {archive_read_support_filter_gzip, archive_read_support_filter_bzip2,
                       archive_read_support_filter_xz, archive_read_support_filter_zstd})
    DTSIM_ASSERT(enable(a.get()) == ARCHIVE_OK, "libarchive lacks a built-in gzip/bzip2/xz/zstd decoder");
  if (raw) {
    archive_read_support_format_raw(a.get());
  } else {
    archive_read_support_format_tar(a.get());
    archive_read_support_format_gnutar(a.get());
    archive_read_support_format_raw(a.get());
  }
  const int r = src.bytes ? archive_read_open_memory(a.get(), src.bytes->data(), src.bytes->size())
                          : archive_read_open_filename(a.get(), src.name.c_str(), 1 << 16);
  if (r != ARCHIVE_OK)
    throw FormatError(src.name + ": cannot read (" +
                      std::string(archive_error_string(a.get()) ? archive_error_string(a.get()) : "unknown error") +
                      ")");
  return a;
}

enum class Compression { none, gzip, bzip2, xz, zstd };

Compression sniff(const unsigned char* magic, std::size_t n) {
  if (n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b) return Compression::gzip;
  if (n >= 3 && magic[0] == 'B' && magic[1] == 'Z' && magic[2] == 'h') return Compression::bzip2;
  if (n >= 4 && magic[0] == 0xfd && magic[1] == '7' && magic[2] == 'z' && magic[3] == 'X') return Compression::xz;
  if (n >= 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd) return Compression::zstd;
  return Compression::none;
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

/// The single decompressed stream of a compressed source (gzip/bzip2/xz/zstd); a tar inside is refused.
std::string decompress_single(const Source& src) {
  ArchivePtr a = open_reader(src, /*raw=*/true);
  struct archive_entry* entry = nullptr;
  if (archive_read_next_header(a.get(), &entry) != ARCHIVE_OK)
    throw FormatError(src.name + ": not a readable compressed file");
  std::string out = read_entry(a.get(), src.name);
  // A tar inside the compression is not a single document.
  if (out.size() >= 512 && out.compare(257, 5, "ustar") == 0)
    throw FormatError(src.name + ": is a tar archive, expected a single (compressed) file");
  return out;
}

std::vector<ArchiveMember> members_of(const Source& src) {
  ArchivePtr a = open_reader(src, /*raw=*/false);
  std::vector<ArchiveMember> members;
  struct archive_entry* entry = nullptr;
  for (;;) {
    const int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      const char* msg = archive_error_string(a.get());
      throw FormatError(src.name + ": truncated or corrupt archive (" + std::string(msg ? msg : "bad header") + ")");
    }
    const bool raw = archive_format(a.get()) == ARCHIVE_FORMAT_RAW;
    if (!raw && archive_entry_filetype(entry) != AE_IFREG) {
      archive_read_data_skip(a.get());
      continue;
    }
    ArchiveMember m;
    const char* pathname = raw ? nullptr : archive_entry_pathname(entry);
    m.name = raw ? std::filesystem::path(src.name).filename().string() : std::string(pathname ? pathname : "");
    m.content = read_entry(a.get(), src.name);
    members.push_back(std::move(m));
  }
  return members;
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
    if (sniff(magic, static_cast<std::size_t>(probe.gcount())) == Compression::none) {
      probe.clear();
      probe.seekg(0, std::ios::end);
      std::string out(static_cast<std::size_t>(probe.tellg()), '\0');
      probe.seekg(0);
      probe.read(out.data(), static_cast<std::streamsize>(out.size()));
      if (!probe) throw ConfigError(path + ": read error");
      return out;
    }
  }
  return decompress_single(Source{path, nullptr});
}

std::string decompress_bytes(const std::string& bytes, const std::string& name) {
  if (sniff(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()) == Compression::none) return bytes;
  return decompress_single(Source{name, &bytes});
}

std::vector<ArchiveMember> read_archive_members(const std::string& path) { return members_of(Source{path, nullptr}); }

std::vector<ArchiveMember> archive_members_of_bytes(const std::string& bytes, const std::string& name) {
  return members_of(Source{name, &bytes});
}

}  // namespace dtsim
