#include "tprobe/core/base/sha256.hpp"

#include <openssl/evp.h>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {

std::string sha256_hex(const void* data, std::size_t size) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(data, size, digest, &length, EVP_sha256(), nullptr) != 1 || length != 32)
    fail("SHA-256: libcrypto's EVP_Digest failed");
  static const char* const kHex = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned int i = 0; i < length; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex_int64_le(const std::vector<int64_t>& values) {
  std::vector<unsigned char> bytes(values.size() * 8);
  for (std::size_t i = 0; i < values.size(); ++i) {
    auto u = static_cast<uint64_t>(values[i]);
    for (int b = 0; b < 8; ++b) bytes[i * 8 + static_cast<std::size_t>(b)] = static_cast<unsigned char>(u >> (8 * b));
  }
  return sha256_hex(bytes.data(), bytes.size());
}

}  // namespace tprobe::core
