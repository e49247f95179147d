#pragma once
// One caching allocator per device, created on first use, and the torch.cuda-style free
// functions over them. The allocators read SUBLET_ALLOC_CONF once, when first created.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "memory/caching_allocator.h"
#include "core/device.h"

namespace sublet::memory {

// The allocator of `device` (HostBackend for the CPU, CudaBackend for CUDA devices).
// Throws DeviceError for a CUDA device when CUDA is not built in or the device does not exist.
CachingAllocator& allocator_for(Device device);

// Swaps the allocator of `device` (to compare allocator strategies in one process: the
// benchmark's raw and async modes). Throws Error while the current one has live allocations.
// The old allocator's cache is released (empty_cache) and the allocator is retired, not
// destroyed: a reference obtained from allocator_for() before the swap stays valid (its
// statistics can still be read), but new allocations should come from allocator_for() again.
void replace_allocator(Device device, std::unique_ptr<CachingAllocator> allocator);

// The three strategies sublet bench compares: sublet's cache, no cache (cudaMalloc/cudaFree per
// tensor), and the driver's cudaMallocAsync pool. Host and simulated devices support "caching"
// and "raw".
enum class AllocatorKind { Caching, Raw, Async };
AllocatorKind parse_allocator_kind(const std::string& text);  // ValueError for anything else
const char* allocator_kind_name(AllocatorKind kind);
// Without a config: SUBLET_ALLOC_CONF on top of default_config(device).
std::unique_ptr<CachingAllocator> make_allocator(Device device, AllocatorKind kind,
                                                 std::optional<AllocatorConfig> config = std::nullopt);

// A device's knobs before SUBLET_ALLOC_CONF: PyTorch's defaults, with one difference: expandable
// segments, on the CPU (host memory) as on CUDA (expandable_segments:False restores PyTorch's
// fixed segments). One growing segment per stream leaves no segment-sized holes when the sizes
// change from step to step (docs/variable-shapes.md has the measured sweeps); on fixed shapes it
// reserves a little less at the same step time. The CPU keeps fixed segments in a process whose
// address space is limited (host_address_space_allows_expandable).
AllocatorConfig default_config(Device device);

bool cuda_built();          // the CUDA backend is compiled in
int cuda_device_count();    // 0 when not built or no usable device/driver
bool cuda_available();
// cuda:0 when a GPU is present, else the CPU.
Device default_device();

}  // namespace sublet::memory

namespace sublet {

// Same names as torch.cuda, with the device as an argument (default: memory::default_device()).
std::size_t memory_allocated(Device device = memory::default_device());
std::size_t memory_reserved(Device device = memory::default_device());
std::size_t max_memory_allocated(Device device = memory::default_device());
std::size_t max_memory_reserved(Device device = memory::default_device());
void reset_peak_memory_stats(Device device = memory::default_device());
void reset_accumulated_memory_stats(Device device = memory::default_device());
std::map<std::string, std::int64_t> memory_stats(Device device = memory::default_device());
std::string memory_summary(Device device = memory::default_device());
void empty_cache(Device device = memory::default_device());

}  // namespace sublet
