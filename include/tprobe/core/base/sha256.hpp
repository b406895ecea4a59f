// SHA-256 from OpenSSL's libcrypto (Debian's libssl-dev), never a hand-written one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tprobe::core {

// Lower-case hex digest of `size` bytes.
std::string sha256_hex(const void* data, std::size_t size);
// Of int64 values as little-endian bytes, in order (a token batch, row-major).
std::string sha256_hex_int64_le(const std::vector<int64_t>& values);

}  // namespace tprobe::core
