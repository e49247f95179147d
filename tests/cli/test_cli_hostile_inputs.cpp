// Hostile but realistic inputs to the `sublet` command, one case per way it once went wrong: a
// FIFO or device given as an input, gzip bombs, sizes that overflow 64 bits, deeply nested JSON,
// outputs naming the run's own inputs, file-system errors, a full standard output, terminal
// control characters in a snapshot. Every case must end (in seconds, not by the timeout) with one
// clear error or a correct result, and leave every file that was in the folder before it
// byte-identical (checksummed before and after).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/gzip_bytes.h"
#include "profile/pickle_writer.h"
#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using cli_test::non_empty_lines;
using cli_test::Outcome;
using cli_test::read_text;
using cli_test::run_sublet;
using cli_test::with;

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

std::string idx_images(std::uint32_t count) {
  std::string b = be32(0x803) + be32(count) + be32(28) + be32(28);
  for (std::uint32_t i = 0; i < count * 28 * 28; ++i) b.push_back(static_cast<char>(i * 7));
  return b;
}
std::string idx_labels(std::uint32_t count) { return be32(0x801) + be32(count) + std::string(count, '\3'); }

void write_mnist(const fs::path& dir) {
  write_text(dir / "train-images-idx3-ubyte", idx_images(4));
  write_text(dir / "train-labels-idx1-ubyte", idx_labels(4));
  write_text(dir / "t10k-images-idx3-ubyte", idx_images(2));
  write_text(dir / "t10k-labels-idx1-ubyte", idx_labels(2));
}

using sublet::testing::gzip;

std::string alloc_trace(const std::vector<std::string>& events) {
  std::string text = R"({"format": "sublet-alloc-trace", "version": 2, "events": [)";
  for (std::size_t i = 0; i < events.size(); ++i) text += (i ? ", " : "") + events[i];
  return text + "]}";
}
const std::string kTrace = alloc_trace({R"({"action": "alloc", "id": 1, "size": 4096})", R"({"action": "free", "id": 1})"});

// A memory_budget report as `sublet bench step --memory-budget --json` writes it, with `baseline`.
std::string budget_report(const std::string& baseline) {
  return R"({"memory_budget": {"baseline_peak_bytes": )" + baseline + R"(, "forward_ms": 1, "units": [
    {"backward_bytes": 3188776, "forward_ms": 0.12, "group": 0, "name": "stem", "output_bytes": 524288, "retained_bytes": 1049600},
    {"backward_bytes": 5872424, "forward_ms": 0.61, "group": 1, "name": "layer1.0", "output_bytes": 524288, "retained_bytes": 2099200},
    {"backward_bytes": 5853736, "forward_ms": 0.72, "group": 1, "name": "layer1.1", "output_bytes": 524288, "retained_bytes": 2099200}]}})";
}

const std::vector<std::string> kTinyTrain = {"train", "--device", "cpu", "--epochs", "1", "--batch-size", "2",
                                             "--limit-train", "4", "--limit-test", "2"};
// Every regular file under `dir` and its bytes, and every link and its target (links are not
// followed: some cases make link loops).
void collect(const fs::path& root, const fs::path& dir, std::map<std::string, std::string>& files) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const fs::path& path = entry.path();
    const std::string rel = path.lexically_relative(root).string();
    if (rel == ".stdout" || rel == ".stderr") continue;
    const fs::file_status status = fs::symlink_status(path);
    if (fs::is_symlink(status)) files[rel] = "link -> " + fs::read_symlink(path).string();
    else if (fs::is_directory(status)) collect(root, path, files);
    else if (fs::is_regular_file(status)) files[rel] = read_text(path);
  }
}

std::map<std::string, std::string> contents_of(const fs::path& dir) {
  std::map<std::string, std::string> files;
  collect(dir, dir, files);
  return files;
}

struct Case {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> expected;  // in the one error line, or with succeeds: in stdout
  std::function<void(const fs::path&)> prepare = {};
  bool succeeds = false;
  std::map<std::string, std::string> env = {};
  std::vector<std::string> absent_from_stdout = {};
  std::string stdout_to = {};  // a path for standard output instead of the captured file
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

std::vector<Case> all_cases() {
  const auto text = [](std::string name, std::string body) {
    return [name, body](const fs::path& dir) { write_text(dir / name, body); };
  };
  const auto fifo = [](std::string name) {
    return [name](const fs::path& dir) {
      fs::create_directories((dir / name).parent_path());
      ASSERT_EQ(::mkfifo((dir / name).c_str(), 0600), 0);
    };
  };
  const auto then = [](std::function<void(const fs::path&)> a, std::function<void(const fs::path&)> b) {
    return [a, b](const fs::path& dir) {
      a(dir);
      b(dir);
    };
  };
  const auto mnist_with = [](std::function<void(const fs::path&)> edit) {
    return [edit](const fs::path& dir) {
      write_mnist(dir / "mn");
      edit(dir / "mn");
    };
  };
  const std::string huge = "4611686018427387904";  // 2^62
  std::string five_huge;
  for (int i = 0; i < 5; ++i) five_huge += std::string(i ? ", " : "") + R"({"action": "alloc", "id": )" + std::to_string(i) + R"(, "size": )" + huge + "}";
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string safetensors_deep = R"({"model.deep": )" + deep + "}";
  safetensors_deep = std::string{static_cast<char>(safetensors_deep.size() & 0xff), static_cast<char>((safetensors_deep.size() >> 8) & 0xff),
                                 static_cast<char>((safetensors_deep.size() >> 16) & 0xff), 0, 0, 0, 0, 0} + safetensors_deep;

  return {
      // D1: FIFOs and devices as inputs are refused at once, never waited on.
      {"DatasetFileIsAFifo", with(kTinyTrain, {"--data-dir", "mn"}), {"mn/train-images-idx3-ubyte: expected a regular file, found a FIFO"},
       mnist_with([](const fs::path& d) {
         fs::remove(d / "train-images-idx3-ubyte");
         ASSERT_EQ(::mkfifo((d / "train-images-idx3-ubyte").c_str(), 0600), 0);
       })},
      {"ReplayOfAFifoWithoutWriter", {"replay", "t.fifo"}, {"t.fifo: a FIFO with no writer"}, fifo("t.fifo")},
      {"PlanOfAFifoWithoutWriter", {"plan", "t.fifo"}, {"t.fifo: a FIFO with no writer"}, fifo("t.fifo")},
      {"ResumeFromAFifo", with(kTinyTrain, {"--data", "synthetic", "--synthetic-shape", "1x8x8", "--resume", "ck.fifo"}),
       {"--resume ck.fifo: expected a checkpoint file, found a FIFO"}, fifo("ck.fifo")},
      {"ReplayJsonIntoAFifoWithoutReader", {"replay", "t.json", "--json", "out.fifo"}, {"out.fifo: a FIFO with no reader"},
       then(text("t.json", kTrace), fifo("out.fifo"))},
      // D2: decompression is bounded by the format's header, else by a stated limit.
      {"GzipBombInMnist", with(kTinyTrain, {"--data-dir", "mn"}),
       {"mn/train-images-idx3-ubyte.gz: decompresses to more than 3152 bytes, the size its header announces"},
       mnist_with([](const fs::path& d) {
         fs::remove(d / "train-images-idx3-ubyte");
         write_text(d / "train-images-idx3-ubyte.gz", gzip(idx_images(4) + std::string(std::size_t{64} << 20, '\0')));
       })},
      {"MnistGzLinkedToDevZero", with(kTinyTrain, {"--data-dir", "mn"}),
       {"mn/train-images-idx3-ubyte.gz: expected a regular file, found a character device"},
       mnist_with([](const fs::path& d) {
         fs::remove(d / "train-images-idx3-ubyte");
         fs::create_symlink("/dev/zero", d / "train-images-idx3-ubyte.gz");
       })},
      {"GzipBombSnapshot", {"replay", "bomb.pickle.gz"},
       {"bomb.pickle.gz: decompresses to more than 268435456 bytes, the limit for this input"},
       [](const fs::path& dir) {
         // 300 members of 1 MiB of zeros: a few hundred KB that would expand to 300 MiB.
         std::string bomb = gzip(std::string("\x80\x04", 2) + std::string((1 << 20) - 2, '\0'));
         const std::string member = gzip(std::string(1 << 20, '\0'));
         for (int i = 0; i < 299; ++i) bomb += member;
         write_text(dir / "bomb.pickle.gz", bomb);
       }},
      // D4: sizes past 2^64 are an error naming the event; huge requests are out of memory.
      {"PlanLiveBytesPast2To64", {"plan", "t.json"}, {"static plan: at event 3 the bytes live at once pass 2^64 bytes"},
       text("t.json", "[" + five_huge + "]")},
      {"ReplayPytorchRulesOfAHugeRequest", {"replay", "--rules", "pytorch", "t.json"}, {"OOM@0"},
       text("t.json", R"([{"action": "alloc", "id": 1, "size": 18446744073709551615}])"), true, {}, {" yes"}},
      {"PlanRowsOutOfMemorySaySo", {"plan", "t.json"}, {"OOM@0", "12.00 EiB"},
       text("t.json", "[" + five_huge.substr(0, five_huge.find(R"(, {"action": "alloc", "id": 3)")) + "]"), true, {},
       {"-4", "0 B "}},
      // D5: measured byte counts out of range are refused, not wrapped.
      {"RecomputeNegativeBaseline", {"plan", "--recompute", "r.json"},
       {"--recompute r.json: memory_budget.baseline_peak_bytes: expected a byte count from 1 to 2^50, found -5"},
       text("r.json", budget_report("-5"))},
      {"RecomputeBaselineOf2To64Minus1", {"plan", "--recompute", "r.json"},
       {"baseline_peak_bytes: expected a byte count from 1 to 2^50, found 18446744073709551615"},
       text("r.json", budget_report("18446744073709551615"))},
      {"RecomputeNegativeUnitBytes", {"plan", "--recompute", "r.json"},
       {"recompute units: entry 0 must have name, group (non-decreasing), retained_bytes, output_bytes (integers from 0 to 2^50)"},
       text("r.json", R"({"memory_budget": {"baseline_peak_bytes": 100, "forward_ms": 1, "units": [{"name": "a", "group": 0, "retained_bytes": -1, "output_bytes": 1, "forward_ms": 1}]}})")},
      // D6: deeply nested JSON in an error message is shown a few levels deep, never recursed into.
      {"RecomputeDeeplyNested", {"plan", "--recompute", "r.json"}, {"recompute units: entry 0 must have", "got [[[[...]]]]"},
       text("r.json", R"({"memory_budget": {"baseline_peak_bytes": 100, "forward_ms": 1, "units": [)" + deep + "]}}")},
      {"ResumeCheckpointWithADeepHeader", with(kTinyTrain, {"--data", "synthetic", "--synthetic-shape", "1x8x8", "--resume", "deep.safetensors"}),
       {"deep.safetensors: tensor 'model.deep': expected an object, found [[[[...]]]]"}, text("deep.safetensors", safetensors_deep)},
      // D7: an output may not replace an input of another kind, nor another output.
      {"ReplayJsonOverItsTrace", {"replay", "t.json", "--json", "t.json"},
       {"--json t.json: the same file as trace t.json, the trace this run reads"}, text("t.json", kTrace)},
      {"ReplayJsonOverALinkToItsTrace", {"replay", "t.json", "--json", "link.json"},
       {"--json link.json: the same file as trace t.json"}, then(text("t.json", kTrace), [](const fs::path& d) {
         fs::create_symlink("t.json", d / "link.json");
       })},
      {"PlanJsonOverItsTrace", {"plan", "t.json", "--json", "t.json"}, {"--json t.json: the same file as trace t.json"},
       text("t.json", kTrace)},
      {"MetricsOverTheResumedCheckpoint",
       with(kTinyTrain, {"--data", "synthetic", "--synthetic-shape", "1x8x8", "--resume", "ck.safetensors", "--metrics-json", "ck.safetensors"}),
       {"--metrics-json ck.safetensors: the same file as --resume ck.safetensors, the checkpoint this run reads"},
       text("ck.safetensors", "not read: the check comes first")},
      {"CheckpointOverADatasetFile", with(kTinyTrain, {"--data-dir", "mn", "--checkpoint", "mn/t10k-labels-idx1-ubyte"}),
       {"--checkpoint mn/t10k-labels-idx1-ubyte: the same file as --data-dir mn/t10k-labels-idx1-ubyte, the dataset this run reads"},
       mnist_with([](const fs::path&) {})},
      {"CheckpointAndMetricsInOneFile",
       with(kTinyTrain, {"--data", "synthetic", "--synthetic-shape", "1x8x8", "--checkpoint", "same.out", "--metrics-json", "same.out"}),
       {"--metrics-json same.out: the same file as --checkpoint same.out, another output of this run"}},
      {"BenchStepJsonAndAllocTraceInOneFile",
       {"bench", "step", "--model", "resnet20", "--device", "cpu", "--json", "same.json", "--alloc-trace", "same.json"},
       {"--alloc-trace same.json: the same file as --json same.json, another output of this run"}},
      // D8: file-system errors name the path, as every other I/O error.
      {"DataDirIsALinkLoop", with(kTinyTrain, {"--data-dir", "loopA"}), {"loopA/train-images-idx3-ubyte: Too many levels of symbolic links"},
       [](const fs::path& d) {
         fs::create_symlink("loopB", d / "loopA");
         fs::create_symlink("loopA", d / "loopB");
       }},
      {"DataDirNameTooLong", with(kTinyTrain, {"--data-dir", std::string(300, 'd')}), {"File name too long"}},
      {"ResumeOfALinkLoop", with(kTinyTrain, {"--data", "synthetic", "--synthetic-shape", "1x8x8", "--resume", "loopA"}),
       {"--resume loopA: Too many levels of symbolic links"}, [](const fs::path& d) {
         fs::create_symlink("loopB", d / "loopA");
         fs::create_symlink("loopA", d / "loopB");
       }},
      // D10: a repetition count the benchmark cannot lay out is refused before any cell runs.
      {"BenchAllocRepetitionsTooMany", {"bench", "alloc", "--device", "cpu", "--quick", "--repetitions", "1099511627776"},
       {"--repetitions: Value 1099511627776 not in range 1 to 10000000"}},
      // D12: a full standard output is an error, not a silent exit 0.
      {"ReplayIntoAFullStdout", {"replay", "t.json"}, {"could not write the output to standard output"}, text("t.json", kTrace),
       false, {}, {}, "/dev/full"},
      // D13: a snapshot's strings reach the terminal escaped.
      {"SnapshotSettingsWithAnEscape", {"replay", "esc.pickle"}, {R"(PYTORCH_CUDA_ALLOC_CONF='x\x1b[31mred')"},
       [](const fs::path& d) {
         using profile::PickleValue;
         const auto entry = [](const char* action, std::int64_t size) {
           return PickleValue(PickleValue::Dict{{"action", action}, {"addr", std::int64_t{1} << 20}, {"size", size}, {"stream", 0}});
         };
         const PickleValue snapshot(PickleValue::Dict{
             // One device's list inside the list of devices (a lone List{List{}} would copy, not nest).
             {"device_traces", PickleValue::List{PickleValue(PickleValue::List{
                                   entry("segment_alloc", 2 << 20), entry("alloc", 1000), entry("free_completed", 1000)})}},
             {"allocator_settings", PickleValue::Dict{{"PYTORCH_CUDA_ALLOC_CONF", "x\x1b[31mred"}}}});
         write_text(d / "esc.pickle", profile::pickle_dumps(snapshot));
       },
       true, {}, {"\x1b"}},
      {"UnknownActionWithAnEscape", {"replay", "t.json"}, {R"(unknown action 'a\x1b[2Jb')"},
       text("t.json", alloc_trace({R"({"action": "a\u001b[2Jb", "id": 1})"}))},
      // The allocator configuration: PyTorch's current variable is read, and errors name the
      // variable or flag the text came from.
      {"PytorchAllocConfIsRead", {"replay", "t.json"}, {"PYTORCH_ALLOC_CONF: bad value '5' for max_split_size_mb"},
       text("t.json", kTrace), false, {{"PYTORCH_ALLOC_CONF", "max_split_size_mb:5"}}},
      {"ReplayAllocConfFlagNamed", {"replay", "t.json", "--alloc-conf", "max_split_size_mb:10"},
       {"--alloc-conf: bad value '10' for max_split_size_mb"}, text("t.json", kTrace)},
      // Streams that are allowed: a trace from standard input.
      {"ReplayFromStandardInput", {"replay", "-"}, {"Replayed 2 events"}, text("t.json", kTrace), true},
  };
}

class HostileInputs : public ::testing::TestWithParam<Case> {};

TEST_P(HostileInputs, EndsClearlyAndLeavesEveryFileAsItWas) {
  const Case& c = GetParam();
  cli_test::ScratchDir scratch("sublet-hostile");
  const fs::path& dir = scratch.path();
  if (c.prepare) {
    c.prepare(dir);
    if (::testing::Test::HasFatalFailure()) return;
  }
  const auto before = contents_of(dir);
  const auto started = std::chrono::steady_clock::now();
  const fs::path stdin_from = c.name == "ReplayFromStandardInput" ? dir / "t.json" : fs::path();
  const Outcome o = run_sublet(c.args, c.env, dir, std::chrono::seconds(60), stdin_from, c.stdout_to);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string command = "sublet";
  for (const auto& a : c.args) command += " " + a.substr(0, 80);
  const std::string shown = command + "\n--- stdout:\n" + o.out.substr(0, 4000) + "--- stderr:\n" + o.err.substr(0, 4000);

  ASSERT_TRUE(o.exited) << "killed by signal " << o.signal << ": " << shown;
  EXPECT_TRUE(seconds <= 30.0) << seconds << " s: " << shown;
  for (const char* crash : {"internal error", "terminate called", "what():", "bad_alloc"})
    EXPECT_EQ(o.err.find(crash), std::string::npos) << shown;
  if (c.succeeds) {
    EXPECT_EQ(o.exit_code, 0) << shown;
    for (const auto& part : c.expected) EXPECT_NE(o.out.find(part), std::string::npos) << "expected '" << part << "': " << shown;
  } else {
    // 1: sublet's own errors; CLI11's flag checks exit with their own non-zero codes.
    EXPECT_TRUE(o.exit_code != 0 && o.exit_code != 2) << shown;
    std::vector<std::string> lines = non_empty_lines(o.err);
    if (!lines.empty() && lines.back() == "Run with --help for more information.") lines.pop_back();
    ASSERT_FALSE(lines.empty()) << shown;
    const std::string& message = lines.back();
    std::cout << "  " << command << "\n  -> " << message.substr(0, 300) << "\n";
    EXPECT_TRUE(message.size() <= 1000) << "a message of " << message.size() << " characters: " << shown;
    for (const auto& part : c.expected)
      EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in the message: " << shown;
  }
  for (const auto& part : c.absent_from_stdout)
    EXPECT_EQ(o.out.find(part), std::string::npos) << "'" << part << "' in stdout: " << shown;
  // Nothing that was there before changed; new files only where the run succeeded.
  const auto after = contents_of(dir);
  for (const auto& [name, bytes] : before) {
    const auto it = after.find(name);
    ASSERT_NE(it, after.end()) << name << " is gone: " << shown;
    EXPECT_TRUE(it->second == bytes) << name << " changed: " << shown;
  }
}

INSTANTIATE_TEST_SUITE_P(Sublet, HostileInputs, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

// A trace may stream from a FIFO that has a writer: the whole trace is read, then replayed.
TEST(HostileInputsStreams, ReplaysAFifoThatHasAWriter) {
  cli_test::ScratchDir scratch("sublet-hostile-fifo");
  const fs::path fifo = scratch.path() / "t.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Held open for reading and writing by this test: the data waits in the pipe, and the reader
  // sees its end only when the writer closes.
  // O_CLOEXEC: the child must not inherit this writer, or it would never see the end.
  const int fd = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, kTrace.data(), kTrace.size()), static_cast<ssize_t>(kTrace.size()));
  std::thread closer([fd] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::close(fd);
  });
  const Outcome o = run_sublet({"replay", "t.fifo"}, {}, scratch.path(), std::chrono::seconds(60));
  closer.join();
  ASSERT_TRUE(o.exited) << o.err;
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("Replayed 2 events"), std::string::npos) << o.out;
}

// profile --out refuses a folder holding an earlier profile's files unless --overwrite, which
// then removes the earlier files of profile's own names and nothing else.
TEST(HostileInputsProfile, ReusedOutFolderNeedsOverwrite) {
  cli_test::ScratchDir scratch("sublet-hostile-profile");
  const fs::path& dir = scratch.path();
  const std::vector<std::string> base = {"profile", "--device", "cpu", "--input", "1x8x8", "--batch-size", "2",
                                         "--timing-steps", "0", "--out", "P"};
  const Outcome first = run_sublet(with(base, {"--steps", "2"}), {}, dir);
  ASSERT_TRUE(first.exited && first.exit_code == 0) << first.out << first.err;
  ASSERT_TRUE(fs::exists(dir / "P" / "step_diff.txt"));
  write_text(dir / "P" / "notes.txt", "mine");
  const auto before = contents_of(dir);

  const Outcome refused = run_sublet(with(base, {"--steps", "1"}), {}, dir);
  ASSERT_TRUE(refused.exited) << refused.err;
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("--out P: holds files of an earlier profile ("), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("step_diff.txt"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("pass --overwrite"), std::string::npos) << refused.err;
  EXPECT_TRUE(contents_of(dir) == before) << "the refused run changed the folder";

  const Outcome replaced = run_sublet(with(base, {"--steps", "1", "--overwrite"}), {}, dir);
  ASSERT_TRUE(replaced.exited && replaced.exit_code == 0) << replaced.out << replaced.err;
  EXPECT_FALSE(fs::exists(dir / "P" / "step_diff.txt")) << "the 2-step run's step diff stayed";
  EXPECT_TRUE(fs::exists(dir / "P" / "summary.txt"));
  EXPECT_EQ(read_text(dir / "P" / "notes.txt"), "mine");
}

// A checkpoint records its precision and memory format; a run of another one resumes from it
// (the float32 weights are copied into its own tensors) and says so.
TEST(HostileInputsCheckpoints, AnotherPrecisionResumesWithANote) {
  cli_test::ScratchDir scratch("sublet-hostile-precision");
  const std::vector<std::string> base = {"train", "--device", "cpu", "--data", "synthetic", "--synthetic-shape", "1x8x8",
                                         "--limit-train", "4", "--limit-test", "2", "--batch-size", "2"};
  const Outcome first = run_sublet(with(base, {"--epochs", "1", "--precision", "bf16", "--checkpoint", "ck.safetensors"}), {},
                                   scratch.path());
  ASSERT_TRUE(first.exited && first.exit_code == 0) << first.out << first.err;
  const std::string header = read_text(scratch.path() / "ck.safetensors");  // the JSON header is in it
  EXPECT_NE(header.find(R"("precision":"bf16")"), std::string::npos);
  EXPECT_NE(header.find(R"("memory_format":"contiguous")"), std::string::npos);
  const Outcome resumed = run_sublet(with(base, {"--epochs", "2", "--resume", "ck.safetensors"}), {}, scratch.path());
  ASSERT_TRUE(resumed.exited && resumed.exit_code == 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("the checkpoint was written by a --precision bf16 run; this run continues in fp32"),
            std::string::npos)
      << resumed.out;
  const Outcome same = run_sublet(with(base, {"--epochs", "2", "--precision", "bf16", "--resume", "ck.safetensors"}), {},
                                  scratch.path());
  ASSERT_TRUE(same.exited && same.exit_code == 0) << same.out << same.err;
  EXPECT_EQ(same.out.find("the checkpoint was written by"), std::string::npos) << same.out;
}

}  // namespace
}  // namespace sublet
