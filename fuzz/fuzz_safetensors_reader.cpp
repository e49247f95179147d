// Arbitrary bytes as a safetensors checkpoint: a consistent file or an IoError, never a crash.
#include <cstdint>

#include "fuzz/fuzz_input_file.h"
#include "core/errors.h"
#include "runtime/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const auto path = sublet::fuzz::scratch_file("-ckpt.safetensors");
  sublet::fuzz::write_input(path, data, size);
  try {
    const auto file = sublet::io::load_safetensors(path);
    for (const auto& [name, record] : file.tensors)
      if (record.bytes.size() != static_cast<std::size_t>(record.numel()) * sublet::io::safetensors_element_size(record.dtype))
        std::abort();
  } catch (const sublet::IoError&) {
  }
  return 0;
}
