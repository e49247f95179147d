#pragma once
// Real processes for the data-parallel tests: start a program with extra environment variables
// and its output in a file, wait for it with a bound, find a free loopback port. Every wait is
// bounded; a process still running at its bound is killed and reported as such.
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace sublet::testing {

struct Child {
  pid_t pid = -1;
  std::filesystem::path log;  // stdout and stderr
};

inline Child spawn_process(const std::vector<std::string>& argv, const std::map<std::string, std::string>& variables,
                           const std::filesystem::path& log) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [k, v] : variables) {
    if (v == "<unset>") {
      env.erase(k);
    } else {
      env[k] = v;
    }
  }
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> c_env, c_args;
  for (auto& s : env_strings) c_env.push_back(s.data());
  c_env.push_back(nullptr);
  std::vector<std::string> args = argv;
  for (auto& s : args) c_args.push_back(s.data());
  c_args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  Child child;
  child.log = log;
  if (posix_spawn(&child.pid, c_args[0], &actions, nullptr, c_args.data(), c_env.data()) != 0) child.pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return child;
}

// The exit status (128 + signal when killed), or nullopt when it ran past `bound` (it is then
// killed and reaped).
inline std::optional<int> wait_exit(const Child& child, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(child.pid, &status, WNOHANG);
    if (done == child.pid) return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    if (done < 0) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(child.pid, SIGKILL);
      waitpid(child.pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline bool process_exists(pid_t pid) { return kill(pid, 0) == 0; }

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A port nothing listens on right now (the kernel's choice for an ephemeral bind).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

// The variables torchrun (and sublet's launcher) give worker `rank` of a one-node job.
inline std::map<std::string, std::string> worker_variables(int rank, int world_size, int port) {
  return {{"RANK", std::to_string(rank)},
          {"LOCAL_RANK", std::to_string(rank)},
          {"WORLD_SIZE", std::to_string(world_size)},
          {"LOCAL_WORLD_SIZE", std::to_string(world_size)},
          {"GROUP_RANK", "0"},
          {"MASTER_ADDR", "127.0.0.1"},
          {"MASTER_PORT", std::to_string(port)},
          {"OMP_NUM_THREADS", "1"}};
}

}  // namespace sublet::testing
