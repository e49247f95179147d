// What a save does with paths that are not plain files (core/atomic_write.h): a symbolic link is
// followed and its target written, a character device or FIFO is written in place, and nothing
// but a regular file is ever replaced. CI runs as root, so the device nodes are made with mknod
// in a scratch folder (the cases skip, saying why, where mknod is not permitted).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <fcntl.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include "core/atomic_write.h"
#include "test_support.h"

namespace sublet::io {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::read_raw;
using sublet::testing::ScratchDir;
namespace fs = std::filesystem;

void save_text(const fs::path& target, const std::string& text) {
  write_atomically(target, [&](std::FILE* file) { write_or_throw(file, text.data(), text.size(), target); });
}

std::string text_of(const fs::path& path) {
  const std::vector<std::uint8_t> bytes = read_raw(path);
  return {bytes.begin(), bytes.end()};
}

// A character device node like /dev/null (1, 3) or /dev/full (1, 7); empty when not permitted.
std::string make_char_device(const fs::path& path, unsigned minor) {
  if (::mknod(path.c_str(), S_IFCHR | 0666, makedev(1, minor)) != 0)
    return std::string("mknod ") + path.string() + " not permitted here (" + std::strerror(errno) + ")";
  // On a file system mounted nodev the node exists but cannot be opened.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return std::string("device nodes cannot be opened under ") + path.parent_path().string() + " (" + std::strerror(errno) + ")";
  ::close(fd);
  return {};
}

TEST(AtomicWriteTargets, SymlinkedTargetIsWrittenAndTheLinkStays) {
  ScratchDir dir;
  fs::create_directories(dir / "real");
  save_text(dir / "real" / "ck.bin", "old");
  fs::create_symlink("real/ck.bin", dir / "link.bin");  // relative to the link's folder
  save_text(dir / "link.bin", "new contents");
  EXPECT_TRUE(fs::is_symlink(dir / "link.bin"));
  EXPECT_EQ(text_of(dir / "real" / "ck.bin"), "new contents");
  // The temporary was made beside the target and renamed there: nothing left in either folder.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "real"), fs::directory_iterator()), 1);
}

TEST(AtomicWriteTargets, DanglingSymlinkCreatesItsTarget) {
  ScratchDir dir;
  fs::create_symlink(dir / "later.bin", dir / "link.bin");
  save_text(dir / "link.bin", "first");
  EXPECT_TRUE(fs::is_symlink(dir / "link.bin"));
  EXPECT_EQ(text_of(dir / "later.bin"), "first");
}

TEST(AtomicWriteTargets, SymlinkLoopIsAnIoError) {
  ScratchDir dir;
  fs::create_symlink(dir / "b", dir / "a");
  fs::create_symlink(dir / "a", dir / "b");
  expect_mentions(io_error_of([&] { save_text(dir / "a", "x"); }), {(dir / "a").string(), "too many levels"});
}

TEST(AtomicWriteTargets, CharacterDeviceIsWrittenInPlace) {
  ScratchDir dir;
  const fs::path null_device = dir / "null";
  if (const std::string why = make_char_device(null_device, 3); !why.empty()) GTEST_SKIP() << why;
  save_text(null_device, std::string(3 << 20, 'x'));
  EXPECT_TRUE(fs::is_character_file(null_device)) << "the device node was replaced";
  EXPECT_EQ(check_writable_target(null_device, "--checkpoint null").in_place, true);
}

TEST(AtomicWriteTargets, FullDeviceFailsClearlyAndStaysADevice) {
  ScratchDir dir;
  const fs::path full_device = dir / "full";
  if (const std::string why = make_char_device(full_device, 7); !why.empty()) GTEST_SKIP() << why;
  // Small (buffered, fails at the flush) and large (fails in fwrite) writes alike.
  for (const std::size_t bytes : {std::size_t{10}, std::size_t{2} << 20}) {
    expect_mentions(io_error_of([&] { save_text(full_device, std::string(bytes, 'x')); }),
                    {full_device.string(), "write failed (disk full?)"});
  }
  EXPECT_TRUE(fs::is_character_file(full_device));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1) << "a temporary was left";
}

TEST(AtomicWriteTargets, FifoIsWrittenInPlace) {
  ScratchDir dir;
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  std::string received;
  std::thread reader([&] {
    std::ifstream in(fifo, std::ios::binary);
    received.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  });
  save_text(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo)) << "the FIFO was replaced";
}

TEST(AtomicWriteTargets, DirectoryAndSocketAreRefusedAndKept) {
  ScratchDir dir;
  fs::create_directories(dir / "folder");
  expect_mentions(io_error_of([&] { save_text(dir / "folder", "x"); }), {(dir / "folder").string(), "is a directory"});
  EXPECT_TRUE(fs::is_directory(dir / "folder"));

  const fs::path socket_path = dir / "sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.string().size(), sizeof(address.sun_path));
  std::strncpy(address.sun_path, socket_path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0) << std::strerror(errno);
  expect_mentions(io_error_of([&] { save_text(socket_path, "x"); }), {socket_path.string(), "is a socket", "not replaced"});
  EXPECT_TRUE(fs::is_socket(socket_path));
  ::close(fd);
}

TEST(AtomicWriteTargets, CheckNamesTheFlagAndTheReasonBeforeAnyWrite) {
  ScratchDir dir;
  fs::create_directories(dir / "folder");
  expect_mentions(io_error_of([&] { check_writable_target(dir / "folder", "--metrics-json folder"); }),
                  {"--metrics-json folder", "is a directory"});
  expect_mentions(io_error_of([&] { check_writable_target(dir / "missing" / "m.json", "--metrics-json m"); }),
                  {"--metrics-json m", "does not exist"});
  fs::create_symlink(dir / "folder" / "m.json", dir / "link.json");
  const OutputTarget target = check_writable_target(dir / "link.json", "--metrics-json link.json");
  EXPECT_EQ(target.path, dir / "folder" / "m.json");
  EXPECT_FALSE(target.in_place);
}

}  // namespace
}  // namespace sublet::io
