/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * A minimal single-line JSON writer for the RESULT line (DESIGN.md "Machine-readable results").
 */
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace imago::app {

/** Builds one JSON object; keys are written in call order. */
class Json {
 public:
  Json& num(std::string_view key, uint64_t v) { return raw(key, std::to_string(v)); }
  Json& num(std::string_view key, double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", std::isfinite(v) ? v : 0.0);
    return raw(key, b);
  }
  Json& str(std::string_view key, std::string_view v) { return raw(key, quote(v)); }
  Json& boolean(std::string_view key, bool v) { return raw(key, v ? "true" : "false"); }
  Json& obj(std::string_view key, const Json& o) { return raw(key, o.text()); }
  /** A list of objects. */
  template <typename List>
  Json& list(std::string_view key, const List& items) {
    std::string t = "[";
    for (const Json& o : items) {  // not `"," + o.text()`: GCC 12 -O3 takes that insert for an overlap
      if (t.size() > 1) t += ',';
      t += o.text();
    }
    return raw(key, t + "]");
  }
  /** @return the object text, e.g. {"a":1}. */
  std::string text() const { return "{" + body_ + "}"; }

 private:
  Json& raw(std::string_view key, std::string_view value) {
    if (!body_.empty()) body_ += ',';
    body_ += quote(key);
    body_ += ':';
    body_ += value;
    return *this;
  }
  static std::string quote(std::string_view s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      if (static_cast<unsigned char>(c) < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        q += b;
        continue;
      }
      q += c;
    }
    return q + "\"";
  }
  std::string body_;
};

}  // namespace imago::app
