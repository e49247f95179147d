#pragma once
// --device of every command that runs on a device: the same values, default and message
// everywhere. Values: cpu, cuda, cuda:N and auto; the default is auto, the GPU when there is one,
// else the CPU (a PyTorch script's `"cuda" if torch.cuda.is_available() else "cpu"`). A value
// that is none of them fails while the command line is read, before any work:
//   --device: unknown value 'gpu'; expected auto, cpu, cuda or cuda:N
// The commands resolve the text with train::resolve_device (one message when CUDA is missing);
// bench alloc, whose devices are its own (sim), with bench::parse_bench_device.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace sublet::cli {

struct DeviceValues {
  bool cuda_index = true;           // cuda:N besides cuda (bench alloc measures cuda:0 only)
  std::vector<std::string> extra;   // values only this command takes (bench alloc's sim)
};

// Adds --device writing into `value` (set to "auto" first).
CLI::Option* add_device_option(CLI::App& app, std::string& value, const DeviceValues& values = {});

// replay's and plan's --device: which of a PyTorch snapshot's devices, written N or cuda:N
// (torch.cuda.memory's own naming); cuda:N is read as N, anything else refused.
CLI::Validator snapshot_device_index();

// The values as the help and the message list them: "auto, cpu, cuda or cuda:N".
std::string device_value_list(const DeviceValues& values = {});

}  // namespace sublet::cli
