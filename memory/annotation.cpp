#include "memory/annotation.h"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace sublet::memory {
namespace {

struct AnnotationTable {
  std::mutex mutex;
  std::unordered_map<std::string, std::uint32_t> ids;
  std::vector<std::string> names{""};  // id 0 = no scope
};

AnnotationTable& table() {
  static AnnotationTable* t = new AnnotationTable();  // outlives static destructors that free memory
  return *t;
}

thread_local std::uint32_t innermost = 0;

}  // namespace

std::uint32_t intern_annotation(const std::string& name) {
  AnnotationTable& t = table();
  std::lock_guard lock(t.mutex);
  auto [it, inserted] = t.ids.emplace(name, static_cast<std::uint32_t>(t.names.size()));
  if (inserted) t.names.push_back(name);
  return it->second;
}

std::string annotation_name(std::uint32_t id) {
  AnnotationTable& t = table();
  std::lock_guard lock(t.mutex);
  return id < t.names.size() ? t.names[id] : std::string("?");
}

std::uint32_t current_annotation() { return innermost; }

AnnotationScope::AnnotationScope(const std::string& name) : AnnotationScope(intern_annotation(name)) {}

AnnotationScope::AnnotationScope(std::uint32_t id) : id_(id), previous_(innermost) { innermost = id; }

AnnotationScope::~AnnotationScope() { innermost = previous_; }

}  // namespace sublet::memory
