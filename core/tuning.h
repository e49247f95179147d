#pragma once
// The runtime switches (core/switch_table.h, scope Runtime), read from the environment once into
// one TuningOptions that every reader consults through tuning(). Tests change a switch for a
// scope with ScopedTuning instead of setenv, which the first read would already have frozen:
//
//   ScopedTuning scope([](TuningOptions& o) { o.stream_overlap = false; });
//   // tuning() returns the options in force before, so changed, until the scope ends
#include <functional>
#include <optional>
#include <string>

namespace sublet {

// SUBLET_ATTENTION_BACKEND: which kernels run bfloat16/float16 attention on CUDA devices.
enum class AttentionBackend {
  Auto,    // cuDNN's fused flash attention where it has an engine for the shape, else sublet's own
  Cudnn,   // cuDNN's or an error naming why it can't (for tests and comparisons)
  Sublet,  // sublet's own fused kernels (ops/cuda/attention_flash_*.cu)
};

// "auto", "cudnn" or "sublet", as the variable spells it.
const char* attention_backend_name(AttentionBackend backend);

// SUBLET_CONV_PAD_CHANNELS: bfloat16/float16 channels-last convolutions of fewer than 8 input
// channels (an image's stem) on CUDA run cuDNN on copies of the input and weight whose channels
// are zero-padded to a multiple of this (ops/cuda/conv2d_channel_pad.h); 0 is off.
inline constexpr int kConvPadChannelsOff = 0;
// "off", "4" or "8", as the variable spells it.
std::string conv_pad_channels_text(int multiple);

// SUBLET_BN_RELU_MASK: where the backward of a fused batch norm + ReLU without a residual takes
// the ReLU's mask from (ops/batch_norm_relu.h).
enum class BnReluMask {
  Input,   // recomputed from the input and the forward's per-channel coefficients (one read fewer)
  Output,  // read from the forward's output
};

// "input" or "output", as the variable spells it.
const char* bn_relu_mask_name(BnReluMask mask);

// Looks an environment variable up: nullopt when it is not set.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvironmentLookup process_environment();

struct TuningOptions {
  AttentionBackend attention_backend = AttentionBackend::Auto;  // SUBLET_ATTENTION_BACKEND=auto|cudnn|sublet
  bool log_conv_plans = false;              // SUBLET_LOG_CONV_PLANS=1
  bool stream_overlap = true;               // SUBLET_NO_STREAM_OVERLAP=1 turns it off
  bool cpu_avx512 = true;                   // SUBLET_CPU_NO_AVX512=1 turns it off
  bool gelu_epilogue = false;               // SUBLET_GELU_EPILOGUE=1 turns it on
  bool fused_layer_norm = true;             // SUBLET_NO_FUSED_LAYER_NORM=1 turns it off
  bool float32_weight_gradients = true;     // SUBLET_NO_FLOAT32_WEIGHT_GRADIENTS=1 turns it off
  std::string nccl_library = "libnccl.so.2";  // SUBLET_NCCL_LIBRARY
  std::string gloo_library;                 // SUBLET_GLOO_LIBRARY; empty: next to the sublet binary
  std::string nvtx_capture;                 // SUBLET_NVTX_CAPTURE; empty: nowhere to write
  int conv_pad_channels = kConvPadChannelsOff;  // SUBLET_CONV_PAD_CHANNELS=off|4|8
  BnReluMask bn_relu_mask = BnReluMask::Input;   // SUBLET_BN_RELU_MASK=input|output

  // Reads the runtime switches through `lookup`. Throws ValueError naming the variable, what it
  // may be and what it is, for a flag that is neither "1", "0" nor empty, or a text switch's
  // value outside its list.
  static TuningOptions from_environment(const EnvironmentLookup& lookup);

  // A switch's value as its environment variable would spell it ("1"/"0" for flags); nullopt
  // for a name that is not a runtime switch.
  std::optional<std::string> value_text(std::string_view name) const;
};

// The options in force: the innermost ScopedTuning's, else the process environment's, read on
// the first call (which throws ValueError for a bad value, as from_environment).
const TuningOptions& tuning();

// Replaces the options tuning() returns until destruction. Scopes nest; end them in reverse
// order, on the thread that started them, while no other thread reads tuning().
class ScopedTuning {
 public:
  explicit ScopedTuning(TuningOptions options);
  // The options in force now, changed by `change`.
  explicit ScopedTuning(const std::function<void(TuningOptions&)>& change);
  ~ScopedTuning();
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;

 private:
  TuningOptions options_;
  const TuningOptions* previous_;
};

}  // namespace sublet
