// Small helpers for naming things in messages.
#pragma once

#include <string>
#include <string_view>

namespace rnnc {

/// 'name' in quotes, cut to a readable length (a name can be megabytes long).
inline std::string quoted(std::string_view s) {
  constexpr size_t kMax = 48;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      static const char *hex = "0123456789ABCDEF";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > kMax) out += "...";
  return out + "'";
}

} // namespace rnnc
