#pragma once
// Runs the real `sublet` binary (SUBLET_BINARY, set by tests/cli/CMakeLists.txt) as a child
// process and collects how it ended: for the CLI tests that check what a user sees.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sublet::cli_test {

namespace fs = std::filesystem;

struct Outcome {
  bool exited = false;  // false: killed by a signal (or by the timeout)
  int exit_code = -1;
  int signal = 0;
  std::string out;
  std::string err;
};

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Runs SUBLET_BINARY with `args` in `cwd` (so that default paths such as data/mnist resolve
// inside the scratch folder), `env` added to this process's environment. No core files: a crash
// shows as a signal in the outcome, not as a file in the test folder. `stdin_from` (default: this
// process's) and `stdout_to` (default: a file read back into Outcome::out) redirect the streams.
inline Outcome run_sublet(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                   const fs::path& cwd, std::chrono::seconds timeout = std::chrono::seconds(180),
                   const fs::path& stdin_from = {}, const fs::path& stdout_to = {}) {
  const fs::path out_path = stdout_to.empty() ? cwd / ".stdout" : stdout_to;
  const fs::path err_path = cwd / ".stderr";
  std::vector<std::string> argv_text{SUBLET_BINARY};
  argv_text.insert(argv_text.end(), args.begin(), args.end());
  std::vector<std::string> env_text;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (!env.contains(entry.substr(0, entry.find('=')))) env_text.push_back(entry);
  }
  for (const auto& [key, value] : env) env_text.push_back(key + "=" + value);
  // Sleeping OpenMP waiters, and no re-exec of sublet to get them (see cli/main.cpp).
  if (!env.contains("OMP_WAIT_POLICY") && std::getenv("OMP_WAIT_POLICY") == nullptr)
    env_text.push_back("OMP_WAIT_POLICY=passive");
  std::vector<char*> argv, envp;
  for (auto& a : argv_text) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid == 0) {
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    if (!std::freopen(out_path.c_str(), "w", stdout) || !std::freopen(err_path.c_str(), "w", stderr)) ::_exit(126);
    if (!stdin_from.empty() && !std::freopen(stdin_from.c_str(), "r", stdin)) ::_exit(126);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  Outcome outcome;
  if (pid < 0) return outcome;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      outcome.err = "(timed out after " + std::to_string(timeout.count()) + " s)\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  outcome.exited = WIFEXITED(status);
  outcome.exit_code = outcome.exited ? WEXITSTATUS(status) : -1;
  outcome.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (stdout_to.empty()) outcome.out = read_text(out_path);
  outcome.err += read_text(err_path);
  return outcome;
}

// The non-empty lines sublet printed. Under a sanitizer build (scripts/sanitize.sh) the runtime
// adds its own "==PID==WARNING: ..." lines, e.g. for each refused 1 TiB allocation: not ours.
// A fresh folder under the system's temporary directory for one test, removed with it.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    static int counter = 0;
    path_ = fs::temp_directory_path() / (prefix + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::vector<std::string> non_empty_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos || line.starts_with("==")) continue;
    lines.push_back(line);
  }
  return lines;
}

// A command line: `base` followed by `extra`.
inline std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& extra) {
  base.insert(base.end(), extra.begin(), extra.end());
  return base;
}

// What a run printed, standard output then standard error (for failure messages).
inline std::string both(const Outcome& o) { return o.out + o.err; }

inline std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

}  // namespace sublet::cli_test
