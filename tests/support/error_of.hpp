// The message of the tprobe::Error a reader throws, for the broken-input tests of the evidence
// readers: "" when it throws none; any other exception fails the test.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "tprobe/core/base/error.hpp"

namespace tprobe::testing_support {

template <class F>
std::string error_of(F&& read) {
  try {
    read();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a tprobe::Error: " << e.what();
  }
  return "";
}

// Whether `message` names `field` (the messages quote a key as 'key' and an element as key[i]).
inline ::testing::AssertionResult names(const std::string& message, const std::string& field) {
  if (message.find(field) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << message << "' does not name " << field;
}

}  // namespace tprobe::testing_support

// Expects `statement` to throw a tprobe::Error whose message contains `text` (the field it names).
#define EXPECT_ERROR_NAMES(statement, text)                                                 \
  do {                                                                                      \
    const std::string message_ =                                                            \
        ::tprobe::testing_support::error_of([&] { (void)(statement); });                    \
    EXPECT_NE(message_.find(text), std::string::npos) << "message: " << message_;           \
  } while (0)
