// The one little-endian codec: fixed-offset loads and stores (frame header,
// UniqueId, RDMA records) and a field writer/reader over a byte vector
// (handshake and control payloads). Explicit encoding only: nothing on the
// wire is a memcpy of a struct.
#pragma once

#include <boost/endian/conversion.hpp>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether {
namespace le {

// `v` as little-endian bytes at p[0 .. sizeof v).
template <class T>
inline void store(unsigned char* p, T v) {
  static_assert(std::is_integral_v<T>);
  v = boost::endian::native_to_little(v);
  std::memcpy(p, &v, sizeof v);
}

// The little-endian integer at p[0 .. sizeof(T)).
template <class T>
inline T load(const unsigned char* p) {
  static_assert(std::is_integral_v<T>);
  T v;
  std::memcpy(&v, p, sizeof v);
  return boost::endian::little_to_native(v);
}

}  // namespace le

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<unsigned char>& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { put(v); }
  void u32(std::uint32_t v) { put(v); }
  void u64(std::uint64_t v) { put(v); }
  void bytes(const void* p, std::size_t n) {
    // resize + memcpy rather than insert(): GCC 12 at -O3 misreads insert()'s
    // no-reallocation branch as writing past the end (-Warray-bounds).
    if (n == 0) return;
    std::size_t at = out_.size();
    out_.resize(at + n);
    std::memcpy(out_.data() + at, p, n);
  }
  // u16 length + bytes; longer strings are cut at 65535 bytes.
  void str(std::string_view s) {
    auto n = static_cast<std::uint16_t>(std::min<std::size_t>(s.size(), 0xffff));
    u16(n);
    bytes(s.data(), n);
  }

 private:
  template <class T>
  void put(T v) {
    std::size_t at = out_.size();
    out_.resize(at + sizeof v);
    le::store(out_.data() + at, v);
  }
  std::vector<unsigned char>& out_;
};

// Throws std::out_of_range on a short buffer; callers turn that into a
// Protocol error that names the peer and the message.
class ByteReader {
 public:
  ByteReader(const void* p, std::size_t n) : p_(static_cast<const unsigned char*>(p)), n_(n) {}
  std::uint8_t u8() { return *take(1); }
  std::uint16_t u16() { return le::load<std::uint16_t>(take(2)); }
  std::uint32_t u32() { return le::load<std::uint32_t>(take(4)); }
  std::uint64_t u64() { return le::load<std::uint64_t>(take(8)); }
  void bytes(void* out, std::size_t n) { std::memcpy(out, take(n), n); }
  std::string str() {
    auto n = u16();
    auto* b = take(n);
    return std::string(reinterpret_cast<const char*>(b), n);
  }
  std::size_t remaining() const { return n_ - off_; }
  // A decoded message must use every byte: trailing ones are an error naming `what`.
  void expectEnd(const char* what) const {
    if (remaining() != 0) throw std::invalid_argument(std::string(what) + " has trailing bytes");
  }

 private:
  const unsigned char* take(std::size_t n) {
    if (n > n_ - off_) throw std::out_of_range("message too short");
    auto* b = p_ + off_;
    off_ += n;
    return b;
  }
  const unsigned char* p_;
  std::size_t n_;
  std::size_t off_ = 0;
};

}  // namespace tether
