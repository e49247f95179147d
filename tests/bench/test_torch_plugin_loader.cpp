// The torch plugin loader (bench/alloc/torch_plugin_loader.h) against small real shared objects
// built next to this test (plugins/fake_torch_plugin.cpp): every way a load can fail says which
// file and what was expected and found; a good plugin adds exactly one "torch" column, served
// by the plugin's objects; without one there is no torch column.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "bench/alloc/alloc_bench.h"
#include "bench/alloc/allocator_set.h"
#include "bench/alloc/torch_plugin_loader.h"
#include "core/errors.h"
#include "scratch_file.h"
#include "tests/throw_message.h"

namespace sublet::bench {
namespace {

using sublet::testing::message_of;

void expect_contains(const std::string& text, const std::vector<std::string>& parts) {
  for (const std::string& part : parts) EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

std::vector<std::string> names_of(const std::vector<AllocatorEntry>& entries) {
  std::vector<std::string> names;
  for (const AllocatorEntry& e : entries) names.push_back(e.name);
  return names;
}

TEST(TorchPluginLoader, AMissingFileNamesThePathAndHowToBuildIt) {
  const std::string path = "/nonexistent/libsublet_torch_bench.so";
  const std::string message = message_of<IoError>([&] { TorchPlugin::load(path); });
  expect_contains(message, {"torch plugin " + path + ": no such file", "scripts/build_torch_plugin.sh " + path});
}

TEST(TorchPluginLoader, AFolderIsNotAPlugin) {
  const std::string path = std::filesystem::temp_directory_path().string();
  expect_contains(message_of<IoError>([&] { TorchPlugin::load(path); }),
                  {"torch plugin " + path + ": expected a shared object, found a folder"});
}

TEST(TorchPluginLoader, AFileThatIsNoSharedObjectGivesDlopensReason) {
  sublet::testing::ScratchFile file("this is text, not ELF\n", ".so");
  const std::string message = message_of<Error>([&] { TorchPlugin::load(file.path()); });
  // dlerror() names the file and says why: glibc's "invalid ELF header" or "file too short".
  expect_contains(message, {"torch plugin " + file.path() + ": cannot load it: ", file.path() + ": "});
  EXPECT_TRUE(message.find("invalid ELF header") != std::string::npos || message.find("too short") != std::string::npos)
      << message;
}

TEST(TorchPluginLoader, ASharedObjectWithoutTheEntryPointSaysWhichSymbolIsMissing) {
  const std::string message = message_of<Error>([] { TorchPlugin::load(SUBLET_TEST_PLUGIN_WITHOUT_ENTRY); });
  expect_contains(message, {std::string("torch plugin ") + SUBLET_TEST_PLUGIN_WITHOUT_ENTRY +
                                ": expected the entry point sublet_torch_bench_plugin(), found no such symbol",
                            "undefined symbol: sublet_torch_bench_plugin"});
}

TEST(TorchPluginLoader, AnotherAbiVersionSaysExpectedAndFound) {
  const std::string message = message_of<Error>([] { TorchPlugin::load(SUBLET_TEST_PLUGIN_WRONG_ABI); });
  expect_contains(message, {std::string("torch plugin ") + SUBLET_TEST_PLUGIN_WRONG_ABI +
                                ": expected plugin ABI version " + std::to_string(kTorchPluginAbiVersion) + ", found 999",
                            "rebuild it"});
  // A failed load is not remembered as a success.
  EXPECT_THROW(TorchPlugin::load(SUBLET_TEST_PLUGIN_WRONG_ABI), Error);
}

TEST(TorchPluginLoader, AGoodPluginLoadsOnceAndServesTheTorchColumn) {
  const TorchPlugin& plugin = TorchPlugin::load(SUBLET_TEST_FAKE_TORCH_PLUGIN);
  EXPECT_EQ(&TorchPlugin::load(SUBLET_TEST_FAKE_TORCH_PLUGIN), &plugin) << "loaded once per file";
  EXPECT_EQ(plugin.path(), SUBLET_TEST_FAKE_TORCH_PLUGIN);
  EXPECT_EQ(plugin.torch_version(), "0.0.0-fake");
  EXPECT_FALSE(plugin.has_cuda());

  const std::vector<AllocatorEntry> entries = allocators_for(BenchDevice::Cpu, &plugin);
  EXPECT_EQ(names_of(entries), (std::vector<std::string>{"sublet", "sublet-expandable", "malloc", "torch"}));
  const AllocatorEntry& torch = entries.back();
  EXPECT_EQ(torch.description, "fake torch 0.0.0-fake (test plugin): malloc/free");
  EXPECT_EQ(torch.tensor_description, "fake torch 0.0.0-fake (test plugin): a heap header and malloc/free per tensor");

  // The objects come from the plugin and go back through their virtual destructors.
  std::unique_ptr<AllocatorUnderTest> allocator = torch.make();
  void* p = allocator->allocate(4096);
  ASSERT_NE(p, nullptr);
  allocator->free(p);
  EXPECT_EQ(allocator->driver_allocation_calls(), 1u);
  EXPECT_EQ(allocator->peak_reserved_bytes(), std::nullopt);
  std::unique_ptr<TensorFactoryUnderTest> tensors = torch.make_tensors();
  tensors->create_destroy(TensorShape{{16, 4}, 2}, 3);
  tensors->allocate_free(1024, 2);
  EXPECT_EQ(tensors->driver_allocation_calls(), 5u);
}

TEST(TorchPluginLoader, NoPluginMeansNoTorchColumn) {
  EXPECT_EQ(names_of(allocators_for(BenchDevice::Cpu)), (std::vector<std::string>{"sublet", "sublet-expandable", "malloc"}));
  EXPECT_EQ(names_of(allocators_for(BenchDevice::Sim)),
            (std::vector<std::string>{"sublet", "sublet-expandable", "simulated-uncached"}));
  const AllocBenchResult result = run_alloc_bench(AllocBenchOptions::quick_options(BenchDevice::Cpu));
  for (const AllocatorInfo& a : result.allocators) EXPECT_NE(a.name, "torch");
}

TEST(TorchPluginLoader, APluginWithoutCudaRefusesTheCudaDeviceOnAnyMachine) {
  const TorchPlugin& plugin = TorchPlugin::load(SUBLET_TEST_FAKE_TORCH_PLUGIN);
  expect_contains(message_of<DeviceError>([&] { allocators_for(BenchDevice::Cuda, &plugin); }),
                  {std::string("torch plugin ") + SUBLET_TEST_FAKE_TORCH_PLUGIN +
                       " was built without CUDA (its PyTorch 0.0.0-fake has none), so it has no torch column for cuda:0",
                   "scripts/build_torch_plugin.sh"});
}

TEST(TorchPluginLoader, TheSimulatedDeviceHasNoTorchColumn) {
  const TorchPlugin& plugin = TorchPlugin::load(SUBLET_TEST_FAKE_TORCH_PLUGIN);
  expect_contains(message_of<ValueError>([&] { allocators_for(BenchDevice::Sim, &plugin); }),
                  {"bench alloc --device sim: torch plugin ", "has no simulated device"});
  AllocBenchOptions options = AllocBenchOptions::quick_options(BenchDevice::Sim);
  options.torch_plugin_path = "/nonexistent/plugin.so";
  // Refused before the plugin is even looked for.
  expect_contains(message_of<ValueError>([&] { run_alloc_bench(options); }), {"bench alloc --device sim: "});
}

}  // namespace
}  // namespace sublet::bench
