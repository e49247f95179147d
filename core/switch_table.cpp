#include "core/switch_table.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

namespace sublet {
namespace {

using enum SwitchType;
using enum SwitchScope;

constexpr std::array kSwitches{
    // Read once into TuningOptions (core/tuning.h).
    SwitchSpec{kLogConvPlansSwitch, Flag, Runtime, "0",
               "diagnostic: print each new convolution shape's cuDNN engines, refusals and times to stderr"},
    SwitchSpec{kAttentionBackendSwitch, Text, Runtime, "auto",
               "16-bit attention on CUDA: auto (cuDNN's fused flash attention where it has an engine, else "
               "sublet's kernels), cudnn (cuDNN's or an error) or sublet (sublet's fused kernels)"},
    SwitchSpec{kNoStreamOverlapSwitch, Flag, Runtime, "0",
               "diagnostic: run all work of a captured step on its one stream (no side streams beside backward)"},
    SwitchSpec{kGeluEpilogueSwitch, Flag, Runtime, "0",
               "run the MLP's GELU on CUDA in 16-bit in cuBLASLt's GEMM epilogues instead of kernels of its own"},
    SwitchSpec{kNoFloat32WeightGradientsSwitch, Flag, Runtime, "0",
               "for comparisons: under autocast on CUDA, the fused linears' weight and bias gradients in 16-bit "
               "and cast to float32 by the cast nodes instead of written in float32 by the GEMMs"},
    SwitchSpec{kCpuNoAvx512Switch, Flag, Runtime, "0",
               "run the CPU convolutions and GEMMs on their AVX2 kernels even where the CPU has AVX-512"},
    SwitchSpec{kNoFusedLayerNormSwitch, Flag, Runtime, "0",
               "for comparisons: CUDA layer norm on its block-per-row kernels, and GPT blocks without the 16-bit "
               "norm output and the fused residual add"},
    SwitchSpec{kNcclLibrarySwitch, Path, Runtime, "libnccl.so.2",
               "the NCCL library data parallel loads (found on the library path when unset)"},
    SwitchSpec{kGlooLibrarySwitch, Path, Runtime, "",
               "the Gloo shim (libsublet_gloo.so) --backend gloo loads (next to the sublet binary when unset)"},
    SwitchSpec{kNvtxCaptureSwitch, Path, Runtime, "",
               "the JSON file libsublet_nvtx_capture.so writes NVTX ranges to (%p: the process id)"},
    SwitchSpec{kConvPadChannelsSwitch, Text, Runtime, "off",
               "16-bit channels-last CUDA convolutions of fewer than 8 input channels: off, or run cuDNN on "
               "input and weight copies zero-padded to a multiple of 4 or 8 channels"},
    SwitchSpec{kBnReluMaskSwitch, Text, Runtime, "input",
               "backward of CUDA's 16-bit and channels-last batch norm + ReLU without a residual: the ReLU's "
               "mask recomputed from the input (input) or read from the forward's output (output)"},
    // Their own readers.
    SwitchSpec{"SUBLET_ALLOC_CONF", Text, Allocator, "",
               "allocator configuration, PyTorch's PYTORCH_CUDA_ALLOC_CONF keys; wins over that variable"},
    SwitchSpec{"SUBLET_STORE_TOKEN", Secret, Launcher, "",
               "the secret every data-parallel worker presents to the rendezvous store (16-256 characters)"},
    SwitchSpec{"SUBLET_REQUIRE_GPU", Flag, Tests, "0",
               "GPU tests fail instead of skipping when no CUDA device is usable"},
    SwitchSpec{"SUBLET_MNIST_DIR", Path, Tests, "",
               "where the MNIST reader's tests find the dataset (default: data/mnist in the source tree)"},
    SwitchSpec{"SUBLET_TORCH_DLPACK_PLUGIN", Path, Tests, "",
               "the PyTorch DLPack plugin test_dlpack_torch loads instead of the one built at configure time"},
    SwitchSpec{"SUBLET_GPT2_BPE_DIR", Path, Tests, "",
               "where the GPT-2 tokenizer's tests find encoder.json and vocab.bpe (scripts/fetch_gpt2_bpe.sh)"},
    SwitchSpec{"SUBLET_TORCH_PYTHON", Path, Tests, "",
               "the python3 with PyTorch that the parity tests run (default: the one found at configure time)"},
    SwitchSpec{"SUBLET_GPT_PARITY_SCRIPT", Path, Tests, "",
               "test_gpt_torch_parity: the PyTorch side's script (default: the source tree's)"},
    SwitchSpec{"SUBLET_PARITY_DEVICE", Text, Tests, "cpu", "test_gpt_torch_parity: cpu or cuda, both sides"},
    SwitchSpec{"SUBLET_PARITY_ATTENTION", Text, Tests, "manual",
               "test_gpt_torch_parity: PyTorch's attention written out (manual) or sdpa"},
    SwitchSpec{"SUBLET_PARITY_BATCH", Text, Tests, "4", "test_gpt_torch_parity: windows per step"},
    SwitchSpec{"SUBLET_PARITY_SEQ_LEN", Text, Tests, "64", "test_gpt_torch_parity: tokens per window"},
    SwitchSpec{"SUBLET_PROJECT_VERSION", Text, Tests, "",
               "test_sublet_torch.py: the version the package must report (ctest sets CMake's)"},
    SwitchSpec{"SUBLET_BENCH_CLOCK", Text, Bench, "",
               "conv_cpu_bench: cpu times process CPU time instead of wall time"},
    SwitchSpec{"SUBLET_BENCH_LAYERS", Text, Bench, "",
               "conv_cpu_bench: only the layers whose names contain this text"},
    SwitchSpec{"SUBLET_PYTORCH_STEP_SWEEP_ROW", Path, Bench, "",
               "bench/pytorch_step.py: set by a sweep for its child process, where the child writes its row"},
    SwitchSpec{"SUBLET_PYTORCH_STEP_SWEEP_SNAPSHOT", Path, Bench, "",
               "bench/pytorch_step.py: set by a sweep for its child process, where the child writes its snapshot"},
    SwitchSpec{"SUBLET_TORCH_ALLOCATOR_LIBRARY", Path, Python, "",
               "the libsublet_torch_allocator.so the Python package sublet_torch loads"},
    SwitchSpec{"SUBLET_TORCH_HOOKS", Path, Python, "",
               "sublet_torch.use(): the torch hooks library instead of the one built for this PyTorch"},
    SwitchSpec{"SUBLET_TORCH_SIMULATE", Text, Python, "",
               "sublet_torch.use(): COUNTxSIZE (1x8GiB) simulated devices instead of the GPU"},
    SwitchSpec{"SUBLET_TORCH_CUDA", Text, Python, "",
               "building sublet_torch: 0 without CUDA, 1 fail without a CUDA toolkit, unset: CUDA when found"},
    SwitchSpec{"SUBLET_TORCH_CMAKE_ARGS", Text, Python, "", "building sublet_torch: more -D options for CMake"},
    SwitchSpec{"SUBLET_BUILD_DIR", Path, Scripts, "build", "scripts/build.sh: the build folder"},
    SwitchSpec{"SUBLET_SETUP_TORCH", Flag, Scripts, "0", "scripts/setup.sh: also install Debian's python3-torch"},
    SwitchSpec{"SUBLET_SETUP_SANITIZERS", Flag, Scripts, "0",
               "scripts/setup.sh: also install clang 14 for the sanitizer builds"},
    SwitchSpec{"SUBLET_SETUP_DATASETS", Flag, Scripts, "0", "scripts/setup.sh: also install Debian's Fashion-MNIST"},
    SwitchSpec{"SUBLET_SETUP_DOCS", Flag, Scripts, "0", "scripts/setup.sh: also install what the docs site's build needs"},
    SwitchSpec{"SUBLET_SETUP_SCREENSHOTS", Flag, Scripts, "0",
               "scripts/setup.sh: also install the browser scripts/screenshot_docs.sh uses"},
    SwitchSpec{"SUBLET_CHECK_SUBPROJECT", Flag, Scripts, "1",
               "scripts/check_install.sh: 0 skips building the add_subdirectory example"},
    SwitchSpec{"SUBLET_TORCH_BUILD_DIR", Path, Scripts, "build-torch-allocator", "scripts/build_torch_allocator.sh: the build folder"},
    SwitchSpec{"SUBLET_TORCH_CPU_ONLY", Flag, Scripts, "0",
               "scripts/build_torch_allocator.sh: build without CUDA"},
    // Opt-outs of optimisations that are now always on.
    SwitchSpec{"SUBLET_NO_UPDATE_OVERLAP", Flag, Retired, "", "no longer read"},
    SwitchSpec{"SUBLET_NO_DEFERRED_JOIN", Flag, Retired, "", "no longer read"},
    SwitchSpec{"SUBLET_NO_CONV_GRADIENT_SUM", Flag, Retired, "", "no longer read"},
    SwitchSpec{"SUBLET_NO_IM2COL_CONV", Flag, Retired, "", "no longer read"},
    SwitchSpec{"SUBLET_NO_SINGLE_TAP_GEMM", Flag, Retired, "", "no longer read"},
    SwitchSpec{"SUBLET_BN_NO_SMALL_KERNEL", Flag, Retired, "", "no longer read"},
    SwitchSpec{"SUBLET_CPU_NO_WINOGRAD", Flag, Retired, "", "no longer read"},
    SwitchSpec{"SUBLET_CUDNN_HEURISTICS", Text, Retired, "", "no longer read"},
};

// Levenshtein distance, two rows.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> previous(b.size() + 1), current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitute = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

}  // namespace

std::span<const SwitchSpec> switch_table() { return kSwitches; }

const SwitchSpec* find_switch(std::string_view name) {
  for (const SwitchSpec& spec : kSwitches)
    if (spec.name == name) return &spec;
  return nullptr;
}

std::string_view nearest_switch(std::string_view name) {
  std::string_view best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const SwitchSpec& spec : kSwitches) {
    if (spec.scope == Retired) continue;
    const std::size_t d = edit_distance(name, spec.name);
    if (d < best_distance) {
      best_distance = d;
      best = spec.name;
    }
  }
  return best;
}

std::string_view switch_type_name(SwitchType type) {
  switch (type) {
    case Flag: return "flag";
    case Path: return "path";
    case Text: return "text";
    case Secret: return "secret";
  }
  return "?";
}

std::string_view switch_scope_name(SwitchScope scope) {
  switch (scope) {
    case Runtime: return "runtime";
    case Allocator: return "allocator";
    case Launcher: return "launcher";
    case Tests: return "tests";
    case Bench: return "bench";
    case Python: return "python";
    case Scripts: return "scripts";
    case Retired: return "retired";
  }
  return "?";
}

}  // namespace sublet
