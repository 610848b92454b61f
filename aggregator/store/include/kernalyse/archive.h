// A byte archive for what the processes of an MPI run of kernalyse-merge exchange (spread.h): the
// cross-rank rows and the analyses' rank-at-a-time states (sliced.cpp), the stores each process
// imported (store_archive.h). Written and read by the same build on the same machine type (no
// versioning, native byte order); a short read throws.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kernalyse {

class Archive {
 public:
  Archive() = default;
  explicit Archive(std::string bytes) : buf_(std::move(bytes)) {}
  const std::string& bytes() const { return buf_; }
  bool done() const { return at_ == buf_.size(); }

  template <class T>
  void put(const T& v) {
    if constexpr (std::is_trivially_copyable_v<T>) {
      buf_.append(reinterpret_cast<const char*>(&v), sizeof v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      put<uint64_t>(v.size());
      buf_.append(v);
    } else if constexpr (is_pair<T>::value) {
      put(v.first);
      put(v.second);
    } else if constexpr (is_flat<T>::value) {  // a vector of plain values: one copy
      put<uint64_t>(v.size());
      if (!v.empty()) buf_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
    } else {  // a container: std::vector, std::map
      put<uint64_t>(v.size());
      for (const auto& x : v) put(x);
    }
  }

  template <class T>
  void get(T& v) {
    if constexpr (std::is_trivially_copyable_v<T>) {
      take(&v, sizeof v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      const uint64_t n = count();
      v.assign(buf_, at_, n);
      at_ += n;
    } else if constexpr (is_pair<T>::value) {
      get(const_cast<std::remove_const_t<typename T::first_type>&>(v.first));
      get(v.second);
    } else if constexpr (is_flat<T>::value) {
      const uint64_t n = count();
      if (n > (buf_.size() - at_) / sizeof(v[0]))
        throw std::runtime_error("MPI analysis: short message");
      v.resize(n);
      take(v.data(), n * sizeof(v[0]));
    } else if constexpr (is_map<T>::value) {
      const uint64_t n = count();
      v.clear();
      for (uint64_t i = 0; i < n; ++i) {
        std::pair<typename T::key_type, typename T::mapped_type> x;
        get(x);
        v.emplace(std::move(x));
      }
    } else {
      const uint64_t n = count();
      v.clear();
      v.resize(n);
      for (auto& x : v) get(x);
    }
  }
  template <class T>
  T get() {
    T v{};
    get(v);
    return v;
  }

 private:
  template <class T>
  struct is_pair : std::false_type {};
  template <class A, class B>
  struct is_pair<std::pair<A, B>> : std::true_type {};
  template <class T>
  struct is_flat : std::false_type {};
  template <class T, class A>
  struct is_flat<std::vector<T, A>>
      : std::bool_constant<std::is_trivially_copyable_v<T> && !std::is_same_v<T, bool>> {};
  template <class T>
  struct is_map : std::false_type {};
  template <class K, class V, class C, class A>
  struct is_map<std::map<K, V, C, A>> : std::true_type {};

// GCC 12 at -O2 warns that the string's inline buffer "may be used uninitialized" where a
// get() of an archive made from a copied string is inlined (a false positive of its SSO
// analysis: buf_ is always constructed); only here, only that warning.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  void take(void* p, size_t n) {
    if (buf_.size() - at_ < n) throw std::runtime_error("MPI analysis: short message");
    if (n == 0) return;  // an empty vector's data() may be null: memcpy(nullptr, ..., 0) is UB
    std::memcpy(p, buf_.data() + at_, n);
    at_ += n;
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  uint64_t count() {
    uint64_t n = 0;
    take(&n, sizeof n);
    if (n > buf_.size() - at_ + 1) {
      // a count larger than the bytes left cannot be honest (every element takes a byte or more,
      // but for empty ones): bounded so that a corrupt message cannot allocate without end
      if (n > (uint64_t{1} << 40)) throw std::runtime_error("MPI analysis: bad message");
    }
    return n;
  }

  std::string buf_;
  size_t at_ = 0;
};

}  // namespace kernalyse
