// The pieces of the raw trace's schema that the raw memory history shares (internal to
// tprobe_core): the tag table and the forward-op links, written and read one way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tprobe/core/trace/attribute/step_trace.hpp"

namespace tprobe::core::detail {

Json tags_json(const std::vector<StepTag>& tags);
Json forward_ops_json(const std::vector<ForwardLink>& ops);
// Bounds-checked readers; throw tprobe::Error naming `path` and the entry.
std::vector<StepTag> parse_tags(const Json& tags, const std::string& path);
std::vector<ForwardLink> parse_forward_ops(const Json& ops, const std::string& path, int64_t ntags);
int64_t json_int(const Json& obj, const char* key, const std::string& where, int64_t lo, int64_t hi);
uint64_t json_uint(const Json& v, const std::string& where);

}  // namespace tprobe::core::detail
