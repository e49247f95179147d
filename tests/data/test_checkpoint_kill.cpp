// Killing a process in the middle of saving a checkpoint (docs/reliability.md): a child
// process overwrites the checkpoint file with a new one and is SIGKILLed at a random moment,
// many times over. After each kill the file must still load and be exactly the previous
// checkpoint or exactly the new one, never a mixture or a torn file; temporaries a killed save
// leaves behind never take the target's place, and the next save removes them.
//
// The checkpoints are written by train::save_checkpoint, the Trainer's own path (safetensors
// through io::write_atomically). The child only saves and _exits; the tensors it saves are built
// before the fork, so that it runs no kernel (no OpenMP) between fork and exit.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"
#include "train/checkpoint.h"

namespace sublet::train {
namespace {

using sublet::testing::ScratchDir;
using Clock = std::chrono::steady_clock;

constexpr int kKills = 200;

// A ResNet-sized checkpoint of about 4.5 MB: eight 3x3 conv weights and their momentum buffers.
Checkpoint make_checkpoint(std::int64_t global_step, std::uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  const Shape shape{64, 128, 3, 3};
  std::vector<float> values(64 * 128 * 3 * 3);
  Checkpoint c;
  c.identity = {.model = "resnet20", .in_channels = 3, .num_classes = 10, .optimizer = "sgd"};
  c.position.global_step = global_step;
  c.position.train_images = 1000;
  c.position.batch_size = 32;
  c.position.seed = seed;
  for (int layer = 0; layer < 8; ++layer) {
    for (float& v : values) v = normal(engine);
    c.model_state.emplace_back("layer" + std::to_string(layer) + ".conv.weight", Tensor::from_vector(values, shape));
    for (float& v : values) v = normal(engine);
    c.optimizer_state.emplace_back(std::to_string(layer) + ".momentum_buffer", Tensor::from_vector(values, shape));
  }
  return c;
}

bool same_tensors(const std::vector<std::pair<std::string, Tensor>>& loaded,
                  const std::vector<std::pair<std::string, Tensor>>& expected) {
  if (loaded.size() != expected.size()) return false;
  for (const auto& [name, tensor] : expected) {
    const auto it = std::find_if(loaded.begin(), loaded.end(), [&, wanted = name](const auto& entry) { return entry.first == wanted; });
    if (it == loaded.end() || it->second.sizes() != tensor.sizes() || it->second.nbytes() != tensor.nbytes() ||
        std::memcmp(it->second.data_ptr(), tensor.data_ptr(), tensor.nbytes()) != 0) {
      return false;
    }
  }
  return true;
}

bool is_exactly(const Checkpoint& loaded, const Checkpoint& expected) {
  return loaded.identity == expected.identity && loaded.position.global_step == expected.position.global_step &&
         loaded.position.seed == expected.position.seed && same_tensors(loaded.model_state, expected.model_state) &&
         same_tensors(loaded.optimizer_state, expected.optimizer_state);
}

// Names in `dir` other than `target`'s: temporaries of saves that did not finish.
std::vector<std::string> leftovers(const std::filesystem::path& dir, const std::filesystem::path& target) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename() != target.filename()) names.push_back(entry.path().filename().string());
  return names;
}

// The pid in a temporary's name (<target>.tmp.<pid>.<n>, core/atomic_write.cpp), or -1.
pid_t writer_of(const std::string& leftover, const std::filesystem::path& target) {
  const std::string prefix = target.filename().string() + ".tmp.";
  if (!leftover.starts_with(prefix)) return -1;
  return static_cast<pid_t>(std::stol(leftover.substr(prefix.size())));
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TEST(CheckpointKill, ASaveKilledAtAnyMomentLeavesThePreviousOrTheNewCheckpointWhole) {
  ScratchDir dir;
  const auto path = dir / "checkpoint.safetensors";
  const Checkpoint checkpoints[2] = {make_checkpoint(100, 1), make_checkpoint(200, 2)};

  // How long one save takes here, so that the kills spread over the whole of it (median of 5).
  std::vector<double> durations;
  for (int i = 0; i < 5; ++i) {
    const auto start = Clock::now();
    save_checkpoint(path, checkpoints[i % 2]);
    durations.push_back(seconds_since(start));
  }
  std::sort(durations.begin(), durations.end());
  const double save_seconds = durations[durations.size() / 2];
  save_checkpoint(path, checkpoints[0]);
  ASSERT_TRUE(is_exactly(load_checkpoint(path), checkpoints[0]));
  ASSERT_TRUE(leftovers(dir.path(), path).empty());

  std::mt19937_64 engine(20240608);
  std::uniform_real_distribution<double> kill_after(0.0, 1.2 * save_seconds);
  int current = 0;  // which checkpoint the file holds
  int kept_previous = 0, replaced = 0, killed = 0, finished = 0, killed_after_rename = 0;
  std::size_t most_leftovers = 0;
  std::vector<pid_t> writers;
  const auto started = Clock::now();
  for (int run = 0; run < kKills; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    const int next = 1 - current;
    const auto delay = std::chrono::duration<double>(kill_after(engine));
    const pid_t child = ::fork();
    ASSERT_GE(child, 0) << "fork failed: " << std::strerror(errno);
    if (child == 0) {
      try {
        save_checkpoint(path, checkpoints[next]);
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    writers.push_back(child);
    std::this_thread::sleep_for(delay);
    ::kill(child, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    const bool was_killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    ASSERT_TRUE(was_killed || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
        << "the save failed on its own (status " << status << ")";
    killed += was_killed ? 1 : 0;
    finished += was_killed ? 0 : 1;

    // The file loads, and it is one of the two checkpoints, whole.
    Checkpoint loaded;
    ASSERT_NO_THROW(loaded = load_checkpoint(path));
    if (is_exactly(loaded, checkpoints[next])) {
      ++replaced;
      killed_after_rename += was_killed ? 1 : 0;
      current = next;
    } else {
      ASSERT_TRUE(is_exactly(loaded, checkpoints[current])) << "the file is neither the previous nor the new checkpoint";
      ASSERT_TRUE(was_killed) << "a save that finished must have replaced the file";
      ++kept_previous;
    }

    // Leftovers are temporaries of these children only. A save removes the temporaries of
    // writers that died before it creates its own, so once this child has created its own
    // temporary (still there, or renamed into place), no older one may remain.
    const std::vector<std::string> names = leftovers(dir.path(), path);
    most_leftovers = std::max(most_leftovers, names.size());
    bool own_temporary = false;
    for (const std::string& name : names) {
      const pid_t writer = writer_of(name, path);
      ASSERT_NE(std::find(writers.begin(), writers.end(), writer), writers.end()) << "unexpected file " << name;
      own_temporary = own_temporary || writer == child;
    }
    if (own_temporary || current == next) {
      for (const std::string& name : names)
        EXPECT_EQ(writer_of(name, path), child) << name << " was left by an earlier killed save and not removed";
    }
  }
  const double sweep_seconds = seconds_since(started);

  // An uninterrupted save afterwards leaves the directory with the checkpoint alone.
  save_checkpoint(path, checkpoints[1 - current]);
  EXPECT_TRUE(is_exactly(load_checkpoint(path), checkpoints[1 - current]));
  EXPECT_TRUE(leftovers(dir.path(), path).empty());

  std::cout << "[ checkpoint kill ] one save " << save_seconds * 1e3 << " ms; " << kKills << " children, kill after 0-"
            << 1.2 * save_seconds * 1e3 << " ms: " << killed << " killed, " << finished
            << " finished first; file kept the previous checkpoint " << kept_previous << " times, held the new one "
            << replaced << " times (" << killed_after_rename << " of them killed after the rename); at most "
            << most_leftovers << " temporaries present at once; " << sweep_seconds << " s\n";
  EXPECT_EQ(kept_previous + replaced, kKills);
  EXPECT_GE(kept_previous, 1) << "no kill landed before the rename: the kills did not hit the middle of a save";
  EXPECT_GE(replaced, 1) << "no save ever completed";
}

}  // namespace
}  // namespace sublet::train
