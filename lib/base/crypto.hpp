// Keyed hashing and randomness from OpenSSL's libcrypto (Debian libssl-dev):
// a well-reviewed HMAC-SHA256 and CSPRNG instead of hand-written ones.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/layer.hpp"

TETHER_LAYER(0, "base");

namespace tether::crypto {

using Digest = std::array<unsigned char, 32>;

Digest hmacSha256(const void* key, std::size_t keyLen, const void* data, std::size_t len);
Digest sha256(const void* data, std::size_t len);
// First 8 bytes of SHA-256 over the concatenated parts, as an id.
std::uint64_t hash64(std::string_view a, std::string_view b = {});
// Cryptographically strong random bytes; throws Error{System} if the RNG fails.
void randomBytes(void* out, std::size_t n);
// Constant-time comparison (no timing oracle on proofs).
bool equalConstantTime(const void* a, const void* b, std::size_t n);

}  // namespace tether::crypto
