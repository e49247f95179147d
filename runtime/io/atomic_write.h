#pragma once
// Replace a file so that readers see either the old contents or the complete new contents,
// never a torn mixture: checkpoints must survive a crash or a full disk in the middle of a save.
#include <cstdio>
#include <filesystem>
#include <functional>

namespace sublet::io {

// Writes `target` by calling `write_contents` on a temporary file in the same directory (so that
// the final rename stays inside one file system), then fflush + fsync, rename over `target`, and
// fsync the directory so the rename itself is durable.
// If `write_contents` throws, or any step fails, the temporary is removed, `target` is left as it
// was, and the exception propagates (I/O failures are IoError naming the file).
// A process killed in the middle of a save cannot remove its temporary
// (`<target>.tmp.<pid>.<n>`); the next save of the same target does: the writer holds a flock on
// its temporary until the rename, so a temporary whose lock is free belongs to a dead writer.
// Temporaries of live writers (other processes saving the same target) are never touched.
// `write_contents` should write with std::fwrite and may use io::write_or_throw for checking.
void write_atomically(const std::filesystem::path& target,
                      const std::function<void(std::FILE*)>& write_contents);

// fwrite that throws IoError naming `path` when fewer bytes than asked were written.
void write_or_throw(std::FILE* file, const void* data, std::size_t bytes,
                    const std::filesystem::path& path);

}  // namespace sublet::io
