#pragma once
// The type of sizes and strides (Shape): a vector of int64 that keeps up to kInline values in
// the object itself. Every tensor holds two and every kernel call passes several, so a heap
// allocation for each would be a large part of the cost of creating a small tensor. Shapes of
// more than kInline dimensions move to the heap.
//
// The interface is std::vector's, as far as the code uses it; it converts to and from
// std::vector<std::int64_t> for the APIs that keep one (file formats, JSON).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <vector>

namespace sublet {

class ShapeVector {
 public:
  using value_type = std::int64_t;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = value_type&;
  using const_reference = const value_type&;
  using pointer = value_type*;
  using const_pointer = const value_type*;
  using iterator = value_type*;
  using const_iterator = const value_type*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  static constexpr size_type kInline = 6;

  ShapeVector() = default;
  explicit ShapeVector(size_type count, value_type value = 0) { assign(count, value); }
  ShapeVector(std::initializer_list<value_type> values) { assign(values.begin(), values.end()); }
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  ShapeVector(It first, It last) {
    assign(first, last);
  }
  ShapeVector(const std::vector<value_type>& values) { assign(values.begin(), values.end()); }  // NOLINT: as a vector
  ShapeVector(const ShapeVector& other) { assign(other.begin(), other.end()); }
  ShapeVector(ShapeVector&& other) noexcept { take(std::move(other)); }
  ShapeVector& operator=(const ShapeVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  ShapeVector& operator=(ShapeVector&& other) noexcept {
    if (this != &other) take(std::move(other));
    return *this;
  }
  ShapeVector& operator=(std::initializer_list<value_type> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~ShapeVector() = default;

  operator std::vector<value_type>() const { return {begin(), end()}; }  // NOLINT: as a vector

  size_type size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_type capacity() const { return heap_ ? heap_capacity_ : kInline; }
  pointer data() { return heap_ ? heap_.get() : inline_; }
  const_pointer data() const { return heap_ ? heap_.get() : inline_; }

  reference operator[](size_type i) { return data()[i]; }
  const_reference operator[](size_type i) const { return data()[i]; }
  reference at(size_type i) { return data()[checked(i)]; }
  const_reference at(size_type i) const { return data()[checked(i)]; }
  reference front() { return data()[0]; }
  const_reference front() const { return data()[0]; }
  reference back() { return data()[size_ - 1]; }
  const_reference back() const { return data()[size_ - 1]; }

  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void reserve(size_type wanted) {
    if (wanted <= capacity()) return;
    auto grown = std::make_unique<value_type[]>(wanted);
    std::copy(begin(), end(), grown.get());
    heap_ = std::move(grown);
    heap_capacity_ = wanted;
  }
  void clear() { size_ = 0; }
  void resize(size_type count, value_type value = 0) {
    reserve(count);
    if (count > size_) std::fill(data() + size_, data() + count, value);
    size_ = count;
  }
  void assign(size_type count, value_type value) {
    size_ = 0;
    resize(count, value);
  }
  template <typename It>
  void assign(It first, It last) {
    const auto count = static_cast<size_type>(std::distance(first, last));
    size_ = 0;
    reserve(count);
    std::copy(first, last, data());
    size_ = count;
  }
  void push_back(value_type value) {
    if (size_ == capacity()) reserve(std::max<size_type>(2 * capacity(), kInline));
    data()[size_++] = value;
  }
  reference emplace_back(value_type value) {
    push_back(value);
    return back();
  }
  void pop_back() { --size_; }
  iterator insert(const_iterator position, value_type value) { return insert(position, &value, &value + 1); }
  template <typename It, typename = typename std::iterator_traits<It>::iterator_category>
  iterator insert(const_iterator position, It first, It last) {
    const auto at = static_cast<size_type>(position - begin());
    const ShapeVector added(first, last);  // a copy first: the source may alias this vector
    reserve(size_ + added.size());
    std::copy_backward(data() + at, data() + size_, data() + size_ + added.size());
    std::copy(added.begin(), added.end(), data() + at);
    size_ += added.size();
    return data() + at;
  }
  iterator insert(const_iterator position, size_type count, value_type value) {
    const ShapeVector added(count, value);
    return insert(position, added.begin(), added.end());
  }
  iterator erase(const_iterator position) { return erase(position, position + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto at = static_cast<size_type>(first - begin());
    const auto count = static_cast<size_type>(last - first);
    std::copy(data() + at + count, data() + size_, data() + at);
    size_ -= count;
    return data() + at;
  }

  friend bool operator==(const ShapeVector& a, const ShapeVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator!=(const ShapeVector& a, const ShapeVector& b) { return !(a == b); }
  friend bool operator<(const ShapeVector& a, const ShapeVector& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  size_type checked(size_type i) const {
    if (i >= size_) throw std::out_of_range("ShapeVector::at: index out of range");
    return i;
  }
  void take(ShapeVector&& other) noexcept {
    size_ = other.size_;
    heap_capacity_ = other.heap_capacity_;
    heap_ = std::move(other.heap_);
    if (!heap_) std::copy(other.inline_, other.inline_ + size_, inline_);
    other.size_ = 0;
    other.heap_capacity_ = 0;
  }

  value_type inline_[kInline] = {};
  size_type size_ = 0;
  size_type heap_capacity_ = 0;
  std::unique_ptr<value_type[]> heap_;  // set once more than kInline values were needed
};

// Sizes and strides of a tensor or of a kernel's iteration space.
using Shape = ShapeVector;

// The product of the sizes: the number of elements of a tensor of this shape.
inline std::int64_t shape_numel(const Shape& sizes) {
  std::int64_t n = 1;
  for (auto s : sizes) n *= s;
  return n;
}

}  // namespace sublet
