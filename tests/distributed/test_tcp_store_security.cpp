// The store against clients that break the rules: no token, a wrong token, garbage, oversized
// and pipelined messages, silence, too many connections. Each must lose its connection with a
// logged reason while the server keeps serving everyone else, including a client that was
// already waiting on a key.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <thread>

#include "core/errors.h"
#include "runtime/distributed/store_protocol.h"
#include "store_test_support.h"

namespace {

using namespace std::chrono_literals;
using sublet::DistributedError;
using namespace sublet::distributed;
using namespace sublet::distributed::testing;
namespace proto = sublet::distributed::protocol;

// The server still answers a well-behaved client (a fresh one, and one connected before).
void expect_still_serving(const LoopbackStore& store, StoreClient& existing) {
  auto fresh = store.client();
  fresh->set("still/serving", "yes");
  EXPECT_EQ(existing.get("still/serving", 2s), "yes");
}

std::vector<std::uint8_t> hello(const std::string& token = kToken) {
  return proto::encode_request(proto::Request::hello(token));
}

TEST(TcpStoreSecurity, ClientWithAWrongTokenIsRefusedAndTold) {
  LoopbackStore store;
  auto good = store.client();
  std::string message;
  try {
    store.client(2s, "not-the-job-token-000");
    ADD_FAILURE() << "a wrong token was admitted";
  } catch (const DistributedError& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("refused this client: wrong store token"), std::string::npos) << message;
  EXPECT_TRUE(store.log.contains("wrong token"));
  EXPECT_GE(store.server->refused_connections(), 1u);
  expect_still_serving(store, *good);
}

TEST(TcpStoreSecurity, TokenThatIsAPrefixOrLongerIsWrong) {
  LoopbackStore store;
  for (const std::string& token : {kToken.substr(0, kToken.size() - 1), kToken + "x", std::string()}) {
    RawConnection raw(store.server->port());
    ASSERT_TRUE(raw.connected());
    raw.send_bytes(hello(token));
    EXPECT_TRUE(raw.closed_by_server()) << "token '" << token << "'";
  }
  EXPECT_EQ(store.server->refused_connections(), 3u);
}

TEST(TcpStoreSecurity, RequestWithoutATokenClosesTheConnection) {
  LoopbackStore store;
  auto good = store.client();
  RawConnection raw(store.server->port());
  ASSERT_TRUE(raw.connected());
  raw.send_bytes(proto::encode_request(proto::Request::set("sublet/nccl_id", "forged")));
  EXPECT_TRUE(raw.closed_by_server());
  EXPECT_TRUE(store.log.contains("first message was Set, not a Hello with the job's token"));
  // The forged value never reached the store.
  EXPECT_THROW(good->get("sublet/nccl_id", 50ms), DistributedError);
  expect_still_serving(store, *good);
}

TEST(TcpStoreSecurity, GarbageBytesCloseTheConnectionOnly) {
  LoopbackStore store;
  auto good = store.client();
  // A waiting client must get its answer after the garbage has been dealt with.
  std::string waited;
  std::thread waiter([&, client = store.client()] { waited = client->get("after/garbage", 5s); });
  for (const std::string& garbage : {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string("\x00\x00\x00\x00", 4),
                                     std::string("\x05\x00\x00\x00\x63zzzz", 9), std::string(3, '\xff')}) {
    RawConnection raw(store.server->port());
    ASSERT_TRUE(raw.connected());
    raw.send_text(garbage);
    if (garbage.size() >= 4) {
      EXPECT_TRUE(raw.closed_by_server()) << garbage;
    }
    // Three bytes are a valid prefix: the connection stays open until its hello deadline.
  }
  EXPECT_TRUE(store.log.contains("malformed message"));
  EXPECT_TRUE(store.log.contains("empty frame"));
  good->set("after/garbage", "served");
  waiter.join();
  EXPECT_EQ(waited, "served");
  expect_still_serving(store, *good);
}

TEST(TcpStoreSecurity, MalformedMessageFromAnAdmittedClientClosesItsConnection) {
  LoopbackStore store;
  auto good = store.client();
  RawConnection raw(store.server->port());
  ASSERT_TRUE(raw.connected());
  raw.send_bytes(hello());
  // A Get whose key has a control character.
  raw.send_bytes({10, 0, 0, 0, 3, 1, 0, 0, 0, '\n', 1, 0, 0, 0});
  EXPECT_TRUE(raw.closed_by_server());
  EXPECT_TRUE(store.log.contains("not printable ASCII"));
  expect_still_serving(store, *good);
}

TEST(TcpStoreSecurity, OversizedMessagesAreRefusedFromTheirLength) {
  LoopbackStore store;
  auto good = store.client();
  {  // Before the token: anything larger than a Hello.
    RawConnection raw(store.server->port());
    raw.send_bytes({0, 4, 0, 0, 1});  // announces 1 KiB
    EXPECT_TRUE(raw.closed_by_server());
    EXPECT_TRUE(store.log.contains("frame of 1024 bytes exceeds the limit of " +
                                   std::to_string(proto::kMaxHelloFrameBytes)));
  }
  {  // After the token: anything larger than the largest Set. Only the header is ever sent.
    RawConnection raw(store.server->port());
    raw.send_bytes(hello());
    raw.send_bytes({0, 0, 0, 64, 2});  // announces 1 GiB
    EXPECT_TRUE(raw.closed_by_server());
    EXPECT_TRUE(store.log.contains("frame of 1073741824 bytes exceeds the limit"));
  }
  EXPECT_THROW(good->set("k", std::string(proto::kMaxValueBytes + 1, 'v')), sublet::ValueError);  // refused locally
  expect_still_serving(store, *good);
}

TEST(TcpStoreSecurity, SecondRequestBeforeTheAnswerClosesTheConnection) {
  LoopbackStore store;
  auto good = store.client();
  RawConnection raw(store.server->port());
  raw.send_bytes(hello());
  raw.send_bytes(proto::encode_request(proto::Request::get("never", 10'000)));
  raw.send_bytes(proto::encode_request(proto::Request::set("x", "y")));
  EXPECT_TRUE(raw.closed_by_server());
  EXPECT_TRUE(store.log.contains("Set sent before the previous answer"));
  expect_still_serving(store, *good);
}

TEST(TcpStoreSecurity, SilentConnectionIsClosedAfterTheHelloTimeout) {
  StoreServerOptions options;
  options.hello_timeout = 200ms;
  LoopbackStore store(options);
  auto good = store.client();
  RawConnection raw(store.server->port());
  ASSERT_TRUE(raw.connected());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(raw.closed_by_server(3s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);
  EXPECT_TRUE(store.log.contains("no token presented within 200 ms"));
  expect_still_serving(store, *good);
}

TEST(TcpStoreSecurity, ConnectionsBeyondTheLimitAreClosedAtOnce) {
  StoreServerOptions options;
  options.max_connections = 2;
  LoopbackStore store(options);
  auto first = store.client();
  auto second = store.client();
  RawConnection third(store.server->port());
  EXPECT_TRUE(third.closed_by_server());
  EXPECT_TRUE(store.log.contains("already 2 connections (the limit)"));
  second.reset();  // a slot frees up once the server has seen the close
  std::this_thread::sleep_for(100ms);
  auto replacement = store.client();
  replacement->set("k", "v");
  EXPECT_EQ(first->get("k", 1s), "v");
}

TEST(TcpStoreSecurity, RunningOutOfFileDescriptorsNeitherSpinsNorStopsTheStore) {
  LoopbackStore store;
  auto good = store.client();
  // Open a dozen client sockets, leave room for a few descriptors only, then connect them all:
  // the server's accept fails with EMFILE while the listener stays readable.
  std::vector<int> crowd;
  for (int i = 0; i < 12; ++i) crowd.push_back(::socket(AF_INET, SOCK_STREAM, 0));
  // New descriptors take the lowest free number, so a limit six above the lowest free one
  // leaves exactly six (descriptors already open above it stay valid).
  const int lowest_free = ::dup(0);
  ::close(lowest_free);
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  rlimit tight = original;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free + 6);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &tight), 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(store.server->port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (const int fd : crowd) ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  const bool starved = store.log.contains("cannot accept connections");
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(500ms);
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  good->set("while/starved", "ok");  // an admitted client is still served
  for (const int fd : crowd) ::close(fd);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &original), 0);
  EXPECT_TRUE(starved);
  const auto cpu_us = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1'000'000L + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  };
  // A server spinning on accept would burn most of the 500 ms; a paused one a few retries.
  EXPECT_LT(cpu_us(after) - cpu_us(before), 100'000L);
  expect_still_serving(store, *good);
}

TEST(TcpStoreSecurity, ListensOnTheMasterAddressOnly) {
  LoopbackStore store;  // bound to 127.0.0.1
  RawConnection other_loopback(store.server->port(), "127.0.0.2");
  EXPECT_FALSE(other_loopback.connected());
  RawConnection master(store.server->port(), "127.0.0.1");
  EXPECT_TRUE(master.connected());
}

TEST(TcpStoreSecurity, ClientLeavingMidMessageIsHarmless) {
  LoopbackStore store;
  auto good = store.client();
  {
    RawConnection raw(store.server->port());
    raw.send_bytes(hello());
    auto partial = proto::encode_request(proto::Request::set("k", std::string(1000, 'v')));
    partial.resize(partial.size() / 2);
    raw.send_bytes(partial);
  }  // closed here
  expect_still_serving(store, *good);
  EXPECT_THROW(good->get("k", 50ms), DistributedError);  // the half-sent Set did not happen
}

}  // namespace
