// sublet: the command-line front end. Subcommands live in their own files (see commands.h).
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <new>
#include <string>
#include <system_error>
#include <thread>

#include "cli/commands.h"
#include "cli/crash_report.h"
#include "cli/flag_checks.h"
#include "cli/version.h"
#include "memory/config.h"
#include "core/errors.h"
#include "core/switch_report.h"
#include "core/tuning.h"
#include "core/printable.h"

namespace {

// The tasks the kernel has runnable at this moment, this process included (procs_running in
// /proc/stat); 0 when it cannot be read.
int runnable_tasks() {
  std::ifstream in("/proc/stat");
  std::string key;
  while (in >> key) {
    if (key == "procs_running") {
      int count = 0;
      in >> count;
      return count;
    }
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// How long an idle OpenMP thread spins before it sleeps, when the machine is otherwise idle:
// a fraction of a millisecond, longer than most gaps between a step's parallel regions, so the
// other thread is not woken from a futex at every region.
constexpr const char* kIdleMachineSpinCount = "30000";

// "loopA/x: Too many levels of symbolic links" from "filesystem error: status: Too many ... [loopA/x]".
std::string describe_filesystem_error(const std::filesystem::filesystem_error& e) {
  std::string paths;
  if (!e.path1().empty()) paths += e.path1().string();
  if (!e.path2().empty()) paths += (paths.empty() ? "" : ", ") + e.path2().string();
  return sublet::printable(paths.empty() ? e.code().message() : paths + ": " + e.code().message());
}

bool flush_standard_output() {
  std::cout.flush();
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout.good();
  if (failed) std::cerr << "error: could not write the output to standard output (" << std::strerror(errno) << ")\n";
  return !failed;
}

}  // namespace

int main(int argc, char** argv) {
  // OpenMP threads that spin while waiting steal the cores from each other and from anything
  // else on the machine (many times slower steps on a shared machine), so they sleep at once
  // when anything else is running, and spin briefly (kIdleMachineSpinCount) when nothing is,
  // unless the user chose with OMP_WAIT_POLICY or GOMP_SPINCOUNT. libgomp reads the variables
  // when it is loaded, before main(): set one and run this program again, once.
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    // The fewest runnable tasks over 5 looks 2 ms apart: a short-lived task (the shell that
    // started this one, a kernel worker) does not count, a compiler or another training run does.
    int fewest = std::numeric_limits<int>::max();
    for (int look = 0; look < 5; ++look) {
      if (look > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      fewest = std::min(fewest, runnable_tasks());
    }
    if (fewest == 1) {
      setenv("GOMP_SPINCOUNT", kIdleMachineSpinCount, /*overwrite=*/1);
    } else {
      setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/1);
    }
    execv("/proc/self/exe", argv);  // returns only on failure: then go on with libgomp's default
  }
  sublet::cli::install_crash_report();
  CLI::App app{"sublet: a small C++ deep-learning runtime with a PyTorch-style caching allocator"};
  app.require_subcommand(1);
  app.set_version_flag("--version", sublet::cli::version_text());
  app.failure_message(sublet::cli::failure_message);
  // Every command refuses a bad switch or a bad SUBLET_ALLOC_CONF (or PyTorch's PYTORCH_ALLOC_CONF or
  // PYTORCH_CUDA_ALLOC_CONF) before it starts work, including those that create their allocators
  // late (profile) or not from the environment at all (bench alloc); and says once when the
  // settings come from a PyTorch variable or one of them is not used.
  app.parse_complete_callback([] {
    sublet::tuning();  // a bad switch fails here too (ValueError naming it)
    for (const std::string& warning : sublet::environment_warnings(sublet::environment_names()))
      std::cerr << "warning: " << warning << "\n";
    sublet::memory::AllocatorConfig::from_environment();
    const sublet::memory::ConfigOrigin origin = sublet::memory::config_origin_from_environment();
    // Said when the settings come from one of PyTorch's variables, or a variable was ignored.
    if (origin.ignored_pytorch || (!origin.variable.empty() && origin.variable != sublet::memory::kSubletAllocConf))
      std::cerr << "note: allocator configuration " << origin.describe() << "\n";
  });
  sublet::cli::add_demo_command(app);
  sublet::cli::add_bench_alloc_command(app);
  sublet::cli::add_bench_step_command(app);
  sublet::cli::add_replay_command(app);
  sublet::cli::add_plan_command(app);
  sublet::cli::add_profile_command(app);
  sublet::cli::add_train_command(app);
  sublet::cli::add_config_command(app);
  sublet::cli::add_generate_command(app);
  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
  } catch (const sublet::cli::ExitWith& e) {
    code = e.code;
  } catch (const sublet::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    code = 1;
  } catch (const std::filesystem::filesystem_error& e) {
    // A path the file system refused (a link loop, a name too long): the user's to fix.
    std::cerr << "error: " << describe_filesystem_error(e) << "\n";
    code = 1;
  } catch (const std::system_error& e) {
    // A write the system refused (fmt::print to a full or closed standard output, ENOSPC).
    std::cerr << "error: " << sublet::printable(e.what()) << "\n";
    code = 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of host memory (a buffer for the requested sizes could not be allocated); "
                 "try smaller inputs or settings\n";
    code = 1;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    code = 2;
  }
  // A command's result is often its standard output: a write that failed (a full disk, a closed
  // pipe) must not end with status 0.
  if (!flush_standard_output() && code == 0) code = 1;
  return code;
}