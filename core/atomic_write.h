#pragma once
// Replace a file so that readers see either the old contents or the complete new contents,
// never a torn mixture: checkpoints must survive a crash or a full disk in the middle of a save.
// Every file sublet writes for a user (checkpoints, metrics, traces, reports) goes through here.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace sublet::io {

// Writes `target` by calling `write_contents` on a temporary file in the same directory (so that
// the final rename stays inside one file system), then fflush + fsync, rename over `target`, and
// fsync the directory so the rename itself is durable.
// What the path names decides what is replaced (never anything but a regular file):
//  - a symbolic link: the file it leads to is written (temporary beside that file, renamed
//    there); the link stays a link;
//  - a character device or a FIFO (/dev/null, /dev/stdout, a pipe): written directly, in place;
//    a failed write (ENOSPC on /dev/full) is an IoError saying "write failed (disk full?)";
//  - a directory, block device or socket: IoError before anything is written.
// If `write_contents` throws, or any step fails, the temporary is removed, `target` is left as it
// was, and the exception propagates (I/O failures are IoError naming the file).
// A process killed in the middle of a save cannot remove its temporary
// (`<target>.tmp.<pid>.<n>`); the next save of the same target does: the writer holds a flock on
// its temporary until the rename, so a temporary whose lock is free belongs to a dead writer.
// Temporaries of live writers (other processes saving the same target) are never touched.
// `write_contents` should write with std::fwrite and may use io::write_or_throw for checking.
void write_atomically(const std::filesystem::path& target,
                      const std::function<void(std::FILE*)>& write_contents);

// Where a save of a path writes.
struct OutputTarget {
  std::filesystem::path path;  // symbolic links followed; may not exist yet
  bool in_place = false;       // a character device or FIFO: written directly, not replaced
};

// The checks write_atomically makes before writing, for callers that want them before long work
// (a training run, a profile): throws IoError naming `what` (e.g. "--checkpoint x.st") and the
// reason when `target` could not be written: a directory, a block device or socket, a link loop,
// a missing or unwritable parent directory, an unwritable device. Returns where it would write.
OutputTarget check_writable_target(const std::filesystem::path& target, const std::string& what);

// write_atomically of a whole text (reports, JSON).
void write_text_atomically(const std::filesystem::path& target, std::string_view text);

// fwrite that throws IoError naming `path` when fewer bytes than asked were written.
void write_or_throw(std::FILE* file, const void* data, std::size_t bytes,
                    const std::filesystem::path& path);

}  // namespace sublet::io
