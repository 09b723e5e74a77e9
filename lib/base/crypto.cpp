#include "base/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <string>

#include "tether/error.hpp"

namespace tether::crypto {

Digest hmacSha256(const void* key, std::size_t keyLen, const void* data, std::size_t len) {
  Digest out{};
  unsigned int outLen = 0;
  if (!HMAC(EVP_sha256(), key, static_cast<int>(keyLen), static_cast<const unsigned char*>(data), len, out.data(),
            &outLen) ||
      outLen != out.size())
    throw Error(ErrorCode::System, "HMAC-SHA256 failed in libcrypto");
  return out;
}

Digest sha256(const void* data, std::size_t len) {
  Digest out{};
  unsigned int outLen = 0;
  if (!EVP_Digest(data, len, out.data(), &outLen, EVP_sha256(), nullptr))
    throw Error(ErrorCode::System, "SHA-256 failed in libcrypto");
  return out;
}

std::uint64_t hash64(std::string_view a, std::string_view b) {
  std::string joined;
  joined.reserve(a.size() + b.size() + 1);
  joined.append(a).push_back('\0');
  joined.append(b);
  auto d = sha256(joined.data(), joined.size());
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | d[i];
  return v;
}

void randomBytes(void* out, std::size_t n) {
  if (RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(n)) != 1)
    throw Error(ErrorCode::System, "random number generator failed (RAND_bytes)");
}

bool equalConstantTime(const void* a, const void* b, std::size_t n) { return CRYPTO_memcmp(a, b, n) == 0; }

}  // namespace tether::crypto
