// Little-endian field writer/reader over a byte span. Explicit encoding only:
// nothing on the wire is a memcpy of a struct.
#pragma once

#include <boost/endian/conversion.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tether::wire {

class ByteWriter {
 public:
  explicit ByteWriter(std::vector<unsigned char>& out) : out_(out) {}
  void u8(std::uint8_t v) { out_.push_back(v); }
  void u16(std::uint16_t v) { put(boost::endian::native_to_little(v)); }
  void u32(std::uint32_t v) { put(boost::endian::native_to_little(v)); }
  void u64(std::uint64_t v) { put(boost::endian::native_to_little(v)); }
  void bytes(const void* p, std::size_t n) {
    auto* b = static_cast<const unsigned char*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  // u16 length + bytes; longer strings are cut at 65535 bytes.
  void str(std::string_view s) {
    auto n = static_cast<std::uint16_t>(std::min<std::size_t>(s.size(), 0xffff));
    u16(n);
    bytes(s.data(), n);
  }

 private:
  template <class T>
  void put(T v) { bytes(&v, sizeof v); }
  std::vector<unsigned char>& out_;
};

// Throws std::out_of_range on a short buffer; callers turn that into a
// Protocol error that names the peer and the message.
class ByteReader {
 public:
  ByteReader(const void* p, std::size_t n) : p_(static_cast<const unsigned char*>(p)), n_(n) {}
  std::uint8_t u8() { return *take(1); }
  std::uint16_t u16() { return get<std::uint16_t>(); }
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  void bytes(void* out, std::size_t n) { std::memcpy(out, take(n), n); }
  std::string str() {
    auto n = u16();
    auto* b = take(n);
    return std::string(reinterpret_cast<const char*>(b), n);
  }
  std::size_t remaining() const { return n_ - off_; }

 private:
  template <class T>
  T get() {
    T v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return boost::endian::little_to_native(v);
  }
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

}  // namespace tether::wire
