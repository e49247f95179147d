#include "cli/precision_flags.h"

namespace sublet::cli {

void add_precision_flags(CLI::App& app, std::string& precision, bool& channels_last) {
  app.add_option("--precision", precision,
                 "fp32, or bf16/fp16: the forward under autocast in that type with float32 master weights "
                 "(fp16 also scales the loss), as torch.autocast + GradScaler")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  app.add_flag("--channels-last", channels_last,
               "the model's 4-d parameters and the batches in channels-last (NHWC) memory format, as "
               "model.to(memory_format=torch.channels_last)");
}

}  // namespace sublet::cli
