// Table rendering and number formats.
#include "tprobe/core/base/table.hpp"

#include <gtest/gtest.h>

#include "tprobe/core/base/error.hpp"

namespace tprobe::core {
namespace {

TEST(Table, AlignsColumnsToWidestCell) {
  Table t("title");
  t.column("name", Align::kLeft).column("value");
  t.row({"a", "1"}).row({"longer", "12345"});
  EXPECT_EQ(t.render(),
            "title\n"
            "name    value\n"
            "-------------\n"
            "a           1\n"
            "longer  12345\n");
}

TEST(Table, ShortRowsArePaddedLongRowsRejected) {
  Table t;
  t.column("a").column("b");
  t.row({"x"});
  EXPECT_EQ(t.rows(), 1u);
  EXPECT_THROW(t.row({"1", "2", "3"}), Error);
}

TEST(Table, SeparatorAndNotes) {
  Table t;
  t.column("a", Align::kLeft);
  t.row({"x"}).separator().row({"y"}).note("* a note");
  EXPECT_EQ(t.render(), "a\n-\nx\n-\ny\n* a note\n");
}

TEST(Table, WidthCountsCodePointsNotBytes) {
  Table t;
  t.column("v");
  t.row({"±1"}).row({"100"});
  EXPECT_EQ(t.render(), "  v\n---\n ±1\n100\n");
}

TEST(Format, Numbers) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(57733156), "57,733,156");
  EXPECT_EQ(format_count(-1234), "-1,234");
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(48.07 * 1024.0 * 1024 * 1024), "48.07 GiB");
  EXPECT_EQ(format_percent(0.299), "29.9 %");
  EXPECT_EQ(format_percent(0.0), "0.0 %");
  EXPECT_EQ(format_seconds(0.0123), "12.3 ms");
  EXPECT_EQ(format_seconds(1.776), "1.776 s");
  // Past 10^6 hours and 10^6 %, an exponent: never a 300-digit number (issue 33).
  EXPECT_EQ(format_seconds(720000.0), "200.00 h");
  EXPECT_EQ(format_seconds(1e308), "2.78e+304 h");
  EXPECT_EQ(format_percent(1e300), "1e+302 %");
  EXPECT_EQ(format_sci(6.8715e-4), "6.8715e-04");
}

}  // namespace
}  // namespace tprobe::core
