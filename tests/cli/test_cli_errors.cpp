// Bad input everywhere a user touches `sublet`: every subcommand with bad flag values, malformed
// shapes, unknown names, missing or unwritable paths, a bad SUBLET_ALLOC_CONF, --device cuda
// without a GPU, broken datasets and checkpoints of another model or cut short. The real binary
// runs as a child process; each case must end with one clear message on stderr (the text the
// README's troubleshooting table quotes) and a non-zero exit status, never a signal, an abort, an
// "internal error" or a message printed twice.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "memory/registry.h"
#include "tests/cli/cli_process.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using cli_test::count_of;
using cli_test::non_empty_lines;
using cli_test::Outcome;
using cli_test::read_text;
using cli_test::run_sublet;
using cli_test::with;

// ---------------------------------------------------------------------------------------------
// Files the cases need, written into the case's scratch folder

using Bytes = std::vector<std::uint8_t>;

void write_bytes(const fs::path& path, const Bytes& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "could not write " << path;
}

void write_text(const fs::path& path, const std::string& text) { write_bytes(path, Bytes(text.begin(), text.end())); }

void append_be32(Bytes& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

Bytes idx_images(std::uint32_t count, std::uint32_t rows = 28, std::uint32_t cols = 28) {
  Bytes b;
  append_be32(b, 0x803);
  append_be32(b, count);
  append_be32(b, rows);
  append_be32(b, cols);
  for (std::uint64_t i = 0; i < std::uint64_t{count} * rows * cols; ++i) b.push_back(static_cast<std::uint8_t>(i * 7));
  return b;
}

Bytes idx_labels(std::uint32_t count, std::uint8_t label = 3) {
  Bytes b;
  append_be32(b, 0x801);
  append_be32(b, count);
  for (std::uint32_t i = 0; i < count; ++i) b.push_back(label);
  return b;
}

// A valid four-file MNIST folder of 4 training and 2 test digits; `edit` breaks one thing.
void write_mnist(const fs::path& dir, const std::function<void(std::map<std::string, Bytes>&)>& edit = {}) {
  std::map<std::string, Bytes> files{{"train-images-idx3-ubyte", idx_images(4)},
                                     {"train-labels-idx1-ubyte", idx_labels(4)},
                                     {"t10k-images-idx3-ubyte", idx_images(2)},
                                     {"t10k-labels-idx1-ubyte", idx_labels(2)}};
  if (edit) edit(files);
  for (const auto& [name, bytes] : files) write_bytes(dir / name, bytes);
}

// A safetensors file: 8-byte little-endian header length, JSON header, data.
Bytes safetensors_bytes(const std::string& header) {
  Bytes b;
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<std::uint8_t>(std::uint64_t{header.size()} >> (8 * i)));
  b.insert(b.end(), header.begin(), header.end());
  return b;
}

// The one options set every checkpoint case trains or resumes with: ResNet-20 on 32 synthetic
// 1x8x8 images, one step per epoch.
const std::vector<std::string> kTinyTrain = {"train",          "--device",       "cpu", "--data",  "synthetic",
                                             "--synthetic-shape", "1x8x8",       "--limit-train", "32",
                                             "--limit-test",   "16",             "--batch-size", "32", "--epochs", "1"};

std::vector<std::string> tiny_train(std::vector<std::string> extra) {
  std::vector<std::string> args = kTinyTrain;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// A real checkpoint of ResNet-20 (1 input channel, 10 classes, SGD, 32 training images).
void write_checkpoint(const fs::path& dir) {
  const Outcome o = run_sublet(tiny_train({"--checkpoint", "ck.safetensors"}), {}, dir);
  ASSERT_TRUE(o.exited && o.exit_code == 0) << "the run that writes the checkpoint failed:\n" << o.out << o.err;
  ASSERT_TRUE(fs::is_regular_file(dir / "ck.safetensors"));
}

void write_truncated_checkpoint(const fs::path& dir, std::size_t keep_from_end_removed) {
  write_checkpoint(dir);
  const std::string all = read_text(dir / "ck.safetensors");
  write_text(dir / "cut.safetensors", all.substr(0, all.size() - keep_from_end_removed));
}

// ---------------------------------------------------------------------------------------------
// The cases

struct Case {
  std::string name;
  std::vector<std::string> args;
  std::vector<std::string> expected;  // every one must be in the message
  std::map<std::string, std::string> env = {};
  std::function<void(const fs::path&)> prepare = {};
  bool needs_no_cuda = false;  // `--device cuda` cases: only meaningful where there is no GPU
};

std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

const std::vector<std::string> kDemo = {"demo", "release"};
const std::vector<std::string> kProfile = {"profile", "--device", "cpu", "--input", "1x8x8", "--batch-size", "2",
                                           "--steps", "1", "--timing-steps", "0"};
const std::vector<std::string> kBenchStep = {"bench", "step", "--model", "resnet20", "--input", "1x8x8",
                                             "--batch-size", "2", "--steps", "1", "--warmup", "0"};

const std::string kAllocTrace = R"({"format": "sublet-alloc-trace", "events": [)"
                                R"({"action": "alloc", "id": 1, "size": 4096}, {"action": "free", "id": 1}]})";

std::vector<Case> all_cases() {
  const auto mnist = [](std::function<void(std::map<std::string, Bytes>&)> edit) {
    return [edit](const fs::path& dir) { write_mnist(dir / "mnist", edit); };
  };
  const auto text_file = [](std::string name, std::string text) {
    return [name, text](const fs::path& dir) { write_text(dir / name, text); };
  };
  const auto folder = [](std::string name) { return [name](const fs::path& dir) { fs::create_directories(dir / name); }; };
  const auto cifar = [](std::size_t short_by) {
    return [short_by](const fs::path& dir) {
      const std::size_t record = 3073;
      for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                               "data_batch_5.bin", "test_batch.bin"})
        write_bytes(dir / "cifar" / name, Bytes(2 * record, 1));
      write_bytes(dir / "cifar" / "data_batch_3.bin", Bytes(2 * record - short_by, 1));
    };
  };

  std::vector<Case> cases = {
      // The command line itself (CLI11, with sublet's wording for conversions and commands).
      {"NoCommand", {}, {"sublet: expected a command (demo, bench, replay, plan, profile, train, config, generate), got none"}},
      {"UnknownCommand", {"bogus"}, {"sublet: expected a command (", "got 'bogus'"}},
      {"BenchWithoutItsCommand", {"bench"}, {"sublet bench: expected a command (alloc, step)"}},
      {"UnknownFlag", {"train", "--no-such-flag"}, {"The following argument was not expected: --no-such-flag"}},
      {"FlagGivenTwice", {"train", "--epochs", "2", "--epochs", "3"}, {"--epochs: given 2 times, expected once"}},
      {"FlagWithoutValue", {"train", "--epochs"}, {"--epochs: expected an integer after it, got nothing"}},

      // --precision and --channels-last: a bad name, and fp16 on the CPU.
      {"TrainUnknownPrecision", {"train", "--precision", "fp8"}, {"--precision: fp8 not in {fp32,bf16,fp16}"}},
      {"TrainFp16OnCpu", {"train", "--device", "cpu", "--data", "synthetic", "--precision", "fp16"},
       {"--precision fp16: float16 training needs a CUDA device", "this run is on cpu"}},
      {"BenchStepFp16OnCpu", {"bench", "step", "--device", "cpu", "--model", "resnet20", "--precision", "fp16"},
       {"bench step --precision fp16: float16 training needs --device cuda", "this run is on cpu"}},
      {"ProfileFp16OnCpu", {"profile", "--device", "cpu", "--precision", "fp16"},
       {"profile --precision fp16: float16 training needs a CUDA device", "this run is on cpu"}},

      // sublet train: names and numbers.
      // Data parallel: refused before any worker starts.
      {"TrainDataParallelNcclOnCpu", {"train", "--nproc-per-node", "2", "--device", "cpu", "--backend", "nccl", "--data", "synthetic"},
       {"--backend nccl connects GPUs, and --device cpu asks for the CPU; use --backend gloo"}},
      {"TrainDataParallelCudaWithoutGpu", {"train", "--nproc-per-node", "2", "--device", "cuda", "--data", "synthetic"},
       {"--nproc-per-node starts one process per GPU, and ", "pass --device cpu to train data-parallel on the CPU"},
       {}, {}, true},
      {"TrainDataParallelZeroProcesses", {"train", "--nproc-per-node", "0"},
       {"--nproc-per-node: Value 0 not in range 1 to 1024"}},
      {"TrainWorkerCannotLaunch", {"train", "--nproc-per-node", "2", "--data", "synthetic"},
       {"--nproc-per-node starts workers, but this process already is one"}, {{"RANK", "0"}, {"WORLD_SIZE", "2"}}},
      {"TrainTwoNodesWithoutToken", {"train", "--nproc-per-node", "1", "--nnodes", "2", "--device", "cpu", "--data", "synthetic"},
       {"--nnodes 2 needs SUBLET_STORE_TOKEN, the same on every node"}},
      {"TrainUnknownBackend", {"train", "--device", "cpu", "--backend", "mpi"},
       {"--backend: unknown value 'mpi'; expected one of auto, nccl, gloo"}},
      {"TrainDistTimeoutZero", {"train", "--device", "cpu", "--dist-timeout", "0"},
       {"--dist-timeout must be in [0.1, 86400] seconds, got 0"}},
      {"TrainBucketCapZero", {"train", "--bucket-cap-mb", "0", "--data", "synthetic"},
       {"--bucket-cap-mb must be in [0.0009765625 (1 KiB), 4096], got 0"}},
      {"TrainUnknownModel", {"train", "--model", "resnet99"},
       {"--model: unknown value 'resnet99'; expected one of resnet20, resnet32, resnet56, resnet18, resnet34, resnet50"}},
      {"TrainUnknownData", {"train", "--data", "imagenet"},
       {"--data: unknown value 'imagenet'; expected one of mnist, fashion-mnist, cifar10, synthetic, text, tokens"}},
      {"TrainUnknownOptimizer", {"train", "--optimizer", "rmsprop"},
       {"--optimizer: unknown value 'rmsprop'; expected one of sgd, adam, adamw"}},
      {"TrainUnknownSchedule", {"train", "--schedule", "linear"},
       {"--schedule: unknown value 'linear'; expected one of none, step, cosine"}},
      {"TrainUnknownDevice", {"train", "--device", "gpu"},
       {"--device: unknown value 'gpu'; expected auto, cpu, cuda or cuda:N"}},
      {"TrainMalformedDeviceIndex", {"train", "--device", "cuda:x"},
       {"--device: unknown value 'cuda:x'; expected auto, cpu, cuda or cuda:N"}},
      {"TrainZeroEpochs", {"train", "--device", "cpu", "--epochs", "0"}, {"--epochs must be >= 1, got 0"}},
      {"TrainBadMemoryBudget", {"train", "--device", "cpu", "--memory-budget", "6gb"},
       {"--memory-budget: expected a size with a unit (6GiB, 512MiB, 1.5GB, or bytes) or a fraction in (0, 1] of the "
        "measured peak (0.5), got '6gb'"}},
      {"TrainMemoryPlanWithoutGraph", {"train", "--device", "cpu", "--memory-plan", "static"},
       {"--memory-plan lays out a captured step's memory, so it needs --cuda-graph"}},
      {"BenchStepMemoryPlanWithoutGraph", {"bench", "step", "--model", "resnet20", "--device", "cpu", "--memory-plan", "cached"},
       {"bench step --memory-plan: lays out a captured step's memory, so it needs --cuda-graph"}},
      {"PlanWithNothingToPlan", {"plan"},
       {"plan: give a TRACE (sublet-alloc-trace or PyTorch snapshot), --recompute BENCH.json, or both"}},
      {"TrainEpochsNotANumber", {"train", "--epochs", "many"}, {"--epochs: expected an integer, got 'many'"}},
      {"TrainEpochsOverflow", {"train", "--device", "cpu", "--epochs", "99999999999999999999"},
       {"--epochs must be <= 1000000, got"}},
      {"TrainNegativeBatchSize", {"train", "--device", "cpu", "--batch-size", "-8"},
       {"--batch-size must be >= 1, got -8"}},
      {"TrainHugeBatchSize", {"train", "--device", "cpu", "--batch-size", "2000000"},
       {"--batch-size must be <= 1048576, got 2000000"}},
      {"TrainNegativeLearningRate", {"train", "--device", "cpu", "--lr", "-0.1"},
       {"--lr must be in (0, 100] (or 0 for the optimizer's default), got -0.1"}},
      {"TrainLearningRateNotANumber", {"train", "--lr", "fast"}, {"--lr: expected a number, got 'fast'"}},
      {"TrainMomentumOutOfRange", {"train", "--device", "cpu", "--momentum", "1.5"},
       {"--momentum must be in [0, 1), got 1.5"}},
      {"TrainNegativeWeightDecay", {"train", "--device", "cpu", "--weight-decay", "-0.1"},
       {"--weight-decay must be in [0, 1], got -0.1"}},
      {"TrainInfiniteWeightDecay", {"train", "--device", "cpu", "--weight-decay", "inf"},
       {"--weight-decay must be in [0, 1], got inf"}},
      {"TrainLabelSmoothingOne", {"train", "--device", "cpu", "--label-smoothing", "1"},
       {"--label-smoothing must be in [0, 1), got 1"}},
      {"TrainNegativeLimit", {"train", "--device", "cpu", "--limit-train", "-5"}, {"--limit-train must be >= 0, got -5"}},
      {"TrainNegativeSeed", {"train", "--seed", "-1"}, {"--seed", "expected a non-negative integer, got '-1'"}},
      {"TrainSyntheticShapeTwoDims", {"train", "--device", "cpu", "--data", "synthetic", "--synthetic-shape", "3x32"},
       {"--synthetic-shape: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x32\""}},
      {"TrainSyntheticShapeZero", {"train", "--device", "cpu", "--data", "synthetic", "--synthetic-shape", "0x32x32"},
       {"--synthetic-shape: expected CxHxW with positive integers, e.g. 3x32x32; found \"0x32x32\""}},
      {"TrainSyntheticShapeTrailingText", {"train", "--device", "cpu", "--data", "synthetic", "--synthetic-shape", "3x32x32px"},
       {"--synthetic-shape: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x32x32px\""}},
      {"TrainSyntheticShapeTooLargeForHostMemory",
       {"train", "--device", "cpu", "--data", "synthetic", "--synthetic-shape", "3x100000x100000"},
       {"--synthetic-shape 3x100000x100000: 10000 + 2000 synthetic images need", "of host memory"}},
      {"TrainCudaGraphOnCpu", {"train", "--device", "cpu", "--data", "synthetic", "--cuda-graph"},
       {"--cuda-graph needs a CUDA device (CUDA graphs exist only on the GPU); this run is on cpu"}},
      {"TrainCudaWithoutGpu", {"train", "--device", "cuda", "--data", "synthetic"},
       {"--device cuda: ", "use --device cpu"}, {}, {}, true},

      // sublet train: datasets.
      {"TrainMnistMissing", {"train", "--device", "cpu"},
       {"MNIST not found in 'data/mnist'", "run scripts/fetch_mnist.sh to download it, or pass --data-dir DIR"}},
      {"TrainDataDirIsAFile", {"train", "--device", "cpu", "--data-dir", "notes.txt"}, {"MNIST not found in 'notes.txt'"},
       {}, text_file("notes.txt", "not a folder\n")},
      {"TrainCifarMissing", {"train", "--device", "cpu", "--data", "cifar10"},
       {"CIFAR-10 not found in 'data/cifar-10-batches-bin'", "or pass --data-dir DIR"}},
      {"TrainMnistWrongLabelCount", {"train", "--device", "cpu", "--data-dir", "mnist"},
       {"mnist/train-labels-idx1-ubyte: expected 4 labels (the image count of train-images-idx3-ubyte), found 3"}, {},
       mnist([](auto& f) { f["train-labels-idx1-ubyte"] = idx_labels(3); })},
      {"TrainMnistTruncatedImages", {"train", "--device", "cpu", "--data-dir", "mnist"},
       {"mnist/train-images-idx3-ubyte: truncated: header says 4 images of 28x28 (3136 bytes after the header), found 3000"},
       {}, mnist([](auto& f) { f["train-images-idx3-ubyte"].resize(16 + 3000); })},
      {"TrainMnistLabelOutOfRange", {"train", "--device", "cpu", "--data-dir", "mnist"},
       {"mnist/t10k-labels-idx1-ubyte: expected labels 0-9, found 12 at index 0"}, {},
       mnist([](auto& f) { f["t10k-labels-idx1-ubyte"] = idx_labels(2, 12); })},
      {"TrainMnistNotAnIdxFile", {"train", "--device", "cpu", "--data-dir", "mnist"},
       {"mnist/train-images-idx3-ubyte: expected magic 0x00000803 (IDX3 images), found 0x3c68746d"}, {},
       mnist([](auto& f) {
         const std::string html = "<html><body>Not Found</body></html>\n";
         f["train-images-idx3-ubyte"] = Bytes(html.begin(), html.end());
       })},
      {"TrainMnistGzipWithoutSuffix", {"train", "--device", "cpu", "--data-dir", "mnist"},
       {"mnist/train-images-idx3-ubyte: expected magic 0x00000803 (IDX3 images), found 0x1f8b0800",
        "(gzip data: name the file with a .gz suffix)"},
       {}, mnist([](auto& f) {
         Bytes gz{0x1f, 0x8b, 0x08, 0x00};
         gz.resize(64, 0);
         f["train-images-idx3-ubyte"] = gz;
       })},
      {"TrainMnistEmptyTrainingSplit", {"train", "--device", "cpu", "--data-dir", "mnist"},
       {"mnist in 'mnist': the training split has 0 images; expected at least 1"}, {}, mnist([](auto& f) {
         f["train-images-idx3-ubyte"] = idx_images(0);
         f["train-labels-idx1-ubyte"] = idx_labels(0);
       })},
      {"TrainMnistTestImagesOfAnotherSize", {"train", "--device", "cpu", "--data-dir", "mnist"},
       {"mnist in 'mnist': the test images are 1x20x20, the training images 1x28x28; expected one image size for both"},
       {}, mnist([](auto& f) { f["t10k-images-idx3-ubyte"] = idx_images(2, 20, 20); })},
      {"TrainCifarTruncatedBatch", {"train", "--device", "cpu", "--data", "cifar10", "--data-dir", "cifar"},
       {"cifar/data_batch_3.bin: expected a positive multiple of 3073 bytes (1 label + 3072 pixels per image), found 6046 "
        "bytes (1 records and 2973 bytes over: truncated?)"},
       {}, cifar(100)},

      // sublet train: outputs, checked before training starts.
      {"TrainCheckpointFolderMissing", tiny_train({"--checkpoint", "no/such/dir/ck.safetensors"}),
       {"--checkpoint no/such/dir/ck.safetensors: the directory ", "/no/such/dir does not exist"}},
      {"TrainCheckpointIsAFolder", tiny_train({"--checkpoint", "out"}),
       {"--checkpoint out: expected a file name, found a folder"}, {}, folder("out")},
      {"TrainMetricsInUnwritableFolder", tiny_train({"--metrics-json", "/proc/metrics.json"}),
       {"--metrics-json /proc/metrics.json: cannot create files in /proc ("}},
      {"TrainMetricsUnderAFile", tiny_train({"--metrics-json", "notes.txt/m.json"}),
       {"--metrics-json notes.txt/m.json: ", "/notes.txt is a file, expected a directory"}, {},
       text_file("notes.txt", "a file\n")},

      // sublet train --resume: checkpoints of another run, cut short or not checkpoints at all.
      {"ResumeMissingFile", tiny_train({"--resume", "absent.safetensors"}), {"--resume absent.safetensors: no such file"}},
      {"ResumeFolder", tiny_train({"--resume", "out"}), {"--resume out: expected a checkpoint file, found a folder"}, {},
       folder("out")},
      {"ResumeCheckpointOfAnotherModel", tiny_train({"--model", "resnet32", "--resume", "ck.safetensors"}),
       {"checkpoint ck.safetensors was written for resnet20 (1 input channel, 10 classes, optimizer sgd), but this run "
        "uses resnet32 (1 input channel, 10 classes, optimizer sgd); pass the --model, --data and --optimizer of the run "
        "that wrote it"},
       {}, write_checkpoint},
      {"ResumeCheckpointOfAnotherOptimizer", tiny_train({"--optimizer", "adamw", "--resume", "ck.safetensors"}),
       {"was written for resnet20 (1 input channel, 10 classes, optimizer sgd), but this run uses resnet20 (1 input "
        "channel, 10 classes, optimizer adamw)"},
       {}, write_checkpoint},
      {"ResumeCheckpointOfOtherImages",
       {"train", "--device", "cpu", "--data", "synthetic", "--synthetic-shape", "3x8x8", "--limit-train", "32",
        "--limit-test", "16", "--batch-size", "32", "--resume", "ck.safetensors"},
       {"was written for resnet20 (1 input channel, 10 classes, optimizer sgd), but this run uses resnet20 (3 input "
        "channels, 10 classes, optimizer sgd)"},
       {}, write_checkpoint},
      {"ResumeCheckpointOfAnotherTrainingSet",
       {"train", "--device", "cpu", "--data", "synthetic", "--synthetic-shape", "1x8x8", "--limit-train", "64",
        "--limit-test", "16", "--batch-size", "32", "--resume", "ck.safetensors"},
       {"checkpoint ck.safetensors was written for a training set of 32 images, this run has 64; pass the --data and "
        "--limit-train of the run that wrote it"},
       {}, write_checkpoint},
      {"ResumeCheckpointCutInItsHeader", tiny_train({"--resume", "cut.safetensors"}),
       {"cut.safetensors: header length field says ", "bytes, but only 92 bytes follow it (truncated?)"}, {},
       [](const fs::path& dir) {
         write_checkpoint(dir);
         write_text(dir / "cut.safetensors", read_text(dir / "ck.safetensors").substr(0, 100));
       }},
      {"ResumeCheckpointCutInItsData", tiny_train({"--resume", "cut.safetensors"}),
       {"cut.safetensors: tensor '", "] exceed the ", "-byte data buffer (file truncated?)"}, {},
       [](const fs::path& dir) { write_truncated_checkpoint(dir, 1000); }},
      {"ResumeEmptyFile", tiny_train({"--resume", "empty.safetensors"}),
       {"empty.safetensors: file is 0 bytes, shorter than the 8-byte header length field"}, {},
       text_file("empty.safetensors", "")},
      {"ResumeSafetensorsThatIsNoCheckpoint", tiny_train({"--resume", "weights.safetensors"}),
       {"weights.safetensors: not a sublet training checkpoint (metadata 'format' is missing, expected "
        "'sublet-training-checkpoint')"},
       {}, [](const fs::path& dir) { write_bytes(dir / "weights.safetensors", safetensors_bytes("{}")); }},

      // SUBLET_ALLOC_CONF: refused by every command before it starts work.
      {"AllocConfUnknownKey", tiny_train({}),
       {"SUBLET_ALLOC_CONF: unknown option 'max_split_mb' (value '128'); known options: max_split_size_mb, "
        "roundup_power2_divisions, expandable_segments, garbage_collection_threshold"},
       {{"SUBLET_ALLOC_CONF", "max_split_mb:128"}}},
      {"AllocConfSplitSizeTooSmall", tiny_train({}),
       {"SUBLET_ALLOC_CONF: bad value '5' for max_split_size_mb: expected an integer number of MiB > 20"},
       {{"SUBLET_ALLOC_CONF", "max_split_size_mb:5"}}},
      {"PytorchAllocConfSplitSizeTooSmall", tiny_train({}),
       {"PYTORCH_CUDA_ALLOC_CONF: bad value '20' for max_split_size_mb: expected an integer number of MiB > 20"},
       {{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:20"}}},
      {"AllocConfOptionWithoutValue", {"bench", "alloc", "--device", "sim", "--quick"},
       {"SUBLET_ALLOC_CONF: option 'expandable_segments' has no value; expected key:value"},
       {{"SUBLET_ALLOC_CONF", "expandable_segments"}}},
      {"AllocConfBadBoolean", {"replay", "trace.json"},
       {"SUBLET_ALLOC_CONF: bad value 'yes' for expandable_segments: expected True or False"},
       {{"SUBLET_ALLOC_CONF", "expandable_segments:yes"}}, text_file("trace.json", kAllocTrace)},
      {"AllocConfThresholdOutOfRange", with(kDemo, {"--device", "cpu", "--size-mb", "1"}),
       {"SUBLET_ALLOC_CONF: bad value '1.5' for garbage_collection_threshold: expected a number strictly between 0 "
        "and 1, e.g. 0.6"},
       {{"SUBLET_ALLOC_CONF", "garbage_collection_threshold:1.5"}}},
      {"AllocConfDivisionsNotAPowerOfTwo", kProfile,
       {"SUBLET_ALLOC_CONF: bad value '3' for roundup_power2_divisions: expected a power of two"},
       {{"SUBLET_ALLOC_CONF", "roundup_power2_divisions:3"}}},
      {"AllocConfUnbalancedBrackets", kBenchStep,
       {"SUBLET_ALLOC_CONF: unbalanced brackets in 'roundup_power2_divisions:[256:1'"},
       {{"SUBLET_ALLOC_CONF", "roundup_power2_divisions:[256:1"}}},

      // sublet profile.
      {"ProfileUnknownModel", with(kProfile, {"--model", "resnet99"}),
       {"--model: resnet99 not in {resnet20,resnet32,resnet56,resnet18,resnet34,resnet50,gpt-nano,gpt-mini,gpt2-small}"}},
      {"ProfileUnknownDevice", {"profile", "--device", "gpu"},
       {"--device: unknown value 'gpu'; expected auto, cpu, cuda or cuda:N"}},
      {"ProfileMalformedDevice", {"profile", "--device", "cuda:x"},
       {"--device: unknown value 'cuda:x'; expected auto, cpu, cuda or cuda:N"}},
      {"ProfileCudaWithoutGpu", {"profile", "--device", "cuda"}, {"--device cuda: ", "use --device cpu"}, {}, {}, true},
      {"ProfileInputTwoDims", {"profile", "--device", "cpu", "--input", "3x32"},
       {"--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x32\""}},
      {"ProfileInputTrailingX", {"profile", "--device", "cpu", "--input", "3x32x32x"},
       {"--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x32x32x\""}},
      {"ProfileInputZero", {"profile", "--device", "cpu", "--input", "0x32x32"},
       {"--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"0x32x32\""}},
      {"ProfileInputTooLarge", {"profile", "--device", "cpu", "--input", "3x4294967296x32"},
       {"--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x4294967296x32\" (4294967296 is above 2147483647)"}},
      {"ProfileZeroBatch", {"profile", "--batch-size", "0"}, {"--batch-size: Value 0 not in range 1 to 1048576"}},
      {"ProfileZeroSteps", {"profile", "--steps", "0"}, {"--steps: Value 0 not in range 1 to 1000"}},
      {"ProfileUnknownOptimizer", {"profile", "--optimizer", "adamw"}, {"--optimizer: adamw not in {sgd,adam}"}},
      {"ProfileNegativeLearningRate", with(kProfile, {"--lr", "-1"}), {"--lr must be in (0, 100], got -1"}},
      {"ProfileOutIsAFile", with(kProfile, {"--out", "notes.txt"}), {"--out notes.txt: expected a folder, found a file"},
       {}, text_file("notes.txt", "a file\n")},
      // A file the profile will write is a folder: refused before the run, not after it.
      {"ProfileOutputFileIsAFolder", with(kProfile, {"--out", "out"}),
       {"--out out/summary.txt: expected a file name, found a folder"}, {}, folder("out/summary.txt")},
      {"ProfileOutUnwritable", with(kProfile, {"--out", "/proc/profile_out"}),
       {"--out /proc/profile_out: cannot create the folder ("}},
      {"ProfileBadAllocConf", with(kProfile, {"--alloc-conf", "expandable:True"}),
       {"--alloc-conf: unknown option 'expandable' (value 'True')"}},

      // sublet replay.
      {"ReplayNoTrace", {"replay"}, {"trace is required"}},
      {"ReplayMissingTrace", {"replay", "absent.json"}, {"trace: File does not exist: absent.json"}},
      {"ReplayTraceIsAFolder", {"replay", "out"}, {"trace: File is actually a directory: out"}, {}, folder("out")},
      {"ReplayTraceNotJson", {"replay", "notes.txt"}, {"notes.txt: not valid JSON ("}, {},
       text_file("notes.txt", "hello\n")},
      {"ReplayTraceOfAnotherFormat", {"replay", "other.json"}, {"other.json: expected \"format\": \"sublet-alloc-trace\""},
       {}, text_file("other.json", R"({"format": "chrome-trace", "events": []})")},
      {"ReplayTraceWithABadEvent", {"replay", "bad.json"},
       {"bad.json: event 0: free of id 5 that is not allocated"}, {},
       text_file("bad.json", R"({"format": "sublet-alloc-trace", "events": [{"action": "free", "id": 5}]})")},
      {"PlanMissingTrace", {"plan", "absent.json"}, {"trace: File does not exist: absent.json"}},
      {"PlanTraceWithABadEvent", {"plan", "bad.json"}, {"bad.json: event 0: free of id 5 that is not allocated"}, {},
       text_file("bad.json", R"({"format": "sublet-alloc-trace", "events": [{"action": "free", "id": 5}]})")},
      {"PlanJsonIntoAFolder", {"plan", "trace.json", "--json", "out"}, {"--json out: expected a file name, found a folder"},
       {}, [](const fs::path& dir) {
         write_text(dir / "trace.json", R"({"format": "sublet-alloc-trace", "events": []})");
         fs::create_directories(dir / "out");
       }},
      {"ReplayBadAllocConf", {"replay", "trace.json", "--alloc-conf", "max_split_size_mb:abc"},
       {"--alloc-conf: bad value 'abc' for max_split_size_mb"}, {}, text_file("trace.json", kAllocTrace)},
      {"ReplaySnapshotDeviceOfATrace", {"replay", "trace.json", "--device", "cuda:1"},
       {"--device 1: picks a device of a PyTorch snapshot, but trace.json is a sublet-alloc-trace"}, {},
       text_file("trace.json", kAllocTrace)},
      {"ReplayMalformedSnapshotDevice", {"replay", "trace.json", "--device", "cuda:x"},
       {"--device: expected a device of the snapshot as N or cuda:N, got 'cuda:x'"}, {}, text_file("trace.json", kAllocTrace)},
      {"PlanNegativeSnapshotDevice", {"plan", "trace.json", "--device", "-1"},
       {"--device: expected a device of the snapshot as N or cuda:N, got '-1'"}, {}, text_file("trace.json", kAllocTrace)},
      {"ReplayZeroCapacity", {"replay", "trace.json", "--capacity-mib", "0"},
       {"--capacity-mib: Value 0 not in range 1 to 1073741824"}, {}, text_file("trace.json", kAllocTrace)},

      // sublet bench alloc.
      {"BenchAllocUnknownDevice", {"bench", "alloc", "--device", "gpu"},
       {"--device: unknown value 'gpu'; expected auto, cpu, cuda or sim"}},
      {"BenchAllocIndexedDevice", {"bench", "alloc", "--device", "cuda:1"},
       {"--device: unknown value 'cuda:1'; expected auto, cpu, cuda or sim"}},
      {"BenchAllocCudaWithoutGpu", {"bench", "alloc", "--device", "cuda", "--quick"}, {"bench alloc --device cuda: "},
       {}, {}, true},
      {"BenchAllocZeroRepetitions", {"bench", "alloc", "--repetitions", "0"},
       {"--repetitions: Value 0 not in range 1 to 10000000"}},
      {"BenchAllocZeroRounds", {"bench", "alloc", "--rounds", "0"}, {"--rounds: Value 0 not in range 1 to 1000"}},
      {"BenchAllocJsonIsAFolder", {"bench", "alloc", "--device", "sim", "--quick", "--json", "out"},
       {"--json out: expected a file name, found a folder"}, {}, folder("out")},
      {"BenchAllocSvgFolderMissing", {"bench", "alloc", "--device", "sim", "--quick", "--svg", "no/plot.svg"},
       {"--svg no/plot.svg: the directory ", "/no does not exist"}},
      {"BenchAllocHistoryMissing", {"bench", "alloc", "--history", "absent.json"},
       {"--history: File does not exist: absent.json"}},
      {"BenchAllocHistoryNotJson", {"bench", "alloc", "--device", "sim", "--quick", "--history", "notes.txt"},
       {"notes.txt: not valid JSON ("}, {}, text_file("notes.txt", "hello\n")},
      {"BenchAllocNegativeSeed", {"bench", "alloc", "--seed", "-7"},
       {"--seed", "expected a non-negative integer, got '-7'"}},
      {"BenchAllocTorchPluginMissing", {"bench", "alloc", "--device", "cpu", "--quick", "--torch-plugin", "absent.so"},
       {"torch plugin absent.so: no such file (build it with scripts/build_torch_plugin.sh absent.so)"}},
      {"BenchAllocTorchPluginNotALibrary", {"bench", "alloc", "--device", "cpu", "--quick", "--torch-plugin", "notes.so"},
       {"torch plugin notes.so: cannot load it: ", "/notes.so: invalid ELF header"}, {},
       text_file("notes.so", "a text file with a .so name, longer than the 64 bytes of an ELF header\n")},
      {"BenchAllocTorchPluginOnSim", {"bench", "alloc", "--device", "sim", "--quick", "--torch-plugin", "absent.so"},
       {"bench alloc --device sim: torch plugin absent.so has no simulated device (PyTorch's allocators need real "
        "memory); use --device cpu or cuda"}},
      {"BenchAllocTorchPluginWithoutCuda",
       {"bench", "alloc", "--device", "cuda", "--quick", "--torch-plugin", SUBLET_TEST_FAKE_TORCH_PLUGIN},
       {"torch plugin ", " was built without CUDA (its PyTorch 0.0.0-fake has none), so it has no torch column for cuda:0"}},

      // sublet bench step.
      {"BenchStepNoModel", {"bench", "step"}, {"--model is required"}},
      {"BenchStepAllocTraceOfSeveralRuns",
       {"bench", "step", "--model", "resnet20,resnet32", "--alloc-trace", "trace.json"},
       {"bench step --alloc-trace: records one run, so give one --model and one --allocator; got 2 model(s) and 1 allocator(s)"}},
      {"BenchStepAllocTraceIsAFolder", {"bench", "step", "--model", "resnet20", "--alloc-trace", "out"},
       {"--alloc-trace out: expected a file name, found a folder"}, {}, folder("out")},
      {"BenchStepUnknownModel", {"bench", "step", "--model", "vgg16"},
       {"--model: vgg16 not in {resnet20,resnet32,resnet56,resnet18,resnet34,resnet50,gpt-nano,gpt-mini,gpt2-small}"}},
      {"BenchStepMalformedInput", {"bench", "step", "--model", "resnet20", "--input", "3x32"},
       {"--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x32\""}},
      {"BenchStepNegativeInput", {"bench", "step", "--model", "resnet20", "--input", "3x-32x32"},
       {"--input: expected CxHxW with positive integers, e.g. 3x32x32; found \"3x-32x32\""}},
      {"BenchStepNegativeBatch", {"bench", "step", "--model", "resnet20", "--batch-size", "-4"},
       {"--batch-size: Value -4 not in range 1 to 1048576"}},
      {"BenchStepZeroClasses", {"bench", "step", "--model", "resnet20", "--classes", "0"},
       {"--classes: Value 0 not in range 1 to 1048576"}},
      {"BenchStepUnknownAllocator", {"bench", "step", "--model", "resnet20", "--allocator", "pool"},
       {"--allocator: pool not in {caching,raw,async,all}"}},
      {"BenchStepAsyncAllocatorOnCpu", with(kBenchStep, {"--device", "cpu", "--allocator", "async"}),
       {"the async allocator (cudaMallocAsync) needs a CUDA device"}},
      {"BenchStepCudaGraphOnCpu", with(kBenchStep, {"--device", "cpu", "--cuda-graph"}),
       {"bench step --cuda-graph: needs --device cuda (CUDA graphs exist only on the GPU), this run is on cpu"}},
      {"BenchStepGptCudaGraphOnCpu",
       {"bench", "step", "--model", "gpt-nano", "--seq-len", "16", "--device", "cpu", "--cuda-graph"},
       {"bench step --cuda-graph: needs --device cuda (CUDA graphs exist only on the GPU), this run is on cpu"}},
      {"BenchStepGptCudaGraphWithShapes",
       {"bench", "step", "--model", "gpt-nano", "--device", "cpu", "--cuda-graph", "--seq-len-range", "8:64",
        "--tokens-per-batch", "128"},
       {"bench step --cuda-graph: a CUDA graph replays one step of fixed shapes, and --seq-len-range, --resolutions "
        "or --shape-schedule give every step its own"}},
      {"BenchStepUnknownDevice", with(kBenchStep, {"--device", "gpu"}),
       {"--device: unknown value 'gpu'; expected auto, cpu, cuda or cuda:N"}},
      {"BenchStepCudaWithoutGpu", with(kBenchStep, {"--device", "cuda"}), {"--device cuda: ", "use --device cpu"}, {}, {}, true},
      {"BenchStepIndexedCudaWithoutGpu", with(kBenchStep, {"--device", "cuda:1"}), {"--device cuda:1: ", "use --device cpu"},
       {}, {}, true},
      {"BenchStepJsonUnwritable", with(kBenchStep, {"--device", "cpu", "--json", "/proc/step.json"}),
       {"--json /proc/step.json: cannot create files in /proc ("}},

      // sublet generate: --device is checked while the command line is read, before the checkpoint.
      {"GenerateUnknownDevice", {"generate", "--checkpoint", "absent.safetensors", "--prompt", "hi", "--device", "gpu"},
       {"--device: unknown value 'gpu'; expected auto, cpu, cuda or cuda:N"}},

      // sublet demo release.
      {"DemoUnknownDevice", with(kDemo, {"--device", "gpu"}),
       {"--device: unknown value 'gpu'; expected auto, cpu, cuda or cuda:N"}},
      {"DemoZeroSize", with(kDemo, {"--size-mb", "0"}), {"--size-mb: Value 0 not in range 1 to 1048576"}},
      {"DemoCudaWithoutGpu", with(kDemo, {"--device", "cuda"}), {"--device cuda: ", "use --device cpu"}, {}, {}, true},
      // The allocator's out-of-memory message: 1 TiB of host memory is more than the machine has.
      {"DemoOutOfMemory", with(kDemo, {"--device", "cpu", "--size-mb", "1048576"}),
       {"cpu out of memory. Tried to allocate 1.00 TiB. The device has a total capacity of ",
        "Of the memory sublet holds, 0 B is allocated by tensors and 0 B is reserved but unallocated",
        "Reduce the batch size or the model, or release tensors you no longer need; memory_summary() shows where the "
        "memory is."}},
  };
  return cases;
}

class CliErrors : public ::testing::TestWithParam<Case> {};

TEST_P(CliErrors, OneClearMessageAndANonZeroExit) {
  const Case& c = GetParam();
  if (c.needs_no_cuda && memory::cuda_available())
    GTEST_SKIP() << "a CUDA device is present: this case checks the message without one";
  cli_test::ScratchDir scratch("sublet-cli-test");
  if (c.prepare) {
    c.prepare(scratch.path());
    if (::testing::Test::HasFatalFailure()) return;
  }
  const Outcome o = run_sublet(c.args, c.env, scratch.path());
  std::string command = "sublet";
  for (const auto& a : c.args) command += " " + a;
  const std::string shown = command + "\n--- stdout:\n" + o.out + "--- stderr:\n" + o.err;

  ASSERT_TRUE(o.exited) << "killed by signal " << o.signal << " (" << strsignal(o.signal) << "): " << shown;
  EXPECT_NE(o.exit_code, 0) << shown;
  EXPECT_NE(o.exit_code, 126) << "could not start the binary: " << shown;
  EXPECT_NE(o.exit_code, 127) << "could not start the binary: " << shown;
  for (const char* crash : {"terminate called", "internal error", "Aborted", "core dumped", "what():", "Segmentation"}) {
    EXPECT_EQ(o.err.find(crash), std::string::npos) << "'" << crash << "' in: " << shown;
    EXPECT_EQ(o.out.find(crash), std::string::npos) << "'" << crash << "' in: " << shown;
  }

  // The message: the last line of stderr (CLI11 adds its "Run with --help" hint after it), once.
  std::vector<std::string> lines = non_empty_lines(o.err);
  if (!lines.empty() && lines.back() == "Run with --help for more information.") lines.pop_back();
  ASSERT_FALSE(lines.empty()) << "no message on stderr: " << shown;
  const std::string& message = lines.back();
  std::cout << "  " << command << "\n  -> " << message << "\n";  // the texts the README's table quotes
  for (const std::string& part : c.expected) {
    EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in the message: " << shown;
    EXPECT_EQ(count_of(o.err, part), 1u) << "'" << part << "' not exactly once on stderr: " << shown;
    EXPECT_EQ(o.out.find(part), std::string::npos) << "the message belongs on stderr, not stdout: " << shown;
  }
  EXPECT_EQ(std::set<std::string>(lines.begin(), lines.end()).size(), lines.size()) << "repeated lines: " << shown;
  std::size_t error_lines = 0;
  for (const auto& line : lines) error_lines += line.starts_with("error:") ? 1 : 0;
  EXPECT_LE(error_lines, 1u) << shown;
  // sublet's own errors say "error: " first; CLI11's parse errors come without it.
  if (o.exit_code == 1) {
    EXPECT_TRUE(message.starts_with("error: ")) << shown;
  }
}

INSTANTIATE_TEST_SUITE_P(Sublet, CliErrors, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(CliErrorCases, NamesAreUnique) {
  std::set<std::string> names;
  for (const Case& c : all_cases()) EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

}  // namespace
}  // namespace sublet
