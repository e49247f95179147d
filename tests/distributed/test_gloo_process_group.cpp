// The Gloo process group between real processes on the CPU (dist_test_worker, started with
// torchrun's variables): every collective and dtype in a world of 3, and sync batch norm over 2
// ranks against plain batch norm over the joined batch in float64. Also: a missing Gloo shim is
// a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "runtime/nn/functional.h"
#include "tests/distributed/process_support.h"
#include "tests/distributed/sync_bn_case.h"

namespace sublet {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("sublet_gloo_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir / name;
}

std::map<std::string, std::string> with_token(std::map<std::string, std::string> v) {
  v["SUBLET_STORE_TOKEN"] = "gloo-test-token-0123456789";
  return v;
}

// Starts `world` workers and returns their exit statuses (nullopt: ran past the bound).
std::vector<std::optional<int>> run_world(int world, const std::vector<std::string>& args,
                                          std::vector<testing::Child>& children,
                                          std::map<std::string, std::string> extra = {}) {
  const int port = testing::free_port();
  for (int r = 0; r < world; ++r) {
    auto variables = with_token(testing::worker_variables(r, world, port));
    for (const auto& [k, v] : extra) variables[k] = v;
    std::vector<std::string> argv = {DIST_TEST_WORKER};
    argv.insert(argv.end(), args.begin(), args.end());
    if (!args.empty() && args.front() == "sync_bn") argv.push_back(scratch("sync_bn_" + std::to_string(r) + ".txt"));
    children.push_back(testing::spawn_process(argv, variables, scratch("worker_" + std::to_string(r) + ".log")));
  }
  std::vector<std::optional<int>> statuses;
  for (const auto& child : children) statuses.push_back(testing::wait_exit(child, 120s));
  return statuses;
}

std::map<std::string, std::vector<double>> read_results(const fs::path& path) {
  std::map<std::string, std::vector<double>> results;
  std::istringstream lines(testing::read_text(path));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    double v = 0;
    while (fields >> v) results[name].push_back(v);
  }
  return results;
}

double max_relative_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double scale = 0, error = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::fmax(scale, std::fabs(want[i]));
    const double e = std::fabs(got[i] - want[i]);
    error = e > error || std::isnan(e) ? e : error;  // a NaN stays
  }
  return error / (scale > 0 ? scale : 1.0);
}

TEST(GlooProcessGroup, EveryCollectiveAndDTypeAgreesAcrossThreeProcesses) {
  std::vector<testing::Child> children;
  const auto statuses = run_world(3, {"collectives"}, children);
  for (std::size_t r = 0; r < statuses.size(); ++r) {
    EXPECT_EQ(statuses[r], std::optional<int>(0)) << "rank " << r << ":\n" << testing::read_text(children[r].log);
    EXPECT_NE(testing::read_text(children[r].log).find("collectives ok"), std::string::npos);
  }
}

TEST(GlooProcessGroup, SyncBatchNormOverTwoRanksEqualsPlainBatchNormOverTheJoinedBatch) {
  std::vector<testing::Child> children;
  const auto statuses = run_world(2, {"sync_bn"}, children);
  for (std::size_t r = 0; r < statuses.size(); ++r)
    ASSERT_EQ(statuses[r], std::optional<int>(0)) << "rank " << r << ":\n" << testing::read_text(children[r].log);

  // The reference: plain batch norm over all 8 rows in one process, the same upstream gradient.
  const testing::SyncBatchNormCase c;
  Tensor x = c.input().requires_grad_();
  Tensor weight = c.weight().requires_grad_();
  Tensor bias = c.bias().requires_grad_();
  Tensor running_mean = zeros({c.channels}, TensorOptions().dtype(DType::Float64));
  Tensor running_var = ones({c.channels}, TensorOptions().dtype(DType::Float64));
  Tensor y = nn::functional::batch_norm(x, running_mean, running_var, weight, bias, true, c.momentum, c.eps);
  (y * c.upstream()).sum().backward();

  const auto rank0 = read_results(scratch("sync_bn_0.txt"));
  const auto rank1 = read_results(scratch("sync_bn_1.txt"));
  const auto joined = [&](const std::string& name) {
    std::vector<double> all = rank0.at(name);
    all.insert(all.end(), rank1.at(name).begin(), rank1.at(name).end());
    return all;
  };
  const auto summed = [&](const std::string& name) {
    std::vector<double> total = rank0.at(name);
    for (std::size_t i = 0; i < total.size(); ++i) total[i] += rank1.at(name).at(i);
    return total;
  };
  // Relative 1e-12 in float64: the same arithmetic in another order (two-pass variance over ranks).
  const double tolerance = 1e-12;
  EXPECT_LE(max_relative_error(joined("output"), y.detach().to_vector<double>()), tolerance);
  EXPECT_LE(max_relative_error(joined("input_grad"), x.grad().to_vector<double>()), tolerance);
  // Each rank's parameter gradient is its rows' share: together they are the joined batch's.
  EXPECT_LE(max_relative_error(summed("weight_grad"), weight.grad().to_vector<double>()), tolerance);
  EXPECT_LE(max_relative_error(summed("bias_grad"), bias.grad().to_vector<double>()), tolerance);
  for (const auto* rank : {&rank0, &rank1}) {
    EXPECT_LE(max_relative_error(rank->at("running_mean"), running_mean.to_vector<double>()), tolerance);
    EXPECT_LE(max_relative_error(rank->at("running_var"), running_var.to_vector<double>()), tolerance);
  }
}

TEST(GlooProcessGroup, AMissingShimIsAClearErrorNamingWhereItLooked) {
  std::vector<testing::Child> children;
  const auto statuses =
      run_world(1, {"collectives"}, children, {{"SUBLET_GLOO_LIBRARY", "/nonexistent/libsublet_gloo.so"}});
  EXPECT_EQ(statuses[0], std::optional<int>(2));
  const std::string log = testing::read_text(children[0].log);
  EXPECT_NE(log.find("--backend gloo needs sublet's Gloo shim"), std::string::npos) << log;
  EXPECT_NE(log.find("/nonexistent/libsublet_gloo.so"), std::string::npos) << log;
  EXPECT_NE(log.find("SUBLET_GLOO_LIBRARY"), std::string::npos) << log;
}

}  // namespace
}  // namespace sublet
