// Atomic replacement of files, and the gzip-aware whole-file helpers built on it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <stdexcept>

#include "core/atomic_write.h"
#include "runtime/io/file_bytes.h"
#include "test_support.h"

namespace sublet::io {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::read_raw;
using sublet::testing::ScratchDir;

std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void write_text(std::FILE* file, const std::string& text, const std::filesystem::path& path) {
  write_or_throw(file, text.data(), text.size(), path);
}

TEST(AtomicWrite, ReplacesTheTargetAndLeavesNoTemporary) {
  ScratchDir dir;
  const auto target = dir / "state.bin";
  write_atomically(target, [&](std::FILE* file) { write_text(file, "first", target); });
  write_atomically(target, [&](std::FILE* file) { write_text(file, "second!", target); });
  const std::vector<std::uint8_t> bytes = read_raw(target);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "second!");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"state.bin"});
}

TEST(AtomicWrite, FailureMidWriteKeepsThePreviousFileAndRemovesTheTemporary) {
  ScratchDir dir;
  const auto target = dir / "state.bin";
  write_atomically(target, [&](std::FILE* file) { write_text(file, "good old contents", target); });
  EXPECT_THROW(write_atomically(target,
                                [&](std::FILE* file) {
                                  write_text(file, std::string(100000, 'x'), target);
                                  throw std::runtime_error("simulated crash in the middle");
                                }),
               std::runtime_error);
  const std::vector<std::uint8_t> bytes = read_raw(target);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), "good old contents");
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"state.bin"});
}

TEST(AtomicWrite, MissingDirectoryIsAnIoErrorNamingTheTarget) {
  ScratchDir dir;
  const auto target = dir / "no-such-dir" / "state.bin";
  const std::string message = io_error_of(
      [&] { write_atomically(target, [&](std::FILE* file) { write_text(file, "x", target); }); });
  expect_mentions(message, {target.string(), "cannot create temporary file"});
}

// What a save killed before its rename leaves: its temporary, with no process holding its lock.
TEST(AtomicWrite, NextSaveRemovesTemporariesOfWritersThatDied) {
  ScratchDir dir;
  const auto target = dir / "state.bin";
  write_atomically(target, [&](std::FILE* file) { write_text(file, "old", target); });
  sublet::testing::write_raw(dir / "state.bin.tmp.4242.0", {1, 2, 3});
  sublet::testing::write_raw(dir / "state.bin.tmp.4243.7", {4});
  // Not temporaries of this target: never touched.
  sublet::testing::write_raw(dir / "other.bin.tmp.4242.0", {5});
  sublet::testing::write_raw(dir / "state.bin.tmp.notes", {6});
  write_atomically(target, [&](std::FILE* file) { write_text(file, "new", target); });
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"other.bin.tmp.4242.0", "state.bin", "state.bin.tmp.notes"}));
}

// Another process in the middle of saving the same target holds the lock of its temporary.
TEST(AtomicWrite, TemporaryOfALiveWriterIsLeftAlone) {
  ScratchDir dir;
  const auto target = dir / "state.bin";
  const auto busy = dir / "state.bin.tmp.4242.0";
  sublet::testing::write_raw(busy, {1, 2, 3});
  const int fd = ::open(busy.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  write_atomically(target, [&](std::FILE* file) { write_text(file, "mine", target); });
  EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"state.bin", "state.bin.tmp.4242.0"}));
  ::close(fd);  // the writer dies: its lock goes with it
  write_atomically(target, [&](std::FILE* file) { write_text(file, "mine again", target); });
  EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"state.bin"});
}

TEST(FileBytes, GzipRoundTripAndPlainRoundTrip) {
  ScratchDir dir;
  std::vector<std::uint8_t> data(50000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 7 % 13);
  write_file_bytes(dir / "a.bin.gz", data);
  write_file_bytes(dir / "a.bin", data);
  EXPECT_LT(read_raw(dir / "a.bin.gz").size(), data.size() / 4) << "not compressed";
  EXPECT_EQ(read_file_bytes(dir / "a.bin.gz"), data);
  EXPECT_EQ(read_file_bytes(dir / "a.bin"), data);
  EXPECT_EQ(read_raw(dir / "a.bin"), data);
}

TEST(FileBytes, MissingFileAndDirectoryAreNamed) {
  ScratchDir dir;
  expect_mentions(io_error_of([&] { read_file_bytes(dir / "absent"); }),
                  {(dir / "absent").string(), "file not found"});
  expect_mentions(io_error_of([&] { read_file_bytes(dir.path()); }),
                  {dir.path().string(), "found a directory"});
}

}  // namespace
}  // namespace sublet::io
