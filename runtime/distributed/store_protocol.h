#pragma once
// The wire format of the rendezvous store (tcp_store.h), as pure functions over bytes so that the
// parser can be fuzzed (fuzz/fuzz_store_protocol.cpp) without sockets or threads.
//
// Every message is one frame:  u32 body_length (little endian) | u8 opcode | payload
// with payload fields written as
//   u32  little-endian unsigned            str  u32 length, then that many bytes
//   i64  little-endian two's complement    list u32 count, then that many str
//
//   request            payload                                 answered by
//   Hello   (1)        magic "SBLT", u32 version, str token    Ok, or Error and a closed connection
//   Set     (2)        str key, str value                      Ok, or Error (store full)
//   Get     (3)        str key, u32 timeout_ms                 Value, or Timeout [key]
//   Wait    (4)        list keys, u32 timeout_ms               Ok, or Timeout [missing keys]
//   Add     (5)        str key, i64 delta                      Count, or Error (not a counter)
//   response           payload
//   Ok      (64)       (none)
//   Value   (65)       str value
//   Count   (66)       i64 value
//   Timeout (67)       list keys (those still missing)
//   Error   (68)       str message
//
// The store listens on a network port, so the request parser treats every byte as untrusted:
// the length field is checked against the limit before any body is buffered, every field
// against its own bound, and a frame must be consumed exactly (no trailing bytes). Each
// message has one encoding, so parse(encode(m)) == m and encode(parse(bytes)) == bytes.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace sublet::distributed::protocol {

inline constexpr std::uint32_t kProtocolVersion = 1;
inline constexpr char kHelloMagic[4] = {'S', 'B', 'L', 'T'};
inline constexpr std::size_t kLengthFieldBytes = 4;

// Bounds of the store: keys name things ("sublet/nccl_id"), values carry small blobs (a NCCL
// unique id is 128 bytes); the limits leave room without letting one client exhaust memory.
inline constexpr std::size_t kMaxKeyBytes = 4 * 1024;
inline constexpr std::size_t kMaxValueBytes = 1024 * 1024;
inline constexpr std::size_t kMaxTokenBytes = 256;
// A Wait on every rank's key of a large job fits: 65536 keys of up to ~12 bytes each.
inline constexpr std::size_t kMaxKeysPerMessage = 65536;
// The largest frame a client may send once admitted: a Set of the largest key and value.
inline constexpr std::size_t kMaxFrameBytes = 1 + 4 + kMaxKeyBytes + 4 + kMaxValueBytes;
// Before the token is checked only a Hello is acceptable, so nothing larger is buffered.
inline constexpr std::size_t kMaxHelloFrameBytes = 1 + sizeof(kHelloMagic) + 4 + 4 + kMaxTokenBytes;

enum class Opcode : std::uint8_t {
  Hello = 1,
  Set = 2,
  Get = 3,
  Wait = 4,
  Add = 5,
  Ok = 64,
  Value = 65,
  Count = 66,
  Timeout = 67,
  Error = 68,
};
const char* opcode_name(Opcode op);

// One flat struct per direction: each opcode uses the fields its row above names, the others
// stay empty (which keeps the parser and encoder a switch each, with no variant plumbing).
struct Request {
  Opcode op = Opcode::Hello;
  std::uint32_t version = 0;      // Hello
  std::string token;              // Hello
  std::string key;                // Set, Get, Add
  std::string value;              // Set (bytes, not text)
  std::vector<std::string> keys;  // Wait
  std::uint32_t timeout_ms = 0;   // Get, Wait
  std::int64_t delta = 0;         // Add
  bool operator==(const Request&) const = default;

  static Request hello(std::string token);
  static Request set(std::string key, std::string value);
  static Request get(std::string key, std::uint32_t timeout_ms);
  static Request wait(std::vector<std::string> keys, std::uint32_t timeout_ms);
  static Request add(std::string key, std::int64_t delta);
};

struct Response {
  Opcode op = Opcode::Ok;
  std::string value;              // Value (bytes), Error (message text)
  std::int64_t count = 0;         // Count
  std::vector<std::string> keys;  // Timeout
  bool operator==(const Response&) const = default;

  static Response ok();
  static Response value_of(std::string value);
  static Response count_of(std::int64_t count);
  static Response timeout(std::vector<std::string> missing_keys);
  static Response error(std::string message);
};

// What one call found at the front of a byte stream.
enum class ParseStatus {
  Incomplete,  // a valid prefix; read more bytes and call again
  Complete,    // one message parsed; `consumed` bytes belong to it
  Malformed,   // not a valid message: the connection must be closed (`error` says why)
};

struct ParseLimits {
  std::size_t max_frame_bytes = kMaxFrameBytes;
};

template <typename Message>
struct ParseResult {
  ParseStatus status = ParseStatus::Incomplete;
  std::size_t consumed = 0;
  Message message{};
  std::string error;
};

// Parses the first message of `bytes` (which may hold more than one, or only part of one).
// Never throws for any input; allocates at most what the frame's checked length allows.
ParseResult<Request> parse_request(std::span<const std::uint8_t> bytes, const ParseLimits& limits = {});
ParseResult<Response> parse_response(std::span<const std::uint8_t> bytes, const ParseLimits& limits = {});

// The frame of a message, length field included. Throws ValueError for a message the parser
// would refuse (a key over kMaxKeyBytes, an empty key, ...), so a client fails before sending.
std::vector<std::uint8_t> encode_request(const Request& request);
std::vector<std::uint8_t> encode_response(const Response& response);

// Keys appear in log lines and error messages: printable ASCII only, 1..kMaxKeyBytes bytes.
bool is_valid_key(std::string_view key);

}  // namespace sublet::distributed::protocol
