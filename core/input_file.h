#pragma once
// The one way every reader opens a user's input file. Datasets and checkpoints must be regular
// files: a FIFO, socket or device is refused at once instead of waited on (a FIFO without a
// writer would block open() forever, /dev/zero never ends). Traces and snapshots may also stream:
// they accept "-" for standard input and a pipe that has a writer. Every failure is an IoError
// naming the file (and `what`, the flag it came from, when given).
#include <cstddef>
#include <cstdio>
#include <memory>
#include <filesystem>
#include <string>

namespace sublet::io {

enum class InputKind {
  regular_file,    // a regular file (links followed), nothing else
  file_or_stream,  // also "-" (standard input) and a FIFO or pipe that has a writer
};

// More than this many bytes from a stream (which has no size to check beforehand) is refused.
inline constexpr std::size_t kMaxStreamInputBytes = std::size_t{4} << 30;

struct InputFileOptions {
  InputKind kind = InputKind::regular_file;
  std::size_t max_bytes = kMaxStreamInputBytes;  // larger inputs are refused, regular files too
  std::string what = {};                         // e.g. "--resume": prefixes messages when set
};

// The input opened for reading, after the checks above (a stream's first byte may already have
// been read to see that it has a writer: it is pushed back). For readers that parse as they read.
using InputHandle = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;
InputHandle open_input(const std::filesystem::path& path, const InputFileOptions& options);

// The whole contents of `path` (open_input, then read to the end; more than options.max_bytes
// is refused).
std::string read_input_file(const std::filesystem::path& path, const InputFileOptions& options);

// The rest of an open input, at most `max_bytes` (IoError naming `name` beyond).
std::string read_rest(std::FILE* file, std::size_t max_bytes, const std::string& name);

// Whether `path` names something (a dangling link does not); an IoError naming it when that
// cannot be told (a link loop, a name too long, a folder that cannot be searched).
bool input_exists(const std::filesystem::path& path);

// The name shown in messages: "--resume ck.st" or "ck.st"; "standard input" for "-".
std::string describe_input(const std::filesystem::path& path, const std::string& what);

}  // namespace sublet::io
