// libFuzzer target: the handshake and rendezvous messages a stranger can send
// before proving anything (challenge, hello, welcome, reject) and those a
// member sends (register, table; abort notices, status queries and credits in a frame
// stream), plus a frame stream split as readFrame does.
// Decoders may only throw std::exception (std::out_of_range /
// std::invalid_argument); what decodes must re-encode to the same bytes.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <vector>

#include "wire/frame.hpp"
#include "wire/handshake.hpp"
#include "wire/notice.hpp"

using namespace tether;
using namespace tether::wire;

namespace {

template <class Decode, class Encode>
void roundTrip(const std::vector<unsigned char>& b, Decode decode, Encode encode) {
  try {
    auto m = decode(b);
    if (encode(m) != b) std::abort();
  } catch (const std::exception&) {
  }
}

// Splits a byte stream into frames the way a link's reader does; every payload
// it would allocate is bounded by the control limit.
void splitFrames(const std::uint8_t* p, std::size_t n) {
  while (n >= kHeaderBytes) {
    auto h = decodeHeader(p, kMaxControlPayload, nullptr);
    if (!h) return;
    if (h->length > kMaxControlPayload) std::abort();
    p += kHeaderBytes;
    n -= kHeaderBytes;
    if (h->length > n) return;  // the reader would wait for the rest (under its watchdog)
    std::vector<unsigned char> payload(p, p + h->length);
    try {
      switch (h->kind) {
        case Kind::Challenge:
          (void)decodeChallenge(payload);
          break;
        case Kind::Hello:
          (void)decodeHello(payload);
          break;
        case Kind::Welcome:
          (void)decodeWelcome(payload);
          break;
        case Kind::Reject:
          (void)decodeReject(payload);
          break;
        case Kind::Register:
          (void)decodeRegister(payload);
          break;
        case Kind::Table:
          (void)decodeTable(payload, 4);
          break;
        case Kind::Abort:
          if (encode(decodeAbortNotice(payload)) != payload) std::abort();
          break;
        case Kind::StatusQuery:
          if (encode(decodeStatusQuery(payload)) != payload) std::abort();
          break;
        case Kind::StatusAnswer:
          if (encode(decodeStatusAnswer(payload)) != payload) std::abort();
          break;
        case Kind::Credit: {
          const auto b = encodeCredit(decodeCredit(payload));
          if (!std::equal(b.begin(), b.end(), payload.begin(), payload.end())) std::abort();
          break;
        }
        case Kind::CollectiveCredit: {
          const auto b = encode(decodeCollectiveCredit(payload));
          if (!std::equal(b.begin(), b.end(), payload.begin(), payload.end())) std::abort();
          break;
        }
        default:
          break;
      }
    } catch (const std::exception&) {
    }
    p += h->length;
    n -= h->length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  std::vector<unsigned char> b(data + 1, data + size);
  switch (data[0] % 8) {
    case 0:
      roundTrip(b, decodeChallenge, [](const Challenge& m) { return encode(m); });
      break;
    case 1:
      roundTrip(b, decodeHello, [](const Hello& m) { return encode(m); });
      break;
    case 2:
      roundTrip(b, decodeWelcome, [](const Welcome& m) { return encode(m); });
      break;
    case 3:
      roundTrip(b, decodeReject, [](const Reject& m) { return encode(m); });
      break;
    case 4:
      roundTrip(b, decodeRegister, [](const Register& m) { return encode(m); });
      break;
    case 5: {
      std::uint32_t nranks = b.size() >= 4 ? (b[0] | b[1] << 8) % 64 : 1;
      roundTrip(
          b, [nranks](const std::vector<unsigned char>& x) { return decodeTable(x, nranks); },
          [](const std::vector<PeerAddress>& t) { return encodeTable(t); });
      break;
    }
    default:
      splitFrames(data + 1, size - 1);
      break;
  }
  return 0;
}
