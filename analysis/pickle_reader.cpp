// The pickle virtual machine for plain data (pickle_reader.h). It follows CPython's
// Lib/pickle.py _Unpickler: a MARK starts a new frame of the stack, and the items above it are
// reachable only by the opcode that pops that MARK. Opcode names are pickletools' names.
#include "analysis/pickle_reader.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>
#include <unordered_map>

#include "core/errors.h"

namespace sublet::memory::pickle {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int:
    case Kind::BigInt: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
  }
  return "?";
}

namespace {

// Every opcode pickletools knows, so that a refused one is named in the message.
const char* opcode_name(std::uint8_t op) {
  switch (op) {
    case '(': return "MARK";            case '.': return "STOP";           case '0': return "POP";
    case '1': return "POP_MARK";        case '2': return "DUP";            case 'F': return "FLOAT";
    case 'I': return "INT";             case 'J': return "BININT";         case 'K': return "BININT1";
    case 'L': return "LONG";            case 'M': return "BININT2";        case 'N': return "NONE";
    case 'P': return "PERSID";          case 'Q': return "BINPERSID";      case 'R': return "REDUCE";
    case 'S': return "STRING";          case 'T': return "BINSTRING";      case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";         case 'X': return "BINUNICODE";     case 'a': return "APPEND";
    case 'b': return "BUILD";           case 'c': return "GLOBAL";         case 'd': return "DICT";
    case '}': return "EMPTY_DICT";      case 'e': return "APPENDS";        case 'g': return "GET";
    case 'h': return "BINGET";          case 'i': return "INST";           case 'j': return "LONG_BINGET";
    case 'l': return "LIST";            case ']': return "EMPTY_LIST";     case 'o': return "OBJ";
    case 'p': return "PUT";             case 'q': return "BINPUT";         case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";         case 't': return "TUPLE";          case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";        case 'G': return "BINFLOAT";       case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";  case 0x80: return "PROTO";         case 0x81: return "NEWOBJ";
    case 0x82: return "EXT1";           case 0x83: return "EXT2";          case 0x84: return "EXT4";
    case 0x85: return "TUPLE1";         case 0x86: return "TUPLE2";        case 0x87: return "TUPLE3";
    case 0x88: return "NEWTRUE";        case 0x89: return "NEWFALSE";      case 0x8a: return "LONG1";
    case 0x8b: return "LONG4";          case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";      case 0x8f: return "EMPTY_SET";     case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";      case 0x92: return "NEWOBJ_EX";     case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";        case 0x95: return "FRAME";         case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

// Python writes str as UTF-8 with 'surrogatepass', so encoded surrogates (ED A0..BF xx) are
// accepted as it accepts them. Returns the offset of the first bad byte, or npos.
std::size_t first_bad_utf8(std::string_view s) {
  const auto cont = [&](std::size_t i) { return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t extra = 0;
    if (c < 0x80) extra = 0;
    else if (c >= 0xC2 && c <= 0xDF) extra = 1;
    else if (c >= 0xE0 && c <= 0xEF) extra = 2;
    else if (c >= 0xF0 && c <= 0xF4) extra = 3;
    else return i;
    if (extra > 0) {
      const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
      if ((c == 0xE0 && next < 0xA0) || (c == 0xF0 && next < 0x90) || (c == 0xF4 && next > 0x8F)) return i;
      for (std::size_t k = 1; k <= extra; ++k)
        if (!cont(i + k)) return i;
    }
    i += extra + 1;
  }
  return std::string_view::npos;
}

}  // namespace

class Parser {
 public:
  Parser(Document& doc, std::string bytes, const std::string& source, const ReadLimits& limits)
      : doc_(doc), source_(source), limits_(limits) {
    doc_.bytes_ = std::move(bytes);
    data_ = doc_.bytes_;
  }

  void run() {
    while (pos_ < data_.size()) {
      op_at_ = pos_;
      op_ = static_cast<std::uint8_t>(data_[pos_++]);
      if (step()) return;
    }
    throw IoError(fmt::format("{}: the pickle ends at offset {} without its STOP opcode (a truncated file?)", source_,
                              data_.size()));
  }

 private:
  using Index = std::uint32_t;

  // One opcode; true at STOP.
  bool step() {
    switch (op_) {
      case 0x80: {  // PROTO
        const auto version = read_uint(1);
        if (version > 5) fail(fmt::format("protocol {} is newer than the 5 this reader knows", version));
        doc_.protocol_ = static_cast<int>(version);
        return false;
      }
      case 0x95: {  // FRAME: a length prefix for buffering; the opcodes inside read as any others
        const auto length = read_uint(8);
        if (length > data_.size() - pos_) fail(fmt::format("a frame of {} bytes, but only {} follow", length, data_.size() - pos_));
        return false;
      }
      case '.': doc_.root_ = pop(); return true;
      case 'N': push(node(Kind::None)); return false;
      case 0x88: push(node(Kind::Bool, 1)); return false;
      case 0x89: push(node(Kind::Bool, 0)); return false;
      case 'J': push(node(Kind::Int, static_cast<std::uint64_t>(static_cast<std::int64_t>(static_cast<std::int32_t>(read_uint(4)))))); return false;
      case 'K': push(node(Kind::Int, read_uint(1))); return false;
      case 'M': push(node(Kind::Int, read_uint(2))); return false;
      case 0x8a: long_int(read_uint(1)); return false;
      case 0x8b: long_int(signed_length(4)); return false;
      case 'G': {
        const std::uint64_t little = read_uint(8);  // BINFLOAT is big-endian: reverse the bytes
        std::uint64_t bits = 0;
        for (int i = 0; i < 8; ++i) bits |= ((little >> (8 * i)) & 0xff) << (8 * (7 - i));
        push(node(Kind::Float, bits));
        return false;
      }
      case 0x8c: text(Kind::String, read_uint(1)); return false;
      case 'X': text(Kind::String, read_uint(4)); return false;
      case 0x8d: text(Kind::String, read_uint(8)); return false;
      case 'U': text(Kind::String, read_uint(1)); return false;   // Python 2 str: decoded as text
      case 'T': text(Kind::String, signed_length(4)); return false;
      case 'C': text(Kind::Bytes, read_uint(1)); return false;
      case 'B': text(Kind::Bytes, read_uint(4)); return false;
      case 0x8e: text(Kind::Bytes, read_uint(8)); return false;
      case 0x96: text(Kind::Bytes, read_uint(8)); return false;  // bytearray
      case ']': push(container(Kind::List)); return false;
      case '}': push(container(Kind::Dict)); return false;
      case ')': push(container(Kind::Tuple)); return false;
      case '(':
        if (marks_.size() >= limits_.max_mark_depth) fail(fmt::format("more than {} nested MARKs", limits_.max_mark_depth));
        marks_.push_back(stack_.size());
        return false;
      case '0':  // POP: with no item above the last MARK, Python drops the MARK instead
        if (stack_.size() > frame_base()) stack_.pop_back();
        else pop_mark();
        return false;
      case '1': stack_.resize(pop_mark()); return false;
      case 't': case 'l': {
        const std::size_t mark = pop_mark();
        const Index made = container(op_ == 't' ? Kind::Tuple : Kind::List);
        children(made).assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
        stack_.resize(mark);
        push(made);
        return false;
      }
      case 0x85: case 0x86: case 0x87: {
        const std::size_t n = op_ - 0x84u;
        if (stack_.size() < frame_base() + n) fail(fmt::format("needs {} items on the stack", n));
        const Index made = container(Kind::Tuple);
        children(made).assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
        stack_.resize(stack_.size() - n);
        push(made);
        return false;
      }
      case 'd': {
        const std::size_t mark = pop_mark();
        const Index made = container(Kind::Dict);
        add_items(made, mark);
        push(made);
        return false;
      }
      case 'a': {
        const Index value = pop();
        append_to(top(), {value});
        return false;
      }
      case 'e': {
        const std::size_t mark = pop_mark();
        if (mark == frame_base() || mark == 0) fail("has no list below its MARK");
        append_to(stack_[mark - 1], std::vector<Index>(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end()));
        stack_.resize(mark);
        return false;
      }
      case 's': {
        if (stack_.size() < frame_base() + 3) fail("needs a dict, a key and a value on the stack");
        const Index target = stack_[stack_.size() - 3];
        expect_dict(target);
        add_items(target, stack_.size() - 2);
        return false;
      }
      case 'u': {
        const std::size_t mark = pop_mark();
        if (mark == frame_base() || mark == 0) fail("has no dict below its MARK");
        const Index target = stack_[mark - 1];
        expect_dict(target);
        add_items(target, mark);
        return false;
      }
      case 0x94: memo_put(memo_.size()); return false;  // MEMOIZE
      case 'q': memo_put(read_uint(1)); return false;
      case 'r': memo_put(read_uint(4)); return false;
      case 'h': memo_get(read_uint(1)); return false;
      case 'j': memo_get(read_uint(4)); return false;
      default: break;
    }
    const char* name = opcode_name(op_);
    if (name == nullptr)
      throw IoError(fmt::format("{}: unknown pickle opcode 0x{:02x} at offset {} (not a pickle, or a damaged one)", source_, op_, op_at_));
    throw IoError(fmt::format("{}: pickle opcode 0x{:02x} ({}) at offset {} is not supported: sublet reads plain data only "
                              "(None, bool, int, float, str, bytes, list, tuple, dict of protocols 2 to 5), never "
                              "objects, classes or calls",
                              source_, op_, name, op_at_));
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw IoError(fmt::format("{}: pickle opcode {} at offset {}: {}", source_, opcode_name(op_), op_at_, what));
  }

  std::uint64_t read_uint(std::size_t width) {
    if (data_.size() - pos_ < width)
      fail(fmt::format("needs {} argument bytes, but the input ends at offset {} (a truncated file?)", width, data_.size()));
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < width; ++i) v |= std::uint64_t{static_cast<unsigned char>(data_[pos_ + i])} << (8 * i);
    pos_ += width;
    return v;
  }
  std::uint64_t signed_length(std::size_t width) {
    const auto raw = static_cast<std::int32_t>(read_uint(width));
    if (raw < 0) fail(fmt::format("negative length {}", raw));
    return static_cast<std::uint64_t>(raw);
  }
  std::string_view take(std::uint64_t length) {
    if (length > data_.size() - pos_)
      fail(fmt::format("a length of {} bytes, but only {} follow (a truncated file?)", length, data_.size() - pos_));
    const std::string_view piece(data_.data() + pos_, static_cast<std::size_t>(length));
    pos_ += static_cast<std::size_t>(length);
    return piece;
  }

  Index node(Kind kind, std::uint64_t first = 0, std::uint64_t second = 0) {
    if (doc_.nodes_.size() >= std::numeric_limits<Index>::max()) fail("more than 2^32 values");
    doc_.nodes_.push_back({kind, first, second});
    return static_cast<Index>(doc_.nodes_.size() - 1);
  }
  Index container(Kind kind) {
    doc_.children_.emplace_back();
    return node(kind, doc_.children_.size() - 1);
  }
  std::vector<Index>& children(Index container) { return doc_.children_[doc_.nodes_[container].first]; }
  Kind kind_of(Index i) const { return doc_.nodes_[i].kind; }

  void text(Kind kind, std::uint64_t length) {
    const std::size_t offset = pos_;
    const std::string_view piece = take(length);
    if (kind == Kind::String) {
      const std::size_t bad = first_bad_utf8(piece);
      if (bad != std::string_view::npos) fail(fmt::format("a str that is not UTF-8 (byte {} of it)", bad));
    }
    push(node(kind, offset, length));
  }

  // LONG1/LONG4: little-endian two's complement of `length` bytes.
  void long_int(std::uint64_t length) {
    const std::size_t offset = pos_;
    const std::string_view bytes = take(length);
    if (bytes.empty()) return push(node(Kind::Int, 0));
    const bool negative = static_cast<unsigned char>(bytes.back()) & 0x80;
    const std::size_t low = std::min<std::size_t>(bytes.size(), 8);
    std::uint64_t bits = negative ? ~std::uint64_t{0} : 0;
    for (std::size_t i = 0; i < low; ++i) {
      bits &= ~(std::uint64_t{0xff} << (8 * i));
      bits |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
    }
    // Fits int64 when every byte above the eighth repeats the sign, and bit 63 agrees with it.
    bool fits = (static_cast<std::int64_t>(bits) < 0) == negative;
    for (std::size_t i = 8; i < bytes.size() && fits; ++i) fits = static_cast<unsigned char>(bytes[i]) == (negative ? 0xff : 0x00);
    push(fits ? node(Kind::Int, bits) : node(Kind::BigInt, offset, length));
  }

  void push(Index i) { stack_.push_back(i); }
  std::size_t frame_base() const { return marks_.empty() ? 0 : marks_.back(); }
  Index pop() {
    if (stack_.size() <= frame_base()) fail("needs a value on the stack, found none");
    const Index i = stack_.back();
    stack_.pop_back();
    return i;
  }
  Index top() const {
    if (stack_.size() <= frame_base()) fail("needs a value on the stack, found none");
    return stack_.back();
  }
  std::size_t pop_mark() {
    if (marks_.empty()) fail("needs a MARK before it, found none");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    return mark;
  }

  void append_to(Index target, const std::vector<Index>& items) {
    if (kind_of(target) != Kind::List) fail(fmt::format("appends to a {}, expected a list", kind_name(kind_of(target))));
    auto& list = children(target);
    list.insert(list.end(), items.begin(), items.end());
  }
  void expect_dict(Index target) const {
    if (kind_of(target) != Kind::Dict) fail(fmt::format("sets items of a {}, expected a dict", kind_name(kind_of(target))));
  }
  // Moves stack_[from..] (keys and values in turn) into the dict `target`.
  void add_items(Index target, std::size_t from) {
    if ((stack_.size() - from) % 2 != 0) fail("has a key without a value");
    for (std::size_t i = from; i < stack_.size(); i += 2) {
      const Kind k = kind_of(stack_[i]);
      if (k == Kind::List || k == Kind::Dict) fail(fmt::format("a dict key of type {} (unhashable in Python)", kind_name(k)));
    }
    auto& items = children(target);
    items.insert(items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(from), stack_.end());
    stack_.resize(from);
  }

  void memo_put(std::uint64_t key) {
    const Index value = top();
    if (memo_.size() >= limits_.max_memo_entries && !memo_.contains(key))
      fail(fmt::format("more than {} memo entries", limits_.max_memo_entries));
    memo_[key] = value;
  }
  void memo_get(std::uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end()) fail(fmt::format("memo entry {} was never stored", key));
    push(it->second);
  }

  Document& doc_;
  std::string_view data_;
  const std::string& source_;
  const ReadLimits& limits_;
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;
  std::uint8_t op_ = 0;
  std::vector<Index> stack_;
  std::vector<std::size_t> marks_;  // stack_ sizes at each open MARK
  std::unordered_map<std::uint64_t, Index> memo_;
};

Document parse(std::string bytes, const std::string& source, const ReadLimits& limits) {
  Document doc;
  Parser(doc, std::move(bytes), source, limits).run();
  return doc;
}

// ---------------------------------------------------------------------------------------------
// Value

Kind Value::kind() const { return document_->nodes_[node_].kind; }

void Value::expect(Kind kind, const char* wanted) const {
  if (this->kind() != kind) throw IoError(fmt::format("expected {}, found {}", wanted, kind_name(this->kind())));
}

bool Value::as_bool() const {
  expect(Kind::Bool, "a bool");
  return document_->nodes_[node_].first != 0;
}

std::int64_t Value::as_int() const {
  if (kind() == Kind::BigInt) throw IoError("expected an int of at most 64 bits, found a larger one");
  expect(Kind::Int, "an int");
  return static_cast<std::int64_t>(document_->nodes_[node_].first);
}

std::uint64_t Value::as_uint64() const {
  if (kind() == Kind::BigInt) {
    // Python writes 2^63..2^64-1 as nine bytes, the last one 0.
    const auto& n = document_->nodes_[node_];
    const std::string_view bytes(document_->bytes_.data() + n.first, n.second);
    for (std::size_t i = 8; i < bytes.size(); ++i)
      if (bytes[i] != 0) throw IoError("expected a non-negative int below 2^64, found one outside that range");
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) v |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
    return v;
  }
  const std::int64_t v = as_int();
  if (v < 0) throw IoError(fmt::format("expected a non-negative int, found {}", v));
  return static_cast<std::uint64_t>(v);
}

double Value::as_float() const {
  if (kind() == Kind::Int) return static_cast<double>(as_int());
  expect(Kind::Float, "a float");
  return std::bit_cast<double>(document_->nodes_[node_].first);
}

std::string_view Value::as_string() const {
  expect(Kind::String, "a str");
  const auto& n = document_->nodes_[node_];
  return {document_->bytes_.data() + n.first, static_cast<std::size_t>(n.second)};
}

std::string_view Value::as_bytes() const {
  expect(Kind::Bytes, "bytes");
  const auto& n = document_->nodes_[node_];
  return {document_->bytes_.data() + n.first, static_cast<std::size_t>(n.second)};
}

std::size_t Value::size() const {
  const Kind k = kind();
  if (k != Kind::List && k != Kind::Tuple && k != Kind::Dict)
    throw IoError(fmt::format("expected a list, tuple or dict, found {}", kind_name(k)));
  const std::size_t n = document_->children_[document_->nodes_[node_].first].size();
  return k == Kind::Dict ? n / 2 : n;
}

Value Value::at(std::size_t index) const {
  if (kind() != Kind::List && kind() != Kind::Tuple)
    throw IoError(fmt::format("expected a list or tuple, found {}", kind_name(kind())));
  const auto& items = document_->children_[document_->nodes_[node_].first];
  if (index >= items.size()) throw IoError(fmt::format("index {} is past the end of a {} of {}", index, kind_name(kind()), items.size()));
  return {*document_, items[index]};
}

Value Value::key_at(std::size_t index) const {
  expect(Kind::Dict, "a dict");
  if (index >= size()) throw IoError(fmt::format("item {} is past the end of a dict of {}", index, size()));
  return {*document_, document_->children_[document_->nodes_[node_].first][2 * index]};
}

Value Value::value_at(std::size_t index) const {
  expect(Kind::Dict, "a dict");
  if (index >= size()) throw IoError(fmt::format("item {} is past the end of a dict of {}", index, size()));
  return {*document_, document_->children_[document_->nodes_[node_].first][2 * index + 1]};
}

std::optional<Value> Value::find(std::string_view key) const {
  expect(Kind::Dict, "a dict");
  const auto& items = document_->children_[document_->nodes_[node_].first];
  for (std::size_t i = items.size(); i >= 2; i -= 2) {  // the last one set wins, as in Python
    const Value k(*document_, items[i - 2]);
    if (k.kind() == Kind::String && k.as_string() == key) return Value(*document_, items[i - 1]);
  }
  return std::nullopt;
}

}  // namespace sublet::memory::pickle
