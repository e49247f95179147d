#include "runtime/distributed/store_protocol.h"

#include <cstring>
#include <string_view>

#include "core/errors.h"

namespace sublet::distributed::protocol {
namespace {

// Reads fields from one frame's body; the first failed read latches `error`, and every later
// read is a no-op, so the parsers read all fields and check once at the end.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> body) : body_(body) {}

  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  bool at_end() const { return position_ == body_.size(); }
  std::size_t remaining() const { return body_.size() - position_; }

  std::uint32_t u32(const char* field) {
    std::uint32_t value = 0;
    if (!take(4, field)) return 0;
    for (int i = 3; i >= 0; --i) value = (value << 8) | body_[position_ - 4 + static_cast<std::size_t>(i)];
    return value;
  }

  std::int64_t i64(const char* field) {
    std::uint64_t value = 0;
    if (!take(8, field)) return 0;
    for (int i = 7; i >= 0; --i) value = (value << 8) | body_[position_ - 8 + static_cast<std::size_t>(i)];
    return static_cast<std::int64_t>(value);
  }

  // A length-prefixed string of at most `max_bytes`, checked before it is copied.
  std::string str(const char* field, std::size_t max_bytes) {
    const std::uint32_t length = u32(field);
    if (failed()) return {};
    if (length > max_bytes) {
      fail(std::string(field) + " of " + std::to_string(length) + " bytes exceeds the limit of " +
           std::to_string(max_bytes));
      return {};
    }
    if (!take(length, field)) return {};
    return std::string(reinterpret_cast<const char*>(body_.data() + position_ - length), length);
  }

  std::string key(const char* field) {
    std::string k = str(field, kMaxKeyBytes);
    if (!failed() && !is_valid_key(k)) fail(std::string(field) + " is empty or not printable ASCII");
    return k;
  }

  std::vector<std::string> key_list(const char* field) {
    const std::uint32_t count = u32(field);
    if (failed()) return {};
    // Each key takes at least 5 bytes (length + one byte): a count the body cannot hold is
    // refused before reserving anything for it.
    if (count > kMaxKeysPerMessage || count > remaining() / 5) {
      fail(std::string(field) + " count " + std::to_string(count) + " exceeds what the frame can hold");
      return {};
    }
    std::vector<std::string> keys;
    keys.reserve(count);
    for (std::uint32_t i = 0; i < count && !failed(); ++i) keys.push_back(key(field));
    return keys;
  }

  void fail(std::string reason) {
    if (error_.empty()) error_ = std::move(reason);
  }

 private:
  bool take(std::size_t n, const char* field) {
    if (failed()) return false;
    if (remaining() < n) {
      fail(std::string("frame ends inside ") + field);
      return false;
    }
    position_ += n;
    return true;
  }

  std::span<const std::uint8_t> body_;
  std::size_t position_ = 0;
  std::string error_;
};

class Writer {
 public:
  explicit Writer(Opcode op) {
    bytes_.resize(kLengthFieldBytes);
    bytes_.push_back(static_cast<std::uint8_t>(op));
  }
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
  void i64(std::int64_t v) {
    const auto u = static_cast<std::uint64_t>(v);
    for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<std::uint8_t>(u >> (8 * i)));
  }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    bytes_.insert(bytes_.end(), s.begin(), s.end());
  }
  void raw(const char* data, std::size_t n) { bytes_.insert(bytes_.end(), data, data + n); }
  std::vector<std::uint8_t> finish() {
    const std::size_t body = bytes_.size() - kLengthFieldBytes;
    for (std::size_t i = 0; i < 4; ++i) bytes_[i] = static_cast<std::uint8_t>(body >> (8 * i));
    return std::move(bytes_);
  }

 private:
  std::vector<std::uint8_t> bytes_;
};

// Splits off the frame at the front of `bytes`: Incomplete, Malformed (bad length), or Complete
// with `body` set. The length is judged before the body has arrived, so a peer announcing a
// gigabyte is refused after 4 bytes instead of after the server has buffered them.
template <typename Message>
bool split_frame(std::span<const std::uint8_t> bytes, const ParseLimits& limits, ParseResult<Message>& result,
                 std::span<const std::uint8_t>& body) {
  if (bytes.size() < kLengthFieldBytes) return false;
  const std::uint32_t length = static_cast<std::uint32_t>(bytes[0]) | (static_cast<std::uint32_t>(bytes[1]) << 8) |
                               (static_cast<std::uint32_t>(bytes[2]) << 16) |
                               (static_cast<std::uint32_t>(bytes[3]) << 24);
  if (length == 0) {
    result.status = ParseStatus::Malformed;
    result.error = "empty frame (no opcode)";
    return false;
  }
  if (length > limits.max_frame_bytes) {
    result.status = ParseStatus::Malformed;
    result.error = "frame of " + std::to_string(length) + " bytes exceeds the limit of " +
                   std::to_string(limits.max_frame_bytes) + " (not a sublet store client?)";
    return false;
  }
  if (bytes.size() - kLengthFieldBytes < length) return false;
  body = bytes.subspan(kLengthFieldBytes, length);
  result.consumed = kLengthFieldBytes + length;
  return true;
}

template <typename Message>
void finish(Reader& reader, ParseResult<Message>& result) {
  if (!reader.failed() && !reader.at_end()) {
    reader.fail(std::to_string(reader.remaining()) + " unexpected bytes after the " +
                opcode_name(result.message.op) + " message");
  }
  if (reader.failed()) {
    result.status = ParseStatus::Malformed;
    result.error = std::string(opcode_name(result.message.op)) + ": " + reader.error();
    result.consumed = 0;
    result.message = {};
  } else {
    result.status = ParseStatus::Complete;
  }
}

}  // namespace

Request Request::hello(std::string token) {
  Request r;
  r.op = Opcode::Hello;
  r.version = kProtocolVersion;
  r.token = std::move(token);
  return r;
}
Request Request::set(std::string key, std::string value) {
  Request r;
  r.op = Opcode::Set;
  r.key = std::move(key);
  r.value = std::move(value);
  return r;
}
Request Request::get(std::string key, std::uint32_t timeout_ms) {
  Request r;
  r.op = Opcode::Get;
  r.key = std::move(key);
  r.timeout_ms = timeout_ms;
  return r;
}
Request Request::wait(std::vector<std::string> keys, std::uint32_t timeout_ms) {
  Request r;
  r.op = Opcode::Wait;
  r.keys = std::move(keys);
  r.timeout_ms = timeout_ms;
  return r;
}
Request Request::add(std::string key, std::int64_t delta) {
  Request r;
  r.op = Opcode::Add;
  r.key = std::move(key);
  r.delta = delta;
  return r;
}

Response Response::ok() { return Response{}; }
Response Response::value_of(std::string value) {
  Response r;
  r.op = Opcode::Value;
  r.value = std::move(value);
  return r;
}
Response Response::count_of(std::int64_t count) {
  Response r;
  r.op = Opcode::Count;
  r.count = count;
  return r;
}
Response Response::timeout(std::vector<std::string> missing_keys) {
  Response r;
  r.op = Opcode::Timeout;
  r.keys = std::move(missing_keys);
  return r;
}
Response Response::error(std::string message) {
  Response r;
  r.op = Opcode::Error;
  r.value = std::move(message);
  return r;
}

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::Hello: return "Hello";
    case Opcode::Set: return "Set";
    case Opcode::Get: return "Get";
    case Opcode::Wait: return "Wait";
    case Opcode::Add: return "Add";
    case Opcode::Ok: return "Ok";
    case Opcode::Value: return "Value";
    case Opcode::Count: return "Count";
    case Opcode::Timeout: return "Timeout";
    case Opcode::Error: return "Error";
  }
  return "unknown";
}

bool is_valid_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeyBytes) return false;
  for (const char c : key) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

ParseResult<Request> parse_request(std::span<const std::uint8_t> bytes, const ParseLimits& limits) {
  ParseResult<Request> result;
  std::span<const std::uint8_t> body;
  if (!split_frame(bytes, limits, result, body)) return result;
  Reader reader(body.subspan(1));
  Request& m = result.message;
  m.op = static_cast<Opcode>(body[0]);
  switch (m.op) {
    case Opcode::Hello: {
      if (reader.remaining() < sizeof(kHelloMagic) ||
          std::memcmp(body.data() + 1, kHelloMagic, sizeof(kHelloMagic)) != 0) {
        reader.fail("missing the protocol magic (not a sublet store client?)");
        break;
      }
      reader.u32("magic");  // the four bytes just compared
      m.version = reader.u32("version");
      m.token = reader.str("token", kMaxTokenBytes);
      break;
    }
    case Opcode::Set:
      m.key = reader.key("key");
      m.value = reader.str("value", kMaxValueBytes);
      break;
    case Opcode::Get:
      m.key = reader.key("key");
      m.timeout_ms = reader.u32("timeout");
      break;
    case Opcode::Wait:
      m.keys = reader.key_list("keys");
      m.timeout_ms = reader.u32("timeout");
      break;
    case Opcode::Add:
      m.key = reader.key("key");
      m.delta = reader.i64("delta");
      break;
    default:
      result.status = ParseStatus::Malformed;
      result.consumed = 0;
      result.message = {};
      result.error = "unknown request opcode " + std::to_string(static_cast<int>(body[0]));
      return result;
  }
  finish(reader, result);
  return result;
}

ParseResult<Response> parse_response(std::span<const std::uint8_t> bytes, const ParseLimits& limits) {
  ParseResult<Response> result;
  std::span<const std::uint8_t> body;
  if (!split_frame(bytes, limits, result, body)) return result;
  Reader reader(body.subspan(1));
  Response& m = result.message;
  m.op = static_cast<Opcode>(body[0]);
  switch (m.op) {
    case Opcode::Ok: break;
    case Opcode::Value:
    case Opcode::Error: m.value = reader.str("value", kMaxValueBytes); break;
    case Opcode::Count: m.count = reader.i64("count"); break;
    case Opcode::Timeout: m.keys = reader.key_list("keys"); break;
    default:
      result.status = ParseStatus::Malformed;
      result.consumed = 0;
      result.message = {};
      result.error = "unknown response opcode " + std::to_string(static_cast<int>(body[0]));
      return result;
  }
  finish(reader, result);
  return result;
}

namespace {
void check_key(std::string_view key, const char* what) {
  if (!is_valid_key(key)) {
    throw ValueError(std::string("store: ") + what + " key must be 1.." + std::to_string(kMaxKeyBytes) +
                     " bytes of printable ASCII, got " + std::to_string(key.size()) + " bytes");
  }
}
void check_size(std::size_t size, std::size_t limit, const char* what) {
  if (size > limit) {
    throw ValueError(std::string("store: ") + what + " of " + std::to_string(size) + " bytes exceeds the limit of " +
                     std::to_string(limit));
  }
}
// `fixed_bytes`: the opcode and the fields besides the list (Wait's timeout).
void check_keys(const std::vector<std::string>& keys, std::size_t fixed_bytes, const char* what) {
  check_size(keys.size(), kMaxKeysPerMessage, "key count");
  std::size_t frame = fixed_bytes + 4;
  for (const auto& key : keys) {
    check_key(key, what);
    frame += 4 + key.size();
  }
  check_size(frame, kMaxFrameBytes, "message");
}
}  // namespace

std::vector<std::uint8_t> encode_request(const Request& m) {
  Writer w(m.op);
  switch (m.op) {
    case Opcode::Hello:
      check_size(m.token.size(), kMaxTokenBytes, "token");
      w.raw(kHelloMagic, sizeof(kHelloMagic));
      w.u32(m.version);
      w.str(m.token);
      break;
    case Opcode::Set:
      check_key(m.key, "Set");
      check_size(m.value.size(), kMaxValueBytes, "value");
      w.str(m.key);
      w.str(m.value);
      break;
    case Opcode::Get:
      check_key(m.key, "Get");
      w.str(m.key);
      w.u32(m.timeout_ms);
      break;
    case Opcode::Wait:
      check_keys(m.keys, 1 + 4, "Wait");
      w.u32(static_cast<std::uint32_t>(m.keys.size()));
      for (const auto& key : m.keys) w.str(key);
      w.u32(m.timeout_ms);
      break;
    case Opcode::Add:
      check_key(m.key, "Add");
      w.str(m.key);
      w.i64(m.delta);
      break;
    default:
      throw ValueError(std::string("store: ") + opcode_name(m.op) + " is not a request");
  }
  return w.finish();
}

std::vector<std::uint8_t> encode_response(const Response& m) {
  Writer w(m.op);
  switch (m.op) {
    case Opcode::Ok: break;
    case Opcode::Value:
    case Opcode::Error:
      check_size(m.value.size(), kMaxValueBytes, "value");
      w.str(m.value);
      break;
    case Opcode::Count: w.i64(m.count); break;
    case Opcode::Timeout:
      check_keys(m.keys, 1, "Timeout");
      w.u32(static_cast<std::uint32_t>(m.keys.size()));
      for (const auto& key : m.keys) w.str(key);
      break;
    default:
      throw ValueError(std::string("store: ") + opcode_name(m.op) + " is not a response");
  }
  return w.finish();
}

}  // namespace sublet::distributed::protocol
