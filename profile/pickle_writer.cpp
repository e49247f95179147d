#include "profile/pickle_writer.h"

#include <bit>
#include <cstring>

namespace sublet::profile {
namespace {

// Opcodes (Python's Lib/pickletools.py names).
constexpr char PROTO = '\x80', STOP = '.', NONE = 'N', NEWTRUE = '\x88', NEWFALSE = '\x89';
constexpr char BININT = 'J', LONG1 = '\x8a', BINFLOAT = 'G', BINUNICODE = 'X';
constexpr char EMPTY_LIST = ']', EMPTY_DICT = '}', EMPTY_TUPLE = ')', MARK = '(', APPENDS = 'e', SETITEMS = 'u', TUPLE = 't';
constexpr std::size_t kBatch = 1000;  // items per APPENDS/SETITEMS, as Python's pickler batches

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

void put_string(std::string& out, const std::string& s) {
  out += BINUNICODE;
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}

// LONG1: little-endian two's complement, the fewest bytes that keep the sign.
void put_long(std::string& out, std::uint64_t bits, bool negative) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((bits >> (8 * i)) & 0xff);
  while (bytes.size() > 1) {
    const auto last = static_cast<unsigned char>(bytes.back());
    const auto before = static_cast<unsigned char>(bytes[bytes.size() - 2]);
    if (!negative && last == 0x00 && !(before & 0x80)) bytes.pop_back();
    else if (negative && last == 0xff && (before & 0x80)) bytes.pop_back();
    else break;
  }
  if (!negative && (static_cast<unsigned char>(bytes.back()) & 0x80)) bytes += '\0';  // a large unsigned value
  out += LONG1;
  out += static_cast<char>(bytes.size());
  out += bytes;
}

void put_int(std::string& out, std::int64_t v) {
  if (v >= INT32_MIN && v <= INT32_MAX) {
    out += BININT;
    put_u32(out, static_cast<std::uint32_t>(static_cast<std::int32_t>(v)));
    return;
  }
  put_long(out, static_cast<std::uint64_t>(v), v < 0);
}

}  // namespace

void PickleValue::encode(std::string& out) const {
  struct Visitor {
    std::string& out;
    void operator()(std::monostate) const { out += NONE; }
    void operator()(bool b) const { out += b ? NEWTRUE : NEWFALSE; }
    void operator()(std::int64_t v) const { put_int(out, v); }
    void operator()(std::uint64_t v) const {
      if (v <= static_cast<std::uint64_t>(INT64_MAX)) put_int(out, static_cast<std::int64_t>(v));
      else put_long(out, v, false);
    }
    void operator()(double d) const {
      out += BINFLOAT;
      const auto bits = std::bit_cast<std::uint64_t>(d);
      for (int i = 7; i >= 0; --i) out += static_cast<char>((bits >> (8 * i)) & 0xff);  // big-endian
    }
    void operator()(const std::string& s) const { put_string(out, s); }
    void operator()(const std::shared_ptr<List>& list) const {
      out += EMPTY_LIST;
      for (std::size_t start = 0; start < list->size(); start += kBatch) {
        out += MARK;
        for (std::size_t i = start; i < std::min(list->size(), start + kBatch); ++i) (*list)[i].encode(out);
        out += APPENDS;
      }
    }
    void operator()(const std::shared_ptr<Tuple>& tuple) const {
      if (tuple->items.empty()) {
        out += EMPTY_TUPLE;
        return;
      }
      out += MARK;
      for (const auto& item : tuple->items) item.encode(out);
      out += TUPLE;
    }
    void operator()(const std::shared_ptr<Dict>& dict) const {
      out += EMPTY_DICT;
      for (std::size_t start = 0; start < dict->size(); start += kBatch) {
        out += MARK;
        for (std::size_t i = start; i < std::min(dict->size(), start + kBatch); ++i) {
          put_string(out, (*dict)[i].first);
          (*dict)[i].second.encode(out);
        }
        out += SETITEMS;
      }
    }
  };
  std::visit(Visitor{out}, value_);
}

std::string pickle_dumps(const PickleValue& value) {
  std::string out;
  out += PROTO;
  out += '\x02';
  value.encode(out);
  out += STOP;
  return out;
}

}  // namespace sublet::profile
