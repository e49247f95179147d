#pragma once
// Every SUBLET_* environment variable any part of sublet reads, in one table: its name, type,
// default and one line of documentation. `sublet config` prints it; an unknown SUBLET_* variable
// in the environment is reported with the nearest name from it (core/switch_report.h).
//
// What "set" means, one rule per type:
//   Flag    "1" is on; "0" or empty is off; unset is the default; anything else is an error.
//   Path    a non-empty value is used; empty or unset is the default.
//   Text    as Path (a string the reader parses, e.g. the allocator configuration).
//   Secret  as Text, but shown only as set or unset.
#include <span>
#include <string_view>

namespace sublet {

enum class SwitchType { Flag, Path, Text, Secret };

// Who reads the variable. Runtime switches are read once into TuningOptions (core/tuning.h); the
// others have one reader of their own, named in the table's documentation.
enum class SwitchScope {
  Runtime,    // core/tuning.h: TuningOptions
  Allocator,  // memory/config.h: the allocator configuration
  Launcher,   // runtime/distributed/launch_env.h: a data-parallel worker's launch
  Tests,      // the test programs
  Bench,      // benchmark programs outside the sublet binary
  Python,     // the Python package sublet_torch and its build
  Scripts,    // scripts/*.sh
  Retired,    // no longer read: setting it changes nothing
};

struct SwitchSpec {
  std::string_view name;
  SwitchType type;
  SwitchScope scope;
  std::string_view default_value;  // as text, "" for none
  std::string_view doc;            // one line
};

// Names of the runtime switches, for their one reader (core/tuning.cpp) and their tests.
inline constexpr std::string_view kAttentionBackendSwitch = "SUBLET_ATTENTION_BACKEND";
inline constexpr std::string_view kLogConvPlansSwitch = "SUBLET_LOG_CONV_PLANS";
inline constexpr std::string_view kNoStreamOverlapSwitch = "SUBLET_NO_STREAM_OVERLAP";
inline constexpr std::string_view kCpuNoAvx512Switch = "SUBLET_CPU_NO_AVX512";
inline constexpr std::string_view kGeluEpilogueSwitch = "SUBLET_GELU_EPILOGUE";
inline constexpr std::string_view kNoFusedLayerNormSwitch = "SUBLET_NO_FUSED_LAYER_NORM";
inline constexpr std::string_view kNoFloat32WeightGradientsSwitch = "SUBLET_NO_FLOAT32_WEIGHT_GRADIENTS";
inline constexpr std::string_view kNcclLibrarySwitch = "SUBLET_NCCL_LIBRARY";
inline constexpr std::string_view kGlooLibrarySwitch = "SUBLET_GLOO_LIBRARY";
inline constexpr std::string_view kNvtxCaptureSwitch = "SUBLET_NVTX_CAPTURE";
inline constexpr std::string_view kConvPadChannelsSwitch = "SUBLET_CONV_PAD_CHANNELS";
inline constexpr std::string_view kBnReluMaskSwitch = "SUBLET_BN_RELU_MASK";

std::span<const SwitchSpec> switch_table();
// The entry of `name`, or nullptr when the table has none.
const SwitchSpec* find_switch(std::string_view name);
// The table's name closest to `name` (fewest single-character edits; a retired name never).
std::string_view nearest_switch(std::string_view name);

std::string_view switch_type_name(SwitchType type);    // "flag", "path", "text", "secret"
std::string_view switch_scope_name(SwitchScope scope);  // "runtime", "allocator", ...

}  // namespace sublet
