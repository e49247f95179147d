#include "core/tuning.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/errors.h"
#include "core/switch_table.h"

namespace sublet {
namespace {

// The environment's options, read once; and the innermost override, when one is in force.
std::once_flag environment_read;
std::optional<TuningOptions> from_process;
std::atomic<const TuningOptions*> current{nullptr};

AttentionBackend read_attention_backend(const EnvironmentLookup& lookup, AttentionBackend default_value) {
  const std::optional<std::string> value = lookup(std::string(kAttentionBackendSwitch));
  if (!value || value->empty()) return default_value;
  if (*value == "auto") return AttentionBackend::Auto;
  if (*value == "cudnn") return AttentionBackend::Cudnn;
  if (*value == "sublet") return AttentionBackend::Sublet;
  throw ValueError(std::string(kAttentionBackendSwitch) + ": expected auto, cudnn or sublet, got '" + *value + "'");
}

int read_conv_pad_channels(const EnvironmentLookup& lookup, int default_value) {
  const std::optional<std::string> value = lookup(std::string(kConvPadChannelsSwitch));
  if (!value || value->empty()) return default_value;
  if (*value == "off") return kConvPadChannelsOff;
  if (*value == "4") return 4;
  if (*value == "8") return 8;
  throw ValueError(std::string(kConvPadChannelsSwitch) + ": expected off, 4 or 8, got '" + *value + "'");
}

BnReluMask read_bn_relu_mask(const EnvironmentLookup& lookup, BnReluMask default_value) {
  const std::optional<std::string> value = lookup(std::string(kBnReluMaskSwitch));
  if (!value || value->empty()) return default_value;
  if (*value == "input") return BnReluMask::Input;
  if (*value == "output") return BnReluMask::Output;
  throw ValueError(std::string(kBnReluMaskSwitch) + ": expected input or output, got '" + *value + "'");
}

bool read_flag(const EnvironmentLookup& lookup, std::string_view name, bool default_value) {
  const std::optional<std::string> value = lookup(std::string(name));
  if (!value) return default_value;
  if (*value == "1") return true;
  if (value->empty() || *value == "0") return false;
  throw ValueError(std::string(name) + ": expected 1 (on), 0 or empty (off), got '" + *value + "'");
}

std::string read_path(const EnvironmentLookup& lookup, std::string_view name, std::string default_value) {
  const std::optional<std::string> value = lookup(std::string(name));
  return value && !value->empty() ? *value : default_value;
}

}  // namespace

EnvironmentLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
  };
}

TuningOptions TuningOptions::from_environment(const EnvironmentLookup& lookup) {
  TuningOptions o;
  o.attention_backend = read_attention_backend(lookup, o.attention_backend);
  o.log_conv_plans = read_flag(lookup, kLogConvPlansSwitch, o.log_conv_plans);
  o.stream_overlap = !read_flag(lookup, kNoStreamOverlapSwitch, !o.stream_overlap);
  o.cpu_avx512 = !read_flag(lookup, kCpuNoAvx512Switch, !o.cpu_avx512);
  o.gelu_epilogue = read_flag(lookup, kGeluEpilogueSwitch, o.gelu_epilogue);
  o.fused_layer_norm = !read_flag(lookup, kNoFusedLayerNormSwitch, !o.fused_layer_norm);
  o.float32_weight_gradients = !read_flag(lookup, kNoFloat32WeightGradientsSwitch, !o.float32_weight_gradients);
  o.nccl_library = read_path(lookup, kNcclLibrarySwitch, o.nccl_library);
  o.gloo_library = read_path(lookup, kGlooLibrarySwitch, o.gloo_library);
  o.nvtx_capture = read_path(lookup, kNvtxCaptureSwitch, o.nvtx_capture);
  o.conv_pad_channels = read_conv_pad_channels(lookup, o.conv_pad_channels);
  o.bn_relu_mask = read_bn_relu_mask(lookup, o.bn_relu_mask);
  return o;
}

std::optional<std::string> TuningOptions::value_text(std::string_view name) const {
  const auto flag = [](bool on) { return std::string(on ? "1" : "0"); };
  if (name == kAttentionBackendSwitch) return std::string(attention_backend_name(attention_backend));
  if (name == kLogConvPlansSwitch) return flag(log_conv_plans);
  if (name == kNoStreamOverlapSwitch) return flag(!stream_overlap);
  if (name == kCpuNoAvx512Switch) return flag(!cpu_avx512);
  if (name == kGeluEpilogueSwitch) return flag(gelu_epilogue);
  if (name == kNoFusedLayerNormSwitch) return flag(!fused_layer_norm);
  if (name == kNoFloat32WeightGradientsSwitch) return flag(!float32_weight_gradients);
  if (name == kNcclLibrarySwitch) return nccl_library;
  if (name == kGlooLibrarySwitch) return gloo_library;
  if (name == kNvtxCaptureSwitch) return nvtx_capture;
  if (name == kConvPadChannelsSwitch) return conv_pad_channels_text(conv_pad_channels);
  if (name == kBnReluMaskSwitch) return std::string(bn_relu_mask_name(bn_relu_mask));
  return std::nullopt;
}

const TuningOptions& tuning() {
  if (const TuningOptions* scoped = current.load(std::memory_order_acquire)) return *scoped;
  std::call_once(environment_read, [] { from_process = TuningOptions::from_environment(process_environment()); });
  return *from_process;
}

ScopedTuning::ScopedTuning(TuningOptions options)
    : options_(std::move(options)), previous_(current.load(std::memory_order_acquire)) {
  current.store(&options_, std::memory_order_release);
}

ScopedTuning::ScopedTuning(const std::function<void(TuningOptions&)>& change)
    : ScopedTuning([&] {
        TuningOptions options = tuning();
        change(options);
        return options;
      }()) {}

ScopedTuning::~ScopedTuning() { current.store(previous_, std::memory_order_release); }

const char* attention_backend_name(AttentionBackend backend) {
  switch (backend) {
    case AttentionBackend::Cudnn: return "cudnn";
    case AttentionBackend::Sublet: return "sublet";
    case AttentionBackend::Auto: break;
  }
  return "auto";
}

const char* bn_relu_mask_name(BnReluMask mask) { return mask == BnReluMask::Output ? "output" : "input"; }

std::string conv_pad_channels_text(int multiple) {
  return multiple == kConvPadChannelsOff ? std::string("off") : std::to_string(multiple);
}

}  // namespace sublet
