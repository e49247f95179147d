#include "torch_allocator/device_table.h"

#include <string>

#include "core/errors.h"
#include "memory/annotation.h"
#include "memory/registry.h"
#include "memory/simulated_backend.h"

namespace sublet::torch_allocator {

DeviceTable& DeviceTable::instance() {
  static DeviceTable* table = new DeviceTable();
  return *table;
}

DeviceTable::Slot& DeviceTable::slot(int device) {
  if (device < 0 || device >= kMaxDevices)
    throw ValueError("sublet_torch: device " + std::to_string(device) + " is out of range (0.." +
                     std::to_string(kMaxDevices - 1) + ")");
  return slots_[static_cast<std::size_t>(device)];
}

const DeviceTable::Slot& DeviceTable::slot(int device) const {
  return const_cast<DeviceTable*>(this)->slot(device);
}

memory::AllocatorConfig DeviceTable::config_for(int device) const {
  if (const memory::CachingAllocator* a = existing(device)) return a->config();
  const memory::AllocatorConfig defaults = memory::default_config(Device::cuda(device));
  std::lock_guard lock(config_mutex_);
  if (config_text_) return memory::AllocatorConfig::parse(*config_text_, defaults, "conf");
  return memory::AllocatorConfig::from_environment(defaults);
}

void DeviceTable::set_config_text(std::optional<std::string> text) {
  std::lock_guard create_lock(create_mutex_);
  for (int d = 0; d < kMaxDevices; ++d) {
    const memory::CachingAllocator* a = existing(d);
    if (!a) continue;
    const memory::AllocatorConfig defaults = memory::default_config(Device::cuda(d));
    const std::string wanted = (text ? memory::AllocatorConfig::parse(*text, defaults, "conf")
                                     : memory::AllocatorConfig::from_environment(defaults)).to_string();
    if (wanted != a->config().to_string())
      throw Error("sublet_torch: device " + std::to_string(d) + "'s allocator already exists with '" +
                  a->config().to_string() + "'; '" + wanted +
                  "' would not apply. Set the configuration before the first allocation");
  }
  // Checked now, so that a typo fails here rather than at the first allocation.
  if (text) (void)memory::AllocatorConfig::parse(*text, memory::default_config(Device::cuda(0)), "conf");
  std::lock_guard lock(config_mutex_);
  config_text_ = std::move(text);
}

std::unique_ptr<memory::CachingAllocator> DeviceTable::make(int device) const {
  if (device < simulated_count_) {
    return std::make_unique<memory::CachingAllocator>(
        std::make_unique<memory::SimulatedBackend>(simulated_capacity_, Device::cuda(device)), config_for(device));
  }
  if (simulated_count_ > 0)
    throw ValueError("sublet_torch: device " + std::to_string(device) + " requested, but only " +
                     std::to_string(simulated_count_) + " simulated device(s) were set up");
  // The CUDA backend; a build without CUDA says so here (DeviceError).
  return memory::make_allocator(Device::cuda(device), memory::AllocatorKind::Caching);
}

memory::CachingAllocator& DeviceTable::allocator(int device) {
  Slot& s = slot(device);
  if (memory::CachingAllocator* a = s.allocator.load(std::memory_order_acquire)) return *a;
  std::lock_guard lock(create_mutex_);
  if (memory::CachingAllocator* a = s.allocator.load()) return *a;
  memory::CachingAllocator* created = make(device).release();
  if (history_entries_) {
    s.history = std::make_unique<memory::AllocationHistory>(*history_entries_);
    s.history->attach(*created);
  }
  s.allocator.store(created, std::memory_order_release);
  return *created;
}

memory::CachingAllocator* DeviceTable::existing(int device) const {
  return slot(device).allocator.load(std::memory_order_acquire);
}

std::vector<int> DeviceTable::devices() const {
  std::vector<int> out;
  for (int d = 0; d < kMaxDevices; ++d)
    if (existing(d)) out.push_back(d);
  return out;
}

void* DeviceTable::allocate(std::size_t bytes, int device, StreamHandle stream) {
  std::optional<memory::AnnotationScope> frames;
  if (FramesCallback callback = frames_callback_.load(std::memory_order_acquire)) {
    if (const std::uint32_t id = callback(); id != 0) frames.emplace(id);
  }
  memory::CachingAllocator& a = allocator(device);
  memory::Block* block = a.allocate(bytes, stream);
  Slot& s = slot(device);
  try {
    std::lock_guard lock(s.blocks_mutex);
    s.blocks.emplace(block->ptr, block);
  } catch (...) {
    a.free(block);  // the map could not grow: give the block back rather than leak it
    throw;
  }
  return block->ptr;
}

void DeviceTable::free(void* ptr, int device) {
  Slot& s = slot(device);
  memory::Block* block = nullptr;
  {
    std::lock_guard lock(s.blocks_mutex);
    const auto it = s.blocks.find(ptr);
    if (it == s.blocks.end())
      throw ValueError(std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) +
                       " is not a pointer sublet_torch_malloc handed out on device " + std::to_string(device) +
                       " (freed twice, or from another allocator?)");
    block = it->second;
    s.blocks.erase(it);
  }
  s.allocator.load(std::memory_order_acquire)->free(block);
}

void DeviceTable::record_stream(void* ptr, StreamHandle stream) {
  for (int d = 0; d < kMaxDevices; ++d) {
    Slot& s = slots_[static_cast<std::size_t>(d)];
    memory::CachingAllocator* a = s.allocator.load(std::memory_order_acquire);
    if (!a) continue;
    memory::Block* block = nullptr;
    {
      std::lock_guard lock(s.blocks_mutex);
      const auto it = s.blocks.find(ptr);
      if (it != s.blocks.end()) block = it->second;
    }
    if (block) {
      a->record_stream(block, stream);
      return;
    }
  }
  throw ValueError(std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) +
                   " is not a live pointer of sublet's allocator (pass the storage's data pointer, "
                   "tensor.untyped_storage().data_ptr(), not a view's)");
}

LiveAllocations DeviceTable::live(int device) const {
  const Slot& s = slot(device);
  LiveAllocations out;
  std::lock_guard lock(s.blocks_mutex);
  for (const auto& [ptr, block] : s.blocks) {
    ++out.count;
    out.requested_bytes += static_cast<std::int64_t>(block->requested_size);
    out.block_bytes += static_cast<std::int64_t>(block->size);
  }
  return out;
}

void DeviceTable::use_simulated(int count, std::size_t capacity_bytes) {
  if (count < 1 || count > kMaxDevices)
    throw ValueError("sublet_torch_use_simulated_devices: count must be 1.." + std::to_string(kMaxDevices) + ", got " +
                     std::to_string(count));
  if (capacity_bytes == 0) throw ValueError("sublet_torch_use_simulated_devices: capacity must be positive");
  std::lock_guard lock(create_mutex_);
  for (const Slot& s : slots_)
    if (s.allocator.load())
      throw Error("sublet_torch_use_simulated_devices: an allocator already exists; call it before the first allocation");
  simulated_count_ = count;
  simulated_capacity_ = capacity_bytes;
}

void DeviceTable::record_history(bool enabled, std::size_t max_entries) {
  std::lock_guard lock(create_mutex_);
  if (enabled) history_entries_ = max_entries == 0 ? std::size_t{1000000} : max_entries;
  else history_entries_.reset();
  for (Slot& s : slots_) {
    memory::CachingAllocator* a = s.allocator.load();
    if (!a) continue;
    s.history.reset();  // detaches from the allocator
    if (enabled) {
      s.history = std::make_unique<memory::AllocationHistory>(*history_entries_);
      s.history->attach(*a);
    }
  }
}

bool DeviceTable::recording() const {
  std::lock_guard lock(create_mutex_);
  return history_entries_.has_value();
}

std::vector<memory::HistoryEvent> DeviceTable::history(int device) const {
  std::lock_guard lock(create_mutex_);
  const Slot& s = slot(device);
  return s.history ? s.history->events() : std::vector<memory::HistoryEvent>{};
}

}  // namespace sublet::torch_allocator
