// TrafficMatrix helpers (see traffic_matrix.h).
#include "runtime/locality/traffic_matrix.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace mixnet {

TrafficMatrix TrafficMatrix::Transposed() const {
  TrafficMatrix t(n_);
  for (int i = 0; i < n_; ++i) {
    for (int j = 0; j < n_; ++j) t.at(j, i) = at(i, j);
  }
  return t;
}

double TrafficMatrix::OffDiagonalTotal() const {
  double sum = 0;
  for (int i = 0; i < n_; ++i) {
    for (int j = 0; j < n_; ++j) {
      if (i != j) sum += at(i, j);
    }
  }
  return sum;
}

TrafficMatrix TrafficMatrix::Symmetrised() const {
  TrafficMatrix s(n_);
  for (int i = 0; i < n_; ++i) {
    for (int j = 0; j < n_; ++j) {
      if (i != j) s.at(i, j) = at(i, j) + at(j, i);
    }
  }
  return s;
}

absl::Status TrafficMatrix::Validate() const {
  if (bytes_.size() != static_cast<size_t>(n_) * n_) {
    return absl::InvalidArgumentError(
        absl::StrCat("traffic matrix: ", bytes_.size(), " entries for ", n_, " hosts"));
  }
  for (int i = 0; i < n_; ++i) {
    for (int j = 0; j < n_; ++j) {
      const double v = at(i, j);
      if (!std::isfinite(v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat("traffic matrix: entry (", i, ", ", j,
                                                       ") is ", v, "; must be finite and >= 0"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace mixnet
