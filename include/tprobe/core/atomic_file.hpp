// Writing output files so that a crash never leaves half of one behind.
#pragma once

#include <string>
#include <string_view>

namespace tprobe::core {

// Writes `contents` to a temporary file beside `path`, flushes it, then renames it over `path`.
// Throws tprobe::Error naming the path on any failure; the temporary file is removed.
void write_file_atomic(const std::string& path, std::string_view contents);

}  // namespace tprobe::core
