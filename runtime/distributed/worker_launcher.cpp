#include "runtime/distributed/worker_launcher.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <thread>

#include "core/errors.h"

extern char** environ;

namespace sublet::distributed {
namespace {

// The environment of one worker: this process's, with the worker's variables set over it.
std::vector<std::string> worker_env_strings(const std::vector<std::pair<std::string, std::string>>& vars) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : vars) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void stop_all(const std::map<pid_t, int>& running, std::chrono::milliseconds grace) {
  for (const auto& [pid, rank] : running) {
    kill(pid, SIGTERM);
    kill(pid, SIGCONT);  // a stopped worker (SIGSTOP) acts on SIGTERM only once continued
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  std::map<pid_t, int> left = running;
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    for (auto it = left.begin(); it != left.end();) {
      int status = 0;
      it = waitpid(it->first, &status, WNOHANG) == it->first ? left.erase(it) : std::next(it);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& [pid, rank] : left) {
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
  }
}

WorkerExit exit_of(int local_rank, int status) {
  if (WIFSIGNALED(status)) return {local_rank, 128 + WTERMSIG(status), true};
  return {local_rank, WEXITSTATUS(status), false};
}

}  // namespace

LaunchResult run_workers(const LauncherConfig& config, const std::vector<std::string>& argv,
                         std::chrono::milliseconds grace) {
  if (argv.empty()) throw ValueError("run_workers: empty command");
  std::map<pid_t, int> running;  // pid -> local rank
  for (int local_rank = 0; local_rank < config.nproc_per_node; ++local_rank) {
    const LaunchEnv env = worker_launch_env(config, local_rank);
    auto variables = config.extra_environment;
    for (auto& variable : worker_environment(env, config.node_rank)) variables.push_back(std::move(variable));
    std::vector<std::string> env_strings = worker_env_strings(variables);
    std::vector<std::string> args = argv;
    std::vector<char*> c_env = c_strings(env_strings);
    std::vector<char*> c_args = c_strings(args);
    pid_t pid = 0;
    const int error = posix_spawn(&pid, c_args[0], nullptr, nullptr, c_args.data(), c_env.data());
    if (error != 0) {
      stop_all(running, grace);
      throw DistributedError("could not start worker " + std::to_string(local_rank) + " (" + argv[0] +
                             "): " + std::strerror(error));
    }
    running[pid] = local_rank;
  }
  LaunchResult result;
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;  // no children left to wait for
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const WorkerExit exit = exit_of(it->second, status);
    running.erase(it);
    result.exits.push_back(exit);
    if (exit.status != 0 && result.first_failed_rank < 0) {
      result.first_failed_rank = exit.local_rank;
      result.exit_code = exit.status;
      stop_all(running, grace);  // the others would wait forever in their next collective
      for (const auto& [other_pid, other_rank] : running) result.exits.push_back({other_rank, 128 + SIGTERM, true});
      running.clear();
    }
  }
  return result;
}

std::vector<std::string> strip_launcher_flags(const std::vector<std::string>& argv) {
  static const char* flags[] = {"--nproc-per-node", "--nnodes", "--node-rank", "--master-addr", "--master-port"};
  std::vector<std::string> out;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    bool skipped = false;
    for (const char* flag : flags) {
      const std::string f(flag);
      if (argv[i] == f) {
        ++i;  // and its value
        skipped = true;
        break;
      }
      if (argv[i].rfind(f + "=", 0) == 0) {
        skipped = true;
        break;
      }
    }
    if (!skipped) out.push_back(argv[i]);
  }
  return out;
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  if (!in) throw IoError("cannot read /proc/self/cmdline to start the workers");
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::string current;
  for (char c : all) {
    if (c == '\0') {
      argv.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) argv.push_back(current);
  std::error_code error;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error || argv.empty()) throw IoError("cannot find this program's own path (/proc/self/exe) to start the workers");
  argv[0] = exe.string();
  return argv;
}

}  // namespace sublet::distributed
