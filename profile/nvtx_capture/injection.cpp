// libsublet_nvtx_capture.so: an NVTX injection library, the way Nsight Systems receives ranges,
// for machines without it. NVTX (header-only, compiled into the program) dlopens the library that
// NVTX_INJECTION64_PATH names at the program's first NVTX call and calls its
// InitializeInjectionNvtx2 with an export-table getter; the library writes its own functions into
// the core module's slots. Every range is kept in memory and written as JSON at exit to the file
// TuningOptions::nvtx_capture names (core/tuning.h; "%p" in it becomes the process id, for
// data-parallel workers). docs/configuration.md shows a run; profile/nvtx_capture/nvtx_sum.py
// sums the file as `nsys stats --report nvtx_sum` would.
//
// Only the core module's ranges are taken (RangeStartA/Ex, RangeEnd, RangePushA/Ex, RangePop; an
// Ex range without an ASCII message is named "(unnamed)"): what sublet's --nvtx emits
// (runtime/nn/module_ranges.h). Every other NVTX call stays a no-op, as NVTX makes it when a tool
// leaves the slot empty. The file is written by an exit handler: a crash or _exit writes nothing.
#define NVTX_NO_IMPL  // a tool: the types and ids only, not a second copy of NVTX's implementation
#include <nvtx3/nvToolsExt.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <system_error>

#include "core/switch_table.h"
#include "core/tuning.h"
#include "profile/nvtx_capture/range_log.h"

namespace sublet::nvtx_capture {
namespace {

// Never destroyed: a range may end in another library's static destructor after our exit handler.
RangeLog& captured() {
  static RangeLog* const instance = new RangeLog;
  return *instance;
}

std::string& output_path() {
  static std::string* const path = new std::string;
  return *path;
}

std::string message_of(const nvtxEventAttributes_t* attributes) {
  if (attributes != nullptr && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII && attributes->message.ascii != nullptr)
    return attributes->message.ascii;
  return "(unnamed)";  // no message, or a wide or registered string: counted under one name
}

nvtxRangeId_t NVTX_API range_start_a(const char* message) { return captured().start(message ? message : "(unnamed)"); }
nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t* attributes) { return captured().start(message_of(attributes)); }
void NVTX_API range_end(nvtxRangeId_t id) { captured().end(id); }
int NVTX_API range_push_a(const char* message) { return captured().push(message ? message : "(unnamed)"); }
int NVTX_API range_push_ex(const nvtxEventAttributes_t* attributes) { return captured().push(message_of(attributes)); }
int NVTX_API range_pop() { return captured().pop(); }

// At exit, through a temporary file and a rename: a reader never sees half a file.
void write_capture() {
  const std::string& path = output_path();
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << captured().to_json().dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) {
      std::fprintf(stderr, "sublet nvtx capture: could not write %s\n", temporary.c_str());
      return;
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error)
    std::fprintf(stderr, "sublet nvtx capture: could not rename %s to %s: %s\n", temporary.c_str(), path.c_str(),
                 error.message().c_str());
}

std::string expand_pid(std::string path) {
  for (auto at = path.find("%p"); at != std::string::npos; at = path.find("%p", at))
    path.replace(at, 2, std::to_string(::getpid()));
  return path;
}

template <typename Function>
void install(NvtxFunctionTable table, unsigned int size, NvtxCallbackIdCore id, Function function) {
  if (static_cast<unsigned int>(id) < size && table[id] != nullptr)
    *table[id] = reinterpret_cast<NvtxFunctionPointer>(function);
}

}  // namespace
}  // namespace sublet::nvtx_capture

// Returns 0 (NVTX then makes every call a no-op) when there is nowhere to write or the program's
// NVTX offers no core table; says why on stderr, since the user asked for a capture.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  using namespace sublet::nvtx_capture;
  std::string path;
  try {
    path = sublet::tuning().nvtx_capture;
  } catch (const std::exception& e) {  // a bad switch in the environment; NVTX cannot take an exception
    std::fprintf(stderr, "sublet nvtx capture: %s; recording nothing\n", e.what());
    return 0;
  }
  if (path.empty()) {
    std::fprintf(stderr, "sublet nvtx capture: set %s to the JSON file to write; recording nothing\n",
                 std::string(sublet::kNvtxCaptureSwitch).c_str());
    return 0;
  }
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 || table == nullptr) {
    std::fprintf(stderr, "sublet nvtx capture: the program's NVTX has no core callback table; recording nothing\n");
    return 0;
  }
  // Every NVTX instance in the process (sublet's, and any a CUDA library compiled in) loads the
  // library and calls this with its own table: one log, one file, one exit handler for them all.
  static std::once_flag once;
  std::call_once(once, [path] {
    output_path() = expand_pid(path);
    std::atexit(write_capture);
  });
  install(table, size, NVTX_CBID_CORE_RangeStartA, &range_start_a);
  install(table, size, NVTX_CBID_CORE_RangeStartEx, &range_start_ex);
  install(table, size, NVTX_CBID_CORE_RangeEnd, &range_end);
  install(table, size, NVTX_CBID_CORE_RangePushA, &range_push_a);
  install(table, size, NVTX_CBID_CORE_RangePushEx, &range_push_ex);
  install(table, size, NVTX_CBID_CORE_RangePop, &range_pop);
  return 1;
}
