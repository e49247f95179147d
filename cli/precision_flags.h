#pragma once
// --precision fp32|bf16|fp16 and --channels-last, with one wording on `train`, `bench step` and
// `profile` (runtime/amp/step_recipe.h runs the step they ask for).
#include <CLI/CLI.hpp>

#include <string>

#include "core/dtype.h"
#include "runtime/amp/precision.h"

namespace sublet::cli {

struct PrecisionFlags {
  std::string precision = "fp32";
  bool channels_last = false;

  amp::Precision parsed_precision() const { return amp::parse_precision(precision); }
  MemoryFormat memory_format() const { return channels_last ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous; }
};

void add_precision_flags(CLI::App& app, std::string& precision, bool& channels_last);
inline void add_precision_flags(CLI::App& app, PrecisionFlags& flags) {
  add_precision_flags(app, flags.precision, flags.channels_last);
}

}  // namespace sublet::cli
