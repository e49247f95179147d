// safetensors: exact bytes of the format, round trips, rejection of corrupt files with clear
// messages, and a save that fails part-way leaving the previous checkpoint loadable.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstring>

#include "core/errors.h"
#include "runtime/io/safetensors.h"
#include "test_support.h"

namespace sublet::io {
namespace {

using sublet::testing::expect_mentions;
using sublet::testing::io_error_of;
using sublet::testing::read_raw;
using sublet::testing::ScratchDir;
using sublet::testing::write_raw;

std::vector<std::uint8_t> le_u64(std::uint64_t value) {
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  return bytes;
}

// A file laid out by hand: length prefix, the header text exactly as given, then `data`.
std::vector<std::uint8_t> raw_file(const std::string& header,
                                   const std::vector<std::uint8_t>& data) {
  std::vector<std::uint8_t> bytes = le_u64(header.size());
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

std::vector<std::uint8_t> float_bytes(std::initializer_list<float> values) {
  std::vector<std::uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), std::data(values), bytes.size());
  return bytes;
}

TEST(Safetensors, SaveWritesTheDocumentedLayoutByteForByte) {
  ScratchDir dir;
  const std::vector<float> values{1.0f, -2.0f};
  save_safetensors(dir / "a.safetensors", {{"w", make_f32_record({2}, values)}},
                   {{"format", "pt"}});
  // Keys sorted, "__metadata__" first; padded with spaces so the data starts 8-byte aligned:
  // 8 + 88 = 96.
  std::string header =
      R"({"__metadata__":{"format":"pt"},"w":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  ASSERT_EQ(header.size(), 85u);
  header += "   ";
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000, little-endian.
  const std::vector<std::uint8_t> data{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0};
  EXPECT_EQ(read_raw(dir / "a.safetensors"), raw_file(header, data));
}

TEST(Safetensors, LoadsAHandWrittenFileInTheReferenceKeyOrder) {
  ScratchDir dir;
  // The Hugging Face writer orders fields dtype, shape, data_offsets and pads with spaces.
  const std::string header =
      R"({"b":{"dtype":"I64","shape":[],"data_offsets":[8,16]},"a":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]},"__metadata__":{"step":"12"}}   )";
  std::vector<std::uint8_t> data = float_bytes({0.5f, 3.0f});
  const std::vector<std::uint8_t> scalar = le_u64(12345);
  data.insert(data.end(), scalar.begin(), scalar.end());
  write_raw(dir / "h.safetensors", raw_file(header, data));
  const SafetensorsFile file = load_safetensors(dir / "h.safetensors");
  ASSERT_EQ(file.tensors.size(), 2u);
  EXPECT_EQ(file.tensors.at("a").dtype, "F32");
  EXPECT_EQ(file.tensors.at("a").shape, (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(record_as_f32(file.tensors.at("a")), (std::vector<float>{0.5f, 3.0f}));
  EXPECT_TRUE(file.tensors.at("b").shape.empty());
  EXPECT_EQ(file.tensors.at("b").numel(), 1);
  EXPECT_EQ(record_as_i64(file.tensors.at("b")), (std::vector<std::int64_t>{12345}));
  EXPECT_EQ(file.metadata, (std::map<std::string, std::string>{{"step", "12"}}));
}

TEST(Safetensors, RoundTripKeepsBytesShapesDtypesAndMetadata) {
  ScratchDir dir;
  std::vector<float> weights(3 * 4 * 5);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.37f * i - 9.1f;
  const std::vector<double> doubles{3.14159265358979, -1e300, 2.5e-310};
  const std::vector<std::int64_t> counts{-7, 0, 1LL << 40};
  std::map<std::string, TensorRecord> tensors{
      {"layer1.weight", make_f32_record({3, 4, 5}, weights)},
      {"layer1.running_var", make_f64_record({3}, doubles)},
      {"layer1.num_batches_tracked", make_i64_record({3}, counts)},
      {"empty", make_f32_record({0, 3}, std::vector<float>{})},
      {"bytes", TensorRecord{"U8", {5}, {1, 2, 3, 4, 255}}},
  };
  const std::map<std::string, std::string> metadata{{"epoch", "3"},
                                                    {"note", "quotes \" and unicode \xc3\xa9"}};
  save_safetensors(dir / "ckpt.safetensors", tensors, metadata);
  const SafetensorsFile loaded = load_safetensors(dir / "ckpt.safetensors");
  EXPECT_EQ(loaded.metadata, metadata);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (const auto& [name, record] : tensors) {
    const TensorRecord& got = loaded.tensors.at(name);
    EXPECT_EQ(got.dtype, record.dtype) << name;
    EXPECT_EQ(got.shape, record.shape) << name;
    EXPECT_EQ(got.bytes, record.bytes) << name;
  }
  EXPECT_EQ(record_as_f64(loaded.tensors.at("layer1.running_var")), doubles);
  const std::vector<std::uint8_t> bytes = read_raw(dir / "ckpt.safetensors");
  EXPECT_EQ(bytes[0] % 8, 0) << "header not padded: the data would start unaligned";
}

TEST(Safetensors, SaveRejectsInconsistentRecordsBeforeTouchingTheFile) {
  ScratchDir dir;
  EXPECT_THROW(save_safetensors(dir / "x", {{"w", TensorRecord{"F32", {3}, {0, 0, 0, 0}}}}),
               ValueError);
  EXPECT_THROW(save_safetensors(dir / "x", {{"w", TensorRecord{"Q4", {1}, {0}}}}), ValueError);
  EXPECT_THROW(
      save_safetensors(dir / "x", {{"__metadata__", make_f32_record({1}, std::vector<float>{1})}}),
      ValueError);
  EXPECT_THROW(make_f32_record({2, 2}, std::vector<float>{1, 2, 3}), ShapeError);
  EXPECT_THROW(record_as_f64(make_f32_record({1}, std::vector<float>{1})), DTypeError);
  EXPECT_FALSE(std::filesystem::exists(dir / "x"));
}

struct CorruptCase {
  const char* label;
  std::vector<std::uint8_t> bytes;
  std::vector<std::string> mentions;
};

std::vector<CorruptCase> corrupt_cases() {
  const auto data8 = float_bytes({1, 2});
  const std::string good_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::vector<std::uint8_t> huge_length = le_u64(200'000'000);
  huge_length.resize(64, ' ');
  std::vector<std::uint8_t> long_length = le_u64(1000);
  const std::string tiny = "{}";
  long_length.insert(long_length.end(), tiny.begin(), tiny.end());
  return {
      {"shorter than the length field", {1, 2, 3}, {"file is 3 bytes", "8-byte header length"}},
      {"header longer than the file", long_length, {"says 1000 bytes", "only 2 bytes follow"}},
      {"header over the limit", huge_length, {"200000000 bytes", "100000000-byte limit"}},
      {"not JSON", raw_file("{\"a\": [1, 2", {}), {"not valid JSON"}},
      // Found by fuzz_safetensors_reader: a number no JSON number type holds (nlohmann throws
      // out_of_range, not parse_error) once ended the process through std::terminate.
      {"number overflow", raw_file(R"({"a": 5555555555555555e55555})", {}), {"not valid JSON"}},
      {"not an object", raw_file("[1, 2]", {}), {"starting with '{'"}},
      {"entry not an object", raw_file(R"({"a": 5})", {}), {"tensor 'a'", "expected an object"}},
      {"unknown dtype",
       raw_file(R"({"a":{"dtype":"F8X","shape":[2],"data_offsets":[0,2]}})", {1, 2}),
       {"tensor 'a'", "unknown dtype 'F8X'", "F32"}},
      {"missing field",
       raw_file(R"({"a":{"dtype":"F32","shape":[2]}})", data8),
       {"tensor 'a'", "missing field 'data_offsets'"}},
      {"unexpected field",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"stride":[1]}})", data8),
       {"unexpected field 'stride'"}},
      {"negative dimension",
       raw_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data8),
       {"tensor 'a' shape", "non-negative integer, found -2"}},
      {"shape disagrees with offsets",
       raw_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data8),
       {"tensor 'a'", "F32 [3] needs 12 bytes", "span 8"}},
      {"offsets past the buffer",
       raw_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data8),
       {"tensor 'a'", "[0, 16]", "8-byte data buffer"}},
      {"offsets reversed",
       raw_file(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", data8),
       {"tensor 'a'", "end before they begin"}},
      {"overlap",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           data8),
       {"'a' [0, 8)", "'b' [4, 8)", "overlap"}},
      {"hole",
       raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data8),
       {"bytes [0, 4)", "belong to no tensor"}},
      {"trailing bytes",
       raw_file("{" + good_entry + "}", float_bytes({1, 2, 3})),
       {"bytes [8, 12)", "end of the data buffer"}},
      {"repeated name",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           data8),
       {"names 'a' more than once"}},
      {"metadata value not a string",
       raw_file("{" + good_entry + R"(,"__metadata__":{"epoch":3}})", data8),
       {"__metadata__ 'epoch'", "must be strings, found 3"}},
  };
}

TEST(Safetensors, CorruptFilesAreRejectedWithTheProblemNamed) {
  ScratchDir dir;
  for (const CorruptCase& test_case : corrupt_cases()) {
    SCOPED_TRACE(test_case.label);
    const auto path = dir / "corrupt.safetensors";
    write_raw(path, test_case.bytes);
    std::vector<std::string> mentions = test_case.mentions;
    mentions.push_back(path.string());
    expect_mentions(io_error_of([&] { load_safetensors(path); }), mentions);
  }
  expect_mentions(io_error_of([&] { load_safetensors(dir / "absent.safetensors"); }),
                  {"absent.safetensors", "file not found"});
}

// Restores the file-size limit and SIGXFSZ disposition changed by a test.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    // Past the limit write() fails with EFBIG instead of killing the process.
    saved_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit limited = saved_;
    limited.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limited);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, saved_handler_);
  }

 private:
  rlimit saved_{};
  sighandler_t saved_handler_{};
};

TEST(Safetensors, SaveThatFailsPartWayLeavesThePreviousCheckpointLoadable) {
  ScratchDir dir;
  const auto path = dir / "model.safetensors";
  const std::vector<float> old_values{1, 2, 3, 4};
  save_safetensors(path, {{"w", make_f32_record({2, 2}, old_values)}}, {{"step", "100"}});
  const std::vector<std::uint8_t> old_bytes = read_raw(path);

  // A real write error after the temporary exists: the new checkpoint (4 MB) cannot grow past
  // 64 KiB, as on a full disk.
  std::vector<float> new_values(1 << 20, 0.5f);
  std::string message;
  {
    FileSizeLimit limit(64 * 1024);
    message = io_error_of([&] {
      save_safetensors(path, {{"w", make_f32_record({1 << 20}, new_values)}}, {{"step", "200"}});
    });
  }
  expect_mentions(message, {"model.safetensors", "write failed", "File too large"});
  EXPECT_EQ(read_raw(path), old_bytes);
  const SafetensorsFile loaded = load_safetensors(path);
  EXPECT_EQ(record_as_f32(loaded.tensors.at("w")), old_values);
  EXPECT_EQ(loaded.metadata.at("step"), "100");
  // The partial temporary was removed.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path()))
    ++files;
  EXPECT_EQ(files, 1u);
}

}  // namespace
}  // namespace sublet::io
