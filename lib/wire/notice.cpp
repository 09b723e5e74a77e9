#include "wire/notice.hpp"

#include <stdexcept>

#include "base/bytes.hpp"

namespace tether::wire {

std::vector<unsigned char> encode(const AbortNotice& m) {
  std::vector<unsigned char> out;
  ByteWriter w(out);
  w.u32(m.origin);
  w.str(m.reason);
  w.u32(m.lost);
  return out;
}

std::vector<unsigned char> encode(const StatusQuery& m) {
  std::vector<unsigned char> out;
  ByteWriter w(out);
  w.u32(m.id);
  w.u64(m.comm);
  w.u64(m.coll);
  return out;
}

std::vector<unsigned char> encode(const StatusAnswer& m) {
  std::vector<unsigned char> out;
  ByteWriter w(out);
  w.u32(m.id);
  w.u8(static_cast<std::uint8_t>(m.state));
  w.u32(m.waitsOn);
  w.str(m.doing);
  if (m.detail) {
    const RankDetail& d = *m.detail;
    w.u32(d.rank);
    w.u32(d.nranks);
    w.str(d.call);
    w.u64(d.inCallMs);
    w.u32(d.linksOpen);
    w.str(d.lastError);
  }
  return out;
}

AbortNotice decodeAbortNotice(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  AbortNotice m;
  m.origin = r.u32();
  m.reason = r.str();
  m.lost = r.u32();
  r.expectEnd("abort notice");
  return m;
}

StatusQuery decodeStatusQuery(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  StatusQuery m;
  m.id = r.u32();
  m.comm = r.u64();
  m.coll = r.u64();
  r.expectEnd("status query");
  return m;
}

StatusAnswer decodeStatusAnswer(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  StatusAnswer m;
  m.id = r.u32();
  auto s = r.u8();
  if (s > static_cast<std::uint8_t>(StallState::NoComm)) throw std::invalid_argument("status answer: unknown state");
  m.state = static_cast<StallState>(s);
  m.waitsOn = r.u32();
  m.doing = r.str();
  if (r.remaining() > 0) {
    RankDetail d;
    d.rank = r.u32();
    d.nranks = r.u32();
    d.call = r.str();
    d.inCallMs = r.u64();
    d.linksOpen = r.u32();
    d.lastError = r.str();
    m.detail = std::move(d);
  }
  r.expectEnd("status answer");
  return m;
}

std::array<unsigned char, kCreditBytes> encodeCredit(std::uint64_t bytes) {
  std::array<unsigned char, kCreditBytes> out{};
  le::store(out.data(), bytes);
  return out;
}

std::uint64_t decodeCredit(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  const std::uint64_t bytes = r.u64();
  r.expectEnd("credit");
  return bytes;
}

std::array<unsigned char, kCollectiveCreditBytes> encode(const CollectiveCredit& c) {
  std::array<unsigned char, kCollectiveCreditBytes> out{};
  le::store(out.data(), c.comm);
  le::store(out.data() + 8, c.bytes);
  return out;
}

CollectiveCredit decodeCollectiveCredit(const std::vector<unsigned char>& b) {
  ByteReader r(b.data(), b.size());
  CollectiveCredit c;
  c.comm = r.u64();
  c.bytes = r.u64();
  r.expectEnd("collective credit");
  return c;
}

}  // namespace tether::wire
