#pragma once
// Which allocators a run compares, per device. The first entry is always sublet's caching
// allocator with PyTorch's default knobs (fixed segments): the baseline every ratio is taken against.
//   cuda: sublet, sublet-expandable, cudaMalloc, cudaMallocAsync, torch (with a torch plugin)
//   cpu:  sublet, sublet-expandable (HostBackend), malloc, torch (with a torch plugin: c10's CPU allocator)
//   sim:  sublet, sublet-expandable (SimulatedBackend), simulated-uncached
// The torch column comes from a plugin built against an installed PyTorch (torch_plugin.h),
// loaded at run time: sublet itself never links LibTorch.
// Each entry also says how its column makes tensors for the tensor rows (sublet_tensors.h,
// torch_tensors.h); the simulated device has no tensors, so its entries make none.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/alloc/allocator_under_test.h"
#include "bench/alloc/tensor_workload.h"
#include "bench/alloc/torch_plugin_loader.h"

namespace sublet::bench {

enum class BenchDevice { Cuda, Cpu, Sim };

// "cuda", "cpu", "sim"; throws ValueError naming the text and the choices otherwise.
BenchDevice parse_bench_device(const std::string& text);
std::string bench_device_name(BenchDevice device);

struct AllocatorEntry {
  std::string name;         // short column name: "sublet", "cudaMalloc", ...
  std::string description;  // one line for the JSON and the table's legend
  std::function<std::unique_ptr<AllocatorUnderTest>()> make;  // a fresh instance per row
  // The column's tensors over the same kind of allocator, fresh per tensor row; empty where the
  // device has no tensors (sim).
  std::function<std::unique_ptr<TensorFactoryUnderTest>()> make_tensors;
  std::string tensor_description;  // what the tensor rows run in this column
};

// Capacity of the simulated device: an H200's memory, so sizes mean what they mean there.
inline constexpr std::size_t kSimulatedCapacity = std::size_t{141} << 30;

// With `torch`, the last column is "torch", served by that plugin. Throws DeviceError for cuda
// when CUDA is not built in or no device is present, or when `torch` was built without CUDA;
// ValueError for sim with `torch` (PyTorch has no simulated device).
std::vector<AllocatorEntry> allocators_for(BenchDevice device, const TorchPlugin* torch = nullptr);

}  // namespace sublet::bench
