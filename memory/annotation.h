#pragma once
// Who asked for memory: a per-thread stack of named scopes ("layer1.0.conv1", "backward",
// "optimizer"). The allocator stamps every block with the innermost scope's id, so histories
// and snapshots can say which layer and phase owns each byte.
//   { sublet::memory::AnnotationScope scope("layer1.0.conv1/forward"); ... }
#include <cstdint>
#include <string>

namespace sublet::memory {

// 0 means "no scope". Ids are process-wide and stable; names are interned once.
std::uint32_t intern_annotation(const std::string& name);
std::string annotation_name(std::uint32_t id);
std::uint32_t current_annotation();

class AnnotationScope {
 public:
  explicit AnnotationScope(const std::string& name);
  explicit AnnotationScope(std::uint32_t id);
  ~AnnotationScope();
  AnnotationScope(const AnnotationScope&) = delete;
  AnnotationScope& operator=(const AnnotationScope&) = delete;
  std::uint32_t id() const { return id_; }

 private:
  std::uint32_t id_;
  std::uint32_t previous_;
};

}  // namespace sublet::memory
