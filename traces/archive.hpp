// Reading trace files as they are shipped: plain, gzip-compressed (.gz) or inside a tar archive (.tar.gz),
// through libarchive. Errors are FormatError/ConfigError naming the file.
#pragma once
#include <string>
#include <vector>

namespace dtsim {

/// One regular file inside an archive.
struct ArchiveMember {
  std::string name;     ///< path inside the archive
  std::string content;  ///< decompressed bytes
};

/// The whole decompressed content of `path`: a plain file is returned as is, a gzip/bzip2/xz/zstd stream is
/// decompressed. A tar archive is refused (use read_archive_members). Throws ConfigError if the file cannot be
/// opened and FormatError if it is truncated or corrupt.
std::string read_maybe_compressed(const std::string& path);

/// Every regular file of a (possibly compressed) tar archive, in archive order. A file that is not an archive
/// is returned as one member named after the file. Truncated/corrupt archives: FormatError.
std::vector<ArchiveMember> read_archive_members(const std::string& path);

/// read_maybe_compressed for bytes already in memory; `name` stands for the source in messages.
std::string decompress_bytes(const std::string& bytes, const std::string& name);

/// read_archive_members for bytes already in memory; `name` names the source (and a non-archive's one member).
std::vector<ArchiveMember> archive_members_of_bytes(const std::string& bytes, const std::string& name);

}  // namespace dtsim
