// The rendezvous store on loopback with well-behaved clients: set/get/wait/add, timeouts with
// the key and duration in the message, barriers, missing ranks, listening and connecting
// errors, and TcpStore put together from a LaunchEnv. Hostile clients: test_tcp_store_security.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "core/errors.h"
#include "runtime/distributed/store_socket.h"
#include "store_test_support.h"

namespace {

using namespace std::chrono_literals;
using sublet::DistributedError;
using namespace sublet::distributed;
using namespace sublet::distributed::testing;

// The message of the DistributedError `f` throws, or a failure if it throws none.
template <typename F>
std::string distributed_error(F&& f) {
  try {
    f();
  } catch (const DistributedError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no DistributedError";
  return "";
}

TEST(TcpStore, SetThenGetReturnsTheBytesAndSetOverwrites) {
  LoopbackStore store;
  auto client = store.client();
  std::string binary(256, '\0');
  for (int i = 0; i < 256; ++i) binary[static_cast<std::size_t>(i)] = static_cast<char>(i);
  client->set("sublet/nccl_id", binary);
  EXPECT_EQ(client->get("sublet/nccl_id"), binary);
  client->set("sublet/nccl_id", "second");
  EXPECT_EQ(store.client()->get("sublet/nccl_id"), "second");  // seen by another client too
  client->set("empty", "");
  EXPECT_EQ(client->get("empty"), "");
}

TEST(TcpStore, GetBlocksUntilAnotherClientSetsTheKey) {
  LoopbackStore store;
  auto reader = store.client();
  auto writer = store.client();
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    writer->set("late", "value");
  });
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(reader->get("late", 5s), "value");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 90ms);
  later.join();
}

TEST(TcpStore, GetTimesOutNamingTheKeyAndTheWaitAndTheClientStaysUsable) {
  LoopbackStore store;
  auto client = store.client();
  const auto start = std::chrono::steady_clock::now();
  const std::string message = distributed_error([&] { client->get("never/set", 200ms); });
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_NE(message.find("get('never/set') timed out after 200 ms"), std::string::npos) << message;
  EXPECT_GE(waited, 190ms);
  EXPECT_LT(waited, 3s);
  client->set("after", "ok");  // the server answered the timeout, so the connection is in step
  EXPECT_EQ(client->get("after"), "ok");
}

TEST(TcpStore, WaitReturnsOnceAllKeysExistAndNamesTheMissingOnTimeout) {
  LoopbackStore store;
  auto client = store.client();
  client->set("a", "1");
  std::thread later([writer = store.client()] {
    std::this_thread::sleep_for(50ms);
    writer->set("b", "2");
  });
  client->wait({"a", "b"}, 5s);
  later.join();
  const std::string message = distributed_error([&] { client->wait({"a", "c", "b", "d"}, 100ms); });
  EXPECT_NE(message.find("2 of 4 keys still missing: c, d"), std::string::npos) << message;
  EXPECT_NE(message.find("100 ms"), std::string::npos) << message;
}

TEST(TcpStore, AddCountsAcrossClientsAndRefusesNonCounters) {
  LoopbackStore store;
  constexpr int kThreads = 4;
  constexpr int kAdds = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([client = store.client()] {
      for (int i = 0; i < kAdds; ++i) client->add("counter", 1);
    });
  }
  for (auto& t : threads) t.join();
  auto client = store.client();
  EXPECT_EQ(client->add("counter", 0), kThreads * kAdds);
  EXPECT_EQ(client->get("counter"), std::to_string(kThreads * kAdds));
  EXPECT_EQ(client->add("fresh", -3), -3);
  client->set("text", "not a number");
  EXPECT_NE(distributed_error([&] { client->add("text", 1); }).find("not a counter"), std::string::npos);
  client->set("big", std::to_string(INT64_MAX));
  EXPECT_NE(distributed_error([&] { client->add("big", 1); }).find("overflow"), std::string::npos);
  EXPECT_EQ(client->add("counter", 1), kThreads * kAdds + 1);  // still usable after refusals
}

TEST(TcpStore, BarrierReleasesAllRanksTogetherRepeatedly) {
  LoopbackStore store;
  constexpr int kWorld = 4;
  std::atomic<int> entered{0};
  std::atomic<bool> early_exit{false};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, client = store.client()] {
      for (int round = 1; round <= 3; ++round) {
        entered.fetch_add(1);
        client->barrier(kWorld, 5s);
        if (entered.load() < round * kWorld) early_exit = true;  // left before everyone entered
      }
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_FALSE(early_exit.load());
  EXPECT_EQ(entered.load(), 3 * kWorld);
}

TEST(TcpStore, BarrierTimeoutSaysHowManyArrived) {
  LoopbackStore store;
  std::thread other([client = store.client()] { EXPECT_THROW(client->barrier(3, 300ms), DistributedError); });
  auto client = store.client();
  const std::string message = distributed_error([&] { client->barrier(3, 300ms); });
  other.join();
  EXPECT_NE(message.find("2 of 3 ranks arrived"), std::string::npos) << message;
}

TEST(TcpStore, WaitForRanksNamesTheRanksThatNeverJoined) {
  LoopbackStore store;
  auto client = store.client();
  for (int rank : {0, 1, 3}) store.client()->announce_rank(rank);
  const std::string message = distributed_error([&] { client->wait_for_ranks(5, 200ms); });
  EXPECT_NE(message.find("2 of 5 ranks did not join within 200 ms: ranks 2, 4"), std::string::npos) << message;
  store.client()->announce_rank(2);
  store.client()->announce_rank(4);
  client->wait_for_ranks(5, 1s);
}

TEST(TcpStore, PortInUseNamesAddressAndPort) {
  LoopbackStore first;
  const std::uint16_t port = first.server->port();
  const std::string message = distributed_error([&] {
    StoreServer second({.host = "127.0.0.1", .port = port, .token = kToken, .log = nullptr});
  });
  EXPECT_NE(message.find("cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos) << message;
  EXPECT_NE(message.find("already in use"), std::string::npos) << message;
}

TEST(TcpStore, MasterAddressThatDoesNotResolveIsNamed) {
  const std::string server_message = distributed_error([] {
    StoreServer server({.host = "no-such-host.invalid", .port = 0, .token = kToken, .log = nullptr});
  });
  EXPECT_NE(server_message.find("--master-addr 'no-such-host.invalid' does not resolve"), std::string::npos)
      << server_message;
  const std::string client_message = distributed_error([] {
    StoreClient client({.host = "no-such-host.invalid", .port = 29500, .token = kToken, .connect_timeout = 1s});
  });
  EXPECT_NE(client_message.find("'no-such-host.invalid' does not resolve"), std::string::npos) << client_message;
}

TEST(TcpStore, AddressOfAnotherMachineIsRefusedForListening) {
  // 192.0.2.1 is TEST-NET-1: never an address of this machine.
  std::string message;
  try {
    StoreServer server({.host = "192.0.2.1", .port = 0, .token = kToken, .log = nullptr});
    GTEST_SKIP() << "this host lets sockets bind non-local addresses (net.ipv4.ip_nonlocal_bind)";
  } catch (const DistributedError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("192.0.2.1 is not an address of this machine"), std::string::npos) << message;
}

TEST(TcpStore, ClientThatCannotConnectInTimeSaysWhereAndWhy) {
  const std::uint16_t port = unused_port();
  const auto start = std::chrono::steady_clock::now();
  const std::string message = distributed_error([port] {
    StoreClient client({.host = "127.0.0.1", .port = port, .token = kToken, .connect_timeout = 300ms});
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_NE(message.find("could not connect to 127.0.0.1:" + std::to_string(port) + " within 300 ms"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Connection refused"), std::string::npos) << message;
}

TEST(TcpStore, ClientWaitsForAServerThatStartsLater) {
  const std::uint16_t port = unused_port();
  std::unique_ptr<StoreServer> server;
  std::thread rank0([&] {
    std::this_thread::sleep_for(200ms);
    server = std::make_unique<StoreServer>(
        StoreServerOptions{.host = "127.0.0.1", .port = port, .token = kToken, .log = nullptr});
  });
  StoreClient client({.host = "127.0.0.1", .port = port, .token = kToken, .connect_timeout = 10s});
  rank0.join();
  client.set("k", "v");
  EXPECT_EQ(client.get("k"), "v");
}

TEST(TcpStore, FullStoreRefusesTheSetAndKeepsServing) {
  StoreServerOptions options;
  options.max_store_bytes = 4096;
  LoopbackStore store(options);
  auto client = store.client();
  client->set("small", "x");
  const std::string message = distributed_error([&] { client->set("large", std::string(8192, 'v')); });
  EXPECT_NE(message.find("store full"), std::string::npos) << message;
  client->set("small2", "y");
  EXPECT_EQ(client->get("small"), "x");
}

TEST(TcpStore, ServerGoingAwayEndsAWaitingGetWithAClearError) {
  auto store = std::make_unique<LoopbackStore>();
  auto client = store->client(30s);
  std::thread stop([&] {
    std::this_thread::sleep_for(100ms);
    store.reset();
  });
  const std::string message = distributed_error([&] { client->get("never", 20s); });
  stop.join();
  EXPECT_NE(message.find("closed the connection (did rank 0 exit?)"), std::string::npos) << message;
  // Unusable from now on, and says why.
  EXPECT_NE(distributed_error([&] { client->set("k", "v"); }).find("earlier failure"), std::string::npos);
}

TEST(TcpStore, WorkersFromLaunchEnvRendezvousAndShareAValue) {
  constexpr int kWorld = 3;
  LaunchEnv env{.rank = 0, .local_rank = 0, .world_size = kWorld, .local_world_size = kWorld,
                .master_addr = "127.0.0.1", .master_port = 0, .store_token = kToken};
  CapturedLog log;
  TcpStore rank0(env, {.timeout = 10s, .log = log.logger()});
  ASSERT_NE(rank0.server(), nullptr);
  std::vector<std::thread> others;
  std::vector<std::string> seen(kWorld);
  for (int r = 1; r < kWorld; ++r) {
    others.emplace_back([&, r] {
      LaunchEnv mine = env;
      mine.rank = mine.local_rank = r;
      mine.master_port = rank0.server()->port();
      TcpStore store(mine, {.timeout = 10s});
      EXPECT_EQ(store.server(), nullptr);
      store.rendezvous();
      seen[static_cast<std::size_t>(r)] = store.client().get("sublet/nccl_id");
      store.barrier();  // rank 0 must not stop serving before everyone has read
    });
  }
  rank0.rendezvous();
  rank0.client().set("sublet/nccl_id", "unique-id-bytes");
  rank0.barrier();
  for (auto& t : others) t.join();
  EXPECT_EQ(seen[1], "unique-id-bytes");
  EXPECT_EQ(seen[2], "unique-id-bytes");
  EXPECT_TRUE(log.lines().empty()) << log.lines().front();  // nothing refused
}

TEST(TcpStore, SixtyFourRanksRendezvousAndPassTwoBarriers) {
  // Every rank waits on every other's key at once: the server's wait bookkeeping and its poll
  // loop over many connections, beyond the few ranks of the other tests.
  constexpr int kWorld = 64;
  LoopbackStore store;
  std::atomic<int> done{0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      auto client = store.client();
      client->announce_rank(r);
      client->wait_for_ranks(kWorld, 20s);
      client->barrier(kWorld, 20s);
      client->barrier(kWorld, 20s);
      done.fetch_add(1);
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(done.load(), kWorld);
  EXPECT_TRUE(store.log.lines().empty());
}

TEST(TcpStore, WorksOverIpv6Loopback) {
  std::unique_ptr<StoreServer> server;
  try {
    server = std::make_unique<StoreServer>(StoreServerOptions{.host = "::1", .port = 0, .token = kToken, .log = nullptr});
  } catch (const DistributedError& e) {
    GTEST_SKIP() << "no IPv6 loopback here: " << e.what();
  }
  StoreClient client({.host = "::1", .port = server->port(), .token = kToken, .connect_timeout = 5s});
  client.set("k", "v6");
  EXPECT_EQ(client.get("k"), "v6");
  EXPECT_EQ(client.endpoint(), "[::1]:" + std::to_string(server->port()));
}

TEST(TcpStore, DurationsInMessagesReadNaturally) {
  using sublet::distributed::detail::describe_duration;
  EXPECT_EQ(describe_duration(250ms), "250 ms");
  EXPECT_EQ(describe_duration(1500ms), "1.5 s");
  EXPECT_EQ(describe_duration(30s), "30 s");
  EXPECT_EQ(describe_duration(300s), "5 min");
}

TEST(TcpStore, SingleRankWithoutATokenMakesItsOwn) {
  const LaunchEnv env{.rank = 0, .local_rank = 0, .world_size = 1, .local_world_size = 1,
                      .master_addr = "127.0.0.1", .master_port = 0, .store_token = ""};
  TcpStore store(env, {.timeout = 5s});
  store.rendezvous();
  store.barrier();
  EXPECT_EQ(store.client().add("steps", 2), 2);
}

}  // namespace
