// TrafficMatrix: bytes per ordered host pair of one region (or of a whole
// cluster): at(i, j) is what host i sends host j in one all-to-all. Produced
// by the locality collector and the predictors, consumed by the planner, the
// router and the simulator. Dense, row-major; plain value type, not
// thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/status.h"

namespace mixnet {

class TrafficMatrix {
 public:
  TrafficMatrix() = default;
  explicit TrafficMatrix(int hosts) : n_(hosts), bytes_(static_cast<size_t>(hosts) * hosts, 0.0) {}

  int hosts() const { return n_; }
  double at(int src, int dst) const { return bytes_[Index(src, dst)]; }
  double& at(int src, int dst) { return bytes_[Index(src, dst)]; }
  void Add(int src, int dst, double bytes) { bytes_[Index(src, dst)] += bytes; }

  // Row-major, hosts() * hosts() entries.
  const std::vector<double>& data() const { return bytes_; }

  // The matrix of the other direction (combine is the transpose of dispatch).
  TrafficMatrix Transposed() const;
  // Sum of all off-diagonal entries (the diagonal stays inside a host).
  double OffDiagonalTotal() const;
  // m(i,j) + m(j,i) for i != j, zero diagonal: what a duplex circuit sees.
  TrafficMatrix Symmetrised() const;

  // InvalidArgument unless every entry is finite and >= 0.
  absl::Status Validate() const;

  friend bool operator==(const TrafficMatrix&, const TrafficMatrix&) = default;

 private:
  size_t Index(int src, int dst) const { return static_cast<size_t>(src) * n_ + dst; }

  int n_ = 0;
  std::vector<double> bytes_;
};

}  // namespace mixnet
