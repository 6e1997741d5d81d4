// std::string_view to absl::string_view. Debian's abseil is built with its
// own string_view type (not an alias of std's), so absl::StrCat and friends
// need this for a std::string_view argument. Header only; any thread.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace mixnet {

inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace mixnet
