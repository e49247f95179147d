// libsublet_gloo.so: Gloo behind gloo_shim_abi.h. The only sublet file that includes Gloo's
// headers; loaded at run time by gloo_library.cpp. Gloo's TCP transport, full-mesh connection
// through sublet's store, its ring all-reduce with sublet's own reduction functions (Gloo has
// none for bfloat16, and none for an average), broadcast and barrier.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <exception>
#include <memory>
#include <stdexcept>

#include "core/half.h"
#include "runtime/distributed/gloo_shim_abi.h"

namespace sublet::distributed::gloo_shim {
namespace {

// Gloo's rendezvous store over sublet's.
class StoreAdapter final : public ::gloo::rendezvous::Store {
 public:
  StoreAdapter(KeyValueStore& store, std::chrono::milliseconds timeout) : store_(store), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override { store_.set(key, data); }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_.wait(keys, timeout);
  }

 private:
  KeyValueStore& store_;
  std::chrono::milliseconds timeout_;
};

template <typename T>
void sum_into(void* out, const void* a, const void* b, std::size_t n) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = static_cast<T>(x[i] + y[i]);
}

// 16-bit floats are summed in float32 and rounded once per addition, as PyTorch's Gloo backend.
template <typename Half>
void sum_halves_into(void* out, const void* a, const void* b, std::size_t n) {
  Half* o = static_cast<Half*>(out);
  const Half* x = static_cast<const Half*>(a);
  const Half* y = static_cast<const Half*>(b);
  for (std::size_t i = 0; i < n; ++i) o[i] = Half(static_cast<float>(x[i]) + static_cast<float>(y[i]));
}

template <typename T>
void scale(void* data, std::size_t n, double factor) {
  T* d = static_cast<T*>(data);
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<T>(static_cast<double>(d[i]) * factor);
}

template <typename Half>
void scale_halves(void* data, std::size_t n, float factor) {
  Half* d = static_cast<Half*>(data);
  for (std::size_t i = 0; i < n; ++i) d[i] = Half(static_cast<float>(d[i]) * factor);
}

template <typename T>
void run_all_reduce(::gloo::AllreduceOptions& options, void* data, std::size_t count,
                    void (*sum)(void*, const void*, const void*, std::size_t)) {
  options.setOutput(static_cast<T*>(data), count);
  options.setReduceFunction(sum);
  ::gloo::allreduce(options);
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(const ConnectOptions& options, KeyValueStore& store) : options_(options) {
    ::gloo::transport::tcp::attr attr;
    if (!options.interface_name.empty()) {
      attr.iface = options.interface_name;
    } else {
      attr.hostname = options.hostname;
    }
    device_ = ::gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<::gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(options.timeout);
    StoreAdapter adapter(store, options.timeout);
    context->connectFullMesh(adapter, device_);
    context_ = std::move(context);
  }

  void all_reduce(void* data, std::size_t count, ElementKind kind, Reduction reduction) override {
    if (count == 0) return;
    ::gloo::AllreduceOptions options(context_);
    options.setTag(next_tag());
    options.setTimeout(options_.timeout);
    switch (kind) {
      case ElementKind::Float32: run_all_reduce<float>(options, data, count, &sum_into<float>); break;
      case ElementKind::Float64: run_all_reduce<double>(options, data, count, &sum_into<double>); break;
      case ElementKind::Int64: run_all_reduce<std::int64_t>(options, data, count, &sum_into<std::int64_t>); break;
      case ElementKind::UInt8: run_all_reduce<std::uint8_t>(options, data, count, &sum_into<std::uint8_t>); break;
      case ElementKind::BFloat16:
        run_all_reduce<std::uint16_t>(options, data, count, &sum_halves_into<BFloat16>);
        break;
      case ElementKind::Float16:
        run_all_reduce<std::uint16_t>(options, data, count, &sum_halves_into<Float16>);
        break;
    }
    if (reduction != Reduction::Average) return;
    const double inverse = 1.0 / static_cast<double>(options_.world_size);
    switch (kind) {
      case ElementKind::Float32: scale<float>(data, count, inverse); break;
      case ElementKind::Float64: scale<double>(data, count, inverse); break;
      case ElementKind::BFloat16: scale_halves<BFloat16>(data, count, static_cast<float>(inverse)); break;
      case ElementKind::Float16: scale_halves<Float16>(data, count, static_cast<float>(inverse)); break;
      case ElementKind::Int64:
      case ElementKind::UInt8: throw std::runtime_error("an average of integers is not defined; sum them instead");
    }
  }

  void broadcast(void* data, std::size_t bytes, int root) override {
    if (bytes == 0) return;
    ::gloo::BroadcastOptions options(context_);
    options.setTag(next_tag());
    options.setTimeout(options_.timeout);
    options.setRoot(root);
    options.setOutput(static_cast<std::uint8_t*>(data), bytes);
    ::gloo::broadcast(options);
  }

  void barrier() override {
    ::gloo::BarrierOptions options(context_);
    options.setTag(next_tag());
    options.setTimeout(options_.timeout);
    ::gloo::barrier(options);
  }

 private:
  // Every rank issues the same collectives in the same order, so a counter agrees everywhere.
  std::uint32_t next_tag() { return tag_++; }

  ConnectOptions options_;
  std::shared_ptr<::gloo::transport::Device> device_;
  std::shared_ptr<::gloo::Context> context_;
  std::uint32_t tag_ = 0;
};

}  // namespace
}  // namespace sublet::distributed::gloo_shim

extern "C" __attribute__((visibility("default"))) int sublet_gloo_abi_version() {
  return sublet::distributed::gloo_shim::kAbiVersion;
}

// Gloo reports failures with its own exception types (gloo::IoException, EnforceNotMet); they
// become std::runtime_error here so that the caller needs no Gloo type information.
extern "C" __attribute__((visibility("default"))) sublet::distributed::gloo_shim::Communicator* sublet_gloo_connect(
    const sublet::distributed::gloo_shim::ConnectOptions& options,
    sublet::distributed::gloo_shim::KeyValueStore& store) {
  try {
    return new sublet::distributed::gloo_shim::GlooCommunicator(options, store);
  } catch (const std::exception& e) {
    throw std::runtime_error(e.what());
  }
}
