#pragma once
// A small pickle encoder (protocol 2 opcodes, readable by every Python 3) for the values a memory
// snapshot needs: None, bools, integers of any size up to 64 bits, floats, str, lists, tuples and
// dicts. No memo, no classes: what it writes is plain data, safe to load.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace sublet::profile {

class PickleValue {
 public:
  using List = std::vector<PickleValue>;
  struct Tuple { std::vector<PickleValue> items; };
  using Dict = std::vector<std::pair<std::string, PickleValue>>;  // string keys, insertion order

  PickleValue() = default;  // None
  PickleValue(std::nullptr_t) {}
  PickleValue(bool b) : value_(b) {}
  PickleValue(int i) : value_(static_cast<std::int64_t>(i)) {}
  PickleValue(std::int64_t i) : value_(i) {}
  PickleValue(std::uint64_t u) : value_(u) {}
  PickleValue(double d) : value_(d) {}
  PickleValue(const char* s) : value_(std::string(s)) {}
  PickleValue(std::string s) : value_(std::move(s)) {}
  PickleValue(List l) : value_(std::make_shared<List>(std::move(l))) {}
  PickleValue(Tuple t) : value_(std::make_shared<Tuple>(std::move(t))) {}
  PickleValue(Dict d) : value_(std::make_shared<Dict>(std::move(d))) {}

  // Appends this value's opcodes to `out`.
  void encode(std::string& out) const;

 private:
  std::variant<std::monostate, bool, std::int64_t, std::uint64_t, double, std::string, std::shared_ptr<List>,
               std::shared_ptr<Tuple>, std::shared_ptr<Dict>>
      value_;
};

// PROTO 2, the value, STOP.
std::string pickle_dumps(const PickleValue& value);

}  // namespace sublet::profile
