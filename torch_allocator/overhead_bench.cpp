// What the C interface PyTorch calls costs on top of sublet's caching allocator, per
// malloc/free pair, measured in one run on simulated devices (no GPU, no driver calls):
//   build/torch_allocator/torch_allocator_overhead [--pairs N] [--json PATH]
// Rows: a pair at one size repeated (the cache-hit path), and a mixed pattern of 64 live
// blocks of ResNet-like sizes (512 B to 24 MiB) freed out of order. Columns: sublet's
// CachingAllocator called directly, then sublet_torch_malloc/sublet_torch_free (device table,
// pointer-to-block map, its lock). PyTorch's own CUDAPluggableAllocator wrapper adds its own map
// on top of the latter; that part needs PyTorch and a GPU (bench/torch_allocator_compare.py).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "memory/caching_allocator.h"
#include "memory/simulated_backend.h"
#include "torch_allocator/sublet_torch_allocator.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kCapacity = std::size_t{141} << 30;

struct Pattern {
  std::string name;
  std::vector<std::size_t> sizes;  // allocation i has sizes[i % sizes.size()]
  std::size_t live = 1;            // blocks alive at once
};

// Runs `pairs` allocate/free pairs of the pattern and returns ns per pair (median of 5 rounds).
template <typename Alloc, typename Free>
double ns_per_pair(const Pattern& p, std::size_t pairs, Alloc&& alloc, Free&& free) {
  std::vector<double> rounds;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 5; ++round) {
    std::vector<void*> live(p.live, nullptr);
    for (std::size_t i = 0; i < p.live; ++i) live[i] = alloc(p.sizes[i % p.sizes.size()]);
    const auto start = Clock::now();
    for (std::size_t i = 0; i < pairs; ++i) {
      const std::size_t slot = p.live == 1 ? 0 : rng() % p.live;  // out of order
      free(live[slot]);
      live[slot] = alloc(p.sizes[i % p.sizes.size()]);
    }
    rounds.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(pairs));
    for (void* ptr : live) free(ptr);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t pairs = 200000;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--pairs") && i + 1 < argc) {
      pairs = std::stoull(argv[++i]);
    } else if (!std::strcmp(argv[i], "--json") && i + 1 < argc) {
      json_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--pairs N] [--json PATH]\n", argv[0]);
      return 2;
    }
  }
  if (sublet_torch_use_simulated_devices(1, kCapacity) != 0) {
    char message[512];
    sublet_torch_last_error(message, sizeof message);
    std::fprintf(stderr, "error: %s\n", message);
    return 1;
  }
  const std::vector<Pattern> patterns = {
      {"one 4 KiB block, repeated", {4096}, 1},
      {"one 8 MiB block, repeated", {8u << 20}, 1},
      {"64 live blocks, 512 B..24 MiB, freed out of order",
       {512, 4096, 65536, 802816, 3211264, 12845056, 25690112, 1024, 401408, 6422528}, 64}};
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%-52s %14s %16s %12s\n", "pattern", "sublet ns/pair", "C API ns/pair", "C API extra");
  for (const Pattern& p : patterns) {
    sublet::memory::CachingAllocator direct(std::make_unique<sublet::memory::SimulatedBackend>(kCapacity));
    const double sublet_ns = ns_per_pair(
        p, pairs, [&](std::size_t bytes) { return static_cast<void*>(direct.allocate(bytes)); },
        [&](void* block) { direct.free(static_cast<sublet::memory::Block*>(block)); });
    const double c_api_ns = ns_per_pair(
        p, pairs, [](std::size_t bytes) { return sublet_torch_malloc(static_cast<ssize_t>(bytes), 0, nullptr); },
        [](void* ptr) { sublet_torch_free(ptr, 0, 0, nullptr); });
    sublet_torch_empty_cache(0);
    std::printf("%-52s %14.1f %16.1f %+11.1f\n", p.name.c_str(), sublet_ns, c_api_ns, c_api_ns - sublet_ns);
    rows.push_back({{"pattern", p.name}, {"sublet_ns_per_pair", sublet_ns}, {"c_api_ns_per_pair", c_api_ns}});
  }
  if (!json_path.empty()) {
    std::ofstream(json_path) << nlohmann::json{{"format", "sublet-torch-allocator-overhead"}, {"pairs", pairs}, {"rows", rows}}.dump(2)
                             << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  return 0;
}
