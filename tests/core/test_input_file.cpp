// core/input_file.h: the one opener of every reader. Regular files are read; a FIFO, device or
// folder given where a regular file is needed is refused at once (never waited on); a FIFO may
// stream only for readers that allow it, and only with a writer.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/errors.h"
#include "core/input_file.h"

namespace sublet::io {
namespace {

namespace fs = std::filesystem;

std::string message_of(const fs::path& path, const InputFileOptions& options) {
  try {
    read_input_file(path, options);
  } catch (const IoError& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was read";
  return {};
}

class InputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("input_file_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(InputFile, ReadsARegularFileWhole) {
  std::ofstream(dir_ / "a.bin", std::ios::binary) << std::string("ab\0cd", 5);
  EXPECT_EQ(read_input_file(dir_ / "a.bin", {}), std::string("ab\0cd", 5));
  EXPECT_EQ(read_input_file(dir_ / "a.bin", {.kind = InputKind::file_or_stream}), std::string("ab\0cd", 5));
}

TEST_F(InputFile, RefusesWhatIsNotARegularFileAtOnce) {
  ASSERT_EQ(::mkfifo((dir_ / "f").c_str(), 0600), 0);
  EXPECT_NE(message_of(dir_ / "f", {.what = "--resume"}).find("--resume " + (dir_ / "f").string() +
                                                               ": expected a regular file, found a FIFO"),
            std::string::npos);
  EXPECT_NE(message_of("/dev/zero", {}).find("/dev/zero: expected a regular file, found a character device"), std::string::npos);
  EXPECT_NE(message_of(dir_, {}).find("expected a regular file, found a directory"), std::string::npos);
  EXPECT_NE(message_of(dir_ / "absent", {}).find("absent: file not found"), std::string::npos);
  EXPECT_NE(message_of("-", {}).find("standard input: expected a file name"), std::string::npos);
  fs::create_symlink("loop2", dir_ / "loop1");
  fs::create_symlink("loop1", dir_ / "loop2");
  EXPECT_NE(message_of(dir_ / "loop1", {}).find("Too many levels of symbolic links"), std::string::npos);
  EXPECT_THROW(input_exists(dir_ / "loop1" / "x"), IoError);
  EXPECT_FALSE(input_exists(dir_ / "absent"));
}

TEST_F(InputFile, AStreamNeedsAWriter) {
  const fs::path fifo = dir_ / "t.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(message_of(fifo, {.kind = InputKind::file_or_stream}).find("a FIFO with no writer"), std::string::npos);
  // This test writes and closes before reading: the data waits in the pipe held open here.
  const int fd = ::open(fifo.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "{\"x\": 1}", 8), 8);
  InputHandle file = open_input(fifo, {.kind = InputKind::file_or_stream});
  ::close(fd);  // the reader sees the end only now
  EXPECT_EQ(read_rest(file.get(), 100, "t.fifo"), "{\"x\": 1}");
}

TEST_F(InputFile, LargerThanTheLimitIsRefused) {
  std::ofstream(dir_ / "big", std::ios::binary) << std::string(1000, 'x');
  EXPECT_NE(message_of(dir_ / "big", {.max_bytes = 999}).find("1000 bytes, more than the 999-byte limit"), std::string::npos);
  EXPECT_EQ(read_input_file(dir_ / "big", {.max_bytes = 1000}).size(), 1000u);
}

}  // namespace
}  // namespace sublet::io
