// The launcher of `sublet train --nproc-per-node N`: each worker gets its rank's variables, a
// failing worker stops the others (a dead rank must not leave its peers waiting in a
// collective), and the launcher's own flags are not passed on.
#include <gtest/gtest.h>

#include <chrono>

#include "core/errors.h"
#include "runtime/distributed/worker_launcher.h"

using namespace sublet::distributed;

namespace {

LauncherConfig two_workers() {
  LauncherConfig config;
  config.nproc_per_node = 2;
  config.master_port = 29511;
  config.store_token = "0123456789abcdef0123456789abcdef";
  return config;
}

}  // namespace

TEST(WorkerLauncher, EachWorkerSeesItsRank) {
  const auto result = run_workers(
      two_workers(), {"/bin/sh", "-c",
                      "[ \"$RANK\" = \"$LOCAL_RANK\" ] && [ \"$WORLD_SIZE\" = 2 ] && [ \"$LOCAL_WORLD_SIZE\" = 2 ] && "
                      "[ \"$MASTER_PORT\" = 29511 ] && [ -n \"$SUBLET_STORE_TOKEN\" ] || exit 7"});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.first_failed_rank, -1);
  ASSERT_EQ(result.exits.size(), 2u);
  for (const WorkerExit& e : result.exits) EXPECT_EQ(e.status, 0) << "worker " << e.local_rank;
}

TEST(WorkerLauncher, AFailingWorkerStopsTheOthersAtOnce) {
  const auto started = std::chrono::steady_clock::now();
  // `exec`: the sleeper is the worker process itself. A shell's child would outlive the shell's
  // SIGTERM and hold ctest's output pipe open for its 60 s (sublet's workers have no children).
  const auto result = run_workers(two_workers(), {"/bin/sh", "-c", "[ \"$RANK\" = 1 ] && exit 3; exec sleep 60"},
                                  std::chrono::milliseconds(2000));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 10.0) << "the sleeping worker was not stopped";
  EXPECT_EQ(result.exit_code, 3);
  EXPECT_EQ(result.first_failed_rank, 1);
  ASSERT_EQ(result.exits.size(), 2u);
  EXPECT_TRUE(result.exits[1].by_signal);
}

TEST(WorkerLauncher, AProgramThatCannotStartIsAClearError) {
  try {
    run_workers(two_workers(), {"/nonexistent/sublet"});
    FAIL() << "expected DistributedError";
  } catch (const sublet::DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/sublet"), std::string::npos) << e.what();
  }
  EXPECT_THROW(run_workers(two_workers(), {}), sublet::ValueError);
}

TEST(WorkerLauncher, LauncherFlagsAreNotPassedToWorkers) {
  const std::vector<std::string> argv = {"sublet", "train", "--nproc-per-node", "2", "--model", "resnet20",
                                         "--master-port=1234", "--nnodes", "1", "--node-rank=0",
                                         "--master-addr", "10.0.0.1", "--epochs", "3"};
  EXPECT_EQ(strip_launcher_flags(argv),
            (std::vector<std::string>{"sublet", "train", "--model", "resnet20", "--epochs", "3"}));
}
