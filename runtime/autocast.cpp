#include "runtime/autocast.h"

#include <string>
#include <unordered_map>

#include "core/errors.h"
#include "runtime/allocation_scope.h"
#include "runtime/autograd/function.h"
#include "runtime/autograd/grad_mode.h"
#include "runtime/autograd/node.h"

namespace sublet {
namespace {

struct CachedCast {
  Tensor source;  // held so that its address cannot be reused by another tensor while cached
  Tensor cast;    // without a grad_fn when lower_data made it; to_lower attaches the cast node later
  std::uint64_t source_version = 0;  // the source's storage version when it was cast
};

// A cached cast is reused only while it is still the source's value and its autograd node can
// still run: an optimizer step in between (a loop inside one guard) bumps the parameter's storage
// version, and a backward through the copy releases its node.
bool still_valid(const CachedCast& c, DType target) {
  return c.cast.dtype() == target && c.source.storage().version() == c.source_version &&
         !(c.cast.grad_fn() && c.cast.grad_fn()->released());
}

struct AutocastState {
  bool enabled = false;
  DType dtype = DType::BFloat16;
  int depth = 0;  // guards alive on this thread, enabled or not: the outermost one drops the cache
  std::unordered_map<const TensorImpl*, CachedCast> cache;
};

AutocastState& state() {
  thread_local AutocastState s;
  return s;
}

bool is_half(DType d) { return d == DType::BFloat16 || d == DType::Float16; }

// PyTorch's eligibility: floating point but not float64.
bool lower_candidate(const Tensor& t, DType target) {
  return t.defined() && (t.dtype() == DType::Float32 || is_half(t.dtype())) && t.dtype() != target;
}

Tensor cast(const Tensor& t, DType target) {
  AllocationCategoryGuard category(memory::BlockCategory::Autocast);
  return t.to(target);
}

// Whether t is a parameter whose copy the cache keeps: only while grad mode is on, since a copy
// made under NoGradGuard by to_lower has no path back to the leaf.
bool cacheable(const Tensor& t) {
  return t.dtype() == DType::Float32 && t.is_leaf() && t.requires_grad() && autograd::grad_mode_enabled();
}

// The cast node that Tensor::to would have recorded, attached to a new handle on the cached
// data that lower_data made: the copy is not cast a second time.
Tensor attach_cast_node(const Tensor& source, const Tensor& data) {
  Tensor attached = data.detach();
  autograd::record("to_dtype", {source}, {attached}, [origin = source.dtype()](const autograd::TensorList& g) {
    return autograd::TensorList{g[0].to(origin)};
  });
  return attached;
}

}  // namespace

AutocastGuard::AutocastGuard(DType dtype, bool enabled) {
  if (!is_half(dtype)) {
    throw ValueError(std::string("AutocastGuard: dtype must be bfloat16 or float16, got ") + dtype_name(dtype));
  }
  AutocastState& s = state();
  previous_enabled_ = s.enabled;
  previous_dtype_ = s.dtype;
  s.enabled = enabled;
  s.dtype = dtype;
  ++s.depth;
}

AutocastGuard::~AutocastGuard() {
  AutocastState& s = state();
  s.enabled = previous_enabled_;
  s.dtype = previous_dtype_;
  if (--s.depth == 0) s.cache.clear();
}

namespace amp {

bool autocast_is_enabled() { return state().enabled; }
DType autocast_dtype() { return state().dtype; }

bool casts_to_lower(std::initializer_list<Tensor> tensors) {
  const AutocastState& s = state();
  if (!s.enabled) return false;
  for (const Tensor& t : tensors) {
    if (lower_candidate(t, s.dtype)) return true;
  }
  return false;
}

Tensor to_lower(const Tensor& t) {
  AutocastState& s = state();
  if (!s.enabled || !lower_candidate(t, s.dtype)) return t;
  // Parameters are cast once per outermost guard. Only casts that record their autograd node
  // (grad mode on) are kept: a copy made under NoGradGuard has no path back to the leaf.
  if (!cacheable(t)) return cast(t, s.dtype);
  const auto found = s.cache.find(t.unsafe_impl());
  if (found != s.cache.end() && still_valid(found->second, s.dtype)) {
    if (!found->second.cast.grad_fn()) found->second.cast = attach_cast_node(t, found->second.cast);
    return found->second.cast;
  }
  Tensor lowered = cast(t, s.dtype);
  s.cache[t.unsafe_impl()] = CachedCast{t, lowered, t.storage().version()};
  return lowered;
}

Tensor lower_data(const Tensor& t) {
  AutocastState& s = state();
  if (!s.enabled || !lower_candidate(t, s.dtype)) return t;
  if (!cacheable(t)) {
    NoGradGuard no_grad;
    return cast(t, s.dtype);
  }
  const auto found = s.cache.find(t.unsafe_impl());
  if (found != s.cache.end() && still_valid(found->second, s.dtype)) return found->second.cast.detach();
  Tensor lowered;
  {
    NoGradGuard no_grad;
    lowered = cast(t, s.dtype);
  }
  s.cache[t.unsafe_impl()] = CachedCast{t, lowered, t.storage().version()};
  return lowered;
}

bool casts_to_float32(std::initializer_list<Tensor> tensors) {
  if (!state().enabled) return false;
  for (const Tensor& t : tensors) {
    if (t.defined() && is_half(t.dtype())) return true;
  }
  return false;
}

Tensor to_float32(const Tensor& t) {
  if (!state().enabled || !t.defined() || !is_half(t.dtype())) return t;
  return cast(t, DType::Float32);
}

std::size_t autocast_cached_casts() { return state().cache.size(); }

}  // namespace amp
}  // namespace sublet
