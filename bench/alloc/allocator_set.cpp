#include "bench/alloc/allocator_set.h"

#include <optional>

#include "bench/alloc/caching_allocators.h"
#include "bench/alloc/malloc_allocator.h"
#include "bench/alloc/sublet_tensors.h"
#include "core/errors.h"
#include "memory/host_backend.h"
#include "memory/registry.h"
#include "memory/simulated_backend.h"
#ifdef SUBLET_HAVE_CUDA
#include "bench/alloc/cuda_allocators.h"
#include "memory/cuda_backend.h"
#endif

namespace sublet::bench {
namespace {

memory::AllocatorConfig expandable_config() {
  memory::AllocatorConfig config;
  config.expandable_segments = true;
  return config;
}

// Tensor::empty over a fresh registry allocator of `kind` on `device`.
std::function<std::unique_ptr<TensorFactoryUnderTest>()> sublet_tensors(Device device, memory::AllocatorKind kind,
                                                                         memory::AllocatorConfig config = {}) {
  return [device, kind, config] { return std::make_unique<SubletTensorFactory>(device, kind, config); };
}

// Both sublet variants over fresh backends made by `make_backend`; with `tensor_device`, their
// tensor rows run Tensor::empty there over the same allocator configuration.
template <typename MakeBackend>
void add_sublet_variants(std::vector<AllocatorEntry>& entries, const std::string& backend_name, MakeBackend make_backend,
                         std::optional<Device> tensor_device) {
  const auto add = [&](const std::string& name, const std::string& knobs, const memory::AllocatorConfig& config) {
    AllocatorEntry entry{name, "sublet CachingAllocator, " + knobs + ", over " + backend_name,
                         [make_backend, config] { return std::make_unique<CachingAllocatorUnderTest>(make_backend(), config); },
                         {}, {}};
    if (tensor_device) {
      entry.make_tensors = sublet_tensors(*tensor_device, memory::AllocatorKind::Caching, config);
      entry.tensor_description = "sublet::Tensor::empty on " + tensor_device->str() + ", caching allocator, " + knobs;
    }
    entries.push_back(std::move(entry));
  };
  // Both layouts, whatever the device's default (memory::default_config: expandable).
  add("sublet", "fixed segments (PyTorch's default knobs)", memory::AllocatorConfig{});
  add("sublet-expandable", "expandable_segments:True (sublet's default)", expandable_config());
}

// PyTorch's allocator and at::empty on `device`, from the plugin (which stays loaded for good).
AllocatorEntry torch_entry(const TorchPlugin& torch, Device device) {
  return {"torch", torch.allocator_description(device), [plugin = &torch, device] { return plugin->make_allocator(device); },
          [plugin = &torch, device] { return plugin->make_tensors(device); }, torch.tensor_description(device)};
}

}  // namespace

BenchDevice parse_bench_device(const std::string& text) {
  if (text == "cuda") return BenchDevice::Cuda;
  if (text == "cpu") return BenchDevice::Cpu;
  if (text == "sim") return BenchDevice::Sim;
  throw ValueError("bench alloc: unknown device '" + text + "', expected cuda, cpu or sim");
}

std::string bench_device_name(BenchDevice device) {
  switch (device) {
    case BenchDevice::Cuda: return "cuda";
    case BenchDevice::Cpu: return "cpu";
    case BenchDevice::Sim: return "sim";
  }
  return "?";
}

std::vector<AllocatorEntry> allocators_for(BenchDevice device, const TorchPlugin* torch) {
  std::vector<AllocatorEntry> entries;
  switch (device) {
    case BenchDevice::Cpu:
      add_sublet_variants(entries, "HostBackend", [] { return std::make_unique<memory::HostBackend>(); }, Device::cpu());
      entries.push_back({"malloc", "glibc malloc/free", [] { return std::make_unique<MallocUnderTest>(); },
                         sublet_tensors(Device::cpu(), memory::AllocatorKind::Raw),
                         "sublet::Tensor::empty on cpu, raw allocator (caching off: aligned_alloc/free per tensor)"});
      if (torch) entries.push_back(torch_entry(*torch, Device::cpu()));
      break;
    case BenchDevice::Sim: {
      if (torch)
        throw ValueError("bench alloc --device sim: torch plugin " + torch->path() +
                         " has no simulated device (PyTorch's allocators need real memory); use --device cpu or cuda");
      const auto make_sim = [] { return std::make_unique<memory::SimulatedBackend>(kSimulatedCapacity); };
      add_sublet_variants(entries, "SimulatedBackend (141 GiB)", make_sim, std::nullopt);
      entries.push_back({"simulated-uncached", "SimulatedBackend (141 GiB) with no cache: every request goes to the backend",
                         [make_sim] { return std::make_unique<UncachedBackendUnderTest>(make_sim()); }, {}, {}});
      break;
    }
    case BenchDevice::Cuda: {
      // Before the device check: a plugin without CUDA is wrong on every machine.
      if (torch) torch->check_device(Device::cuda(0));
      if (!memory::cuda_available())
        throw DeviceError(std::string("bench alloc --device cuda: ") +
                          (memory::cuda_built() ? "no usable CUDA device or driver" : "this build has no CUDA support") +
                          "; use --device cpu or --device sim");
#ifdef SUBLET_HAVE_CUDA
      add_sublet_variants(entries, "CudaBackend (cuda:0)", [] { return std::make_unique<memory::CudaBackend>(0); },
                          Device::cuda(0));
      entries.push_back({"cudaMalloc", "raw cudaMalloc/cudaFree on cuda:0",
                         [] { return std::make_unique<CudaMallocUnderTest>(0); },
                         sublet_tensors(Device::cuda(0), memory::AllocatorKind::Raw),
                         "sublet::Tensor::empty on cuda:0, raw allocator (caching off: cudaMalloc/cudaFree per tensor)"});
      entries.push_back({"cudaMallocAsync",
                         "cudaMallocAsync/cudaFreeAsync on cuda:0's default pool, legacy default stream, "
                         "release threshold UINT64_MAX",
                         [] { return std::make_unique<CudaMallocAsyncUnderTest>(0); },
                         sublet_tensors(Device::cuda(0), memory::AllocatorKind::Async),
                         "sublet::Tensor::empty on cuda:0, async allocator (cudaMallocAsync/cudaFreeAsync per tensor)"});
      if (torch) entries.push_back(torch_entry(*torch, Device::cuda(0)));
#endif
      break;
    }
  }
  return entries;
}

}  // namespace sublet::bench
