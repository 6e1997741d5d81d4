// The oracle's linear programs (oracle.h): (b), the best routing over the
// direct and two-hop paths of a fixed circuit set, and the relaxation with
// fractional circuit counts; plus (a) and the fabric's validation. Solved with
// GLPK's simplex; each call owns its problem, so any thread may call.
//
// Both LPs maximise the throughput scale lambda: every pair (i, j) sends
// lambda x D(i, j) over its paths, and no resource (a host's EPS egress or
// ingress, one direction of a pair's circuits) carries more than its rate.
// The floor is 1 / lambda. Demand and rates are normalised (largest entry 1)
// so the solver sees numbers near 1.
#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/planner/oracle.h"
#include "runtime/planner/oracle_internal.h"

namespace mixnet::planner {
namespace {

// GLPK's problem, freed on every path out.
class GlpProblem {
 public:
  GlpProblem() : p_(glp_create_prob()) {}
  ~GlpProblem() { glp_delete_prob(p_); }
  GlpProblem(const GlpProblem&) = delete;
  GlpProblem& operator=(const GlpProblem&) = delete;
  glp_prob* get() const { return p_; }

 private:
  glp_prob* p_;
};

std::string GlpStatusName(int status) {
  switch (status) {
    case GLP_OPT:
      return "optimal";
    case GLP_FEAS:
      return "feasible";
    case GLP_INFEAS:
      return "infeasible";
    case GLP_NOFEAS:
      return "no feasible solution";
    case GLP_UNBND:
      return "unbounded";
    case GLP_UNDEF:
      return "undefined";
  }
  return absl::StrCat("status ", status);
}

std::string GlpReturnName(int ret) {
  switch (ret) {
    case GLP_EBADB:
      return "invalid initial basis (GLP_EBADB)";
    case GLP_ESING:
      return "singular basis (GLP_ESING)";
    case GLP_ECOND:
      return "ill-conditioned basis (GLP_ECOND)";
    case GLP_EBOUND:
      return "incorrect bounds (GLP_EBOUND)";
    case GLP_EFAIL:
      return "solver failure (GLP_EFAIL)";
    case GLP_EOBJLL:
      return "objective below its limit (GLP_EOBJLL)";
    case GLP_EOBJUL:
      return "objective above its limit (GLP_EOBJUL)";
    case GLP_EITLIM:
      return "iteration limit (GLP_EITLIM)";
    case GLP_ETMLIM:
      return "time limit (GLP_ETMLIM)";
    case GLP_ENOPFS:
      return "no primal feasible solution (GLP_ENOPFS)";
    case GLP_ENODFS:
      return "no dual feasible solution (GLP_ENODFS)";
  }
  return absl::StrCat("return code ", ret);
}

// Builds the path LP row by row: rows and columns are 1-based as GLPK wants.
class PathLp {
 public:
  // counts: circuits per unordered pair (n x n, symmetric), or nullptr for
  // the relaxation (a fractional count per pair, ports per host in all).
  PathLp(const TrafficMatrix& demand, const OracleFabric& fabric, const std::vector<int>* counts,
         const OracleOptions& options)
      : d_(demand), f_(fabric), n_(fabric.hosts()), counts_(counts), opt_(options) {}

  // The floor in seconds; relaxed_counts (relaxation only) gets the counts,
  // routing (when given) the paths' weights per pair.
  absl::StatusOr<double> Solve(std::vector<double>* relaxed_counts,
                               OracleRouting* routing = nullptr);

 private:
  int AddRow(int type, double ub) {
    int r = glp_add_rows(lp_.get(), 1);
    glp_set_row_bnds(lp_.get(), r, type, 0.0, ub);
    return r;
  }
  int AddCol(int type, double lb, double ub, double obj) {
    int c = glp_add_cols(lp_.get(), 1);
    glp_set_col_bnds(lp_.get(), c, type, lb, ub);
    glp_set_obj_coef(lp_.get(), c, obj);
    return c;
  }
  void Put(int row, int col, double v) {
    ia_.push_back(row);
    ja_.push_back(col);
    ar_.push_back(v);
  }
  // Circuit capacity row of a -> b, 0 when the pair can hold no circuit.
  int Circ(int a, int b) const { return circ_row_[static_cast<size_t>(a) * n_ + b]; }

  const TrafficMatrix& d_;
  const OracleFabric& f_;
  int n_;
  const std::vector<int>* counts_;
  const OracleOptions& opt_;
  GlpProblem lp_;
  std::vector<int> ia_{0}, ja_{0};
  std::vector<double> ar_{0.0};
  std::vector<int> circ_row_;
  // Per path column: its pair and what it is (for InstalledRouting).
  struct PathMeta {
    int col = 0, src = 0, dst = 0;
    OraclePath path;
  };
  std::vector<PathMeta> meta_;
};

absl::StatusOr<double> PathLp::Solve(std::vector<double>* relaxed_counts, OracleRouting* routing) {
  if (routing != nullptr) routing->paths.assign(static_cast<size_t>(n_) * n_, {});
  const bool relaxed = counts_ == nullptr;
  double dmax = 0, cmax = 0;
  for (int i = 0; i < n_; ++i) {
    for (int j = 0; j < n_; ++j) {
      if (i != j) dmax = std::max(dmax, d_.at(i, j) * f_.wire_overhead);
    }
    cmax = std::max({cmax, f_.eps_Bps[i], f_.ocs_port_Bps[i]});
  }
  if (relaxed_counts != nullptr) relaxed_counts->assign(static_cast<size_t>(n_) * n_, 0.0);
  if (dmax == 0) return 0.0;
  if (cmax == 0) return kInfinity;
  glp_set_obj_dir(lp_.get(), GLP_MAX);
  const int lambda = AddCol(GLP_LO, 0, 0, 1);

  // Resources: EPS egress / ingress per host, circuits per direction.
  std::vector<int> eps_out(n_, 0), eps_in(n_, 0);
  for (int h = 0; h < n_; ++h) {
    if (f_.eps_Bps[h] > 0) {
      eps_out[h] = AddRow(GLP_UP, f_.eps_Bps[h] / cmax);
      eps_in[h] = AddRow(GLP_UP, f_.eps_Bps[h] / cmax);
    }
  }
  circ_row_.assign(static_cast<size_t>(n_) * n_, 0);
  std::vector<int> x_col(static_cast<size_t>(n_) * n_, 0);
  std::vector<int> port_row(n_, 0);
  if (relaxed) {
    for (int h = 0; h < n_; ++h) {
      if (f_.ocs_ports[h] > 0) port_row[h] = AddRow(GLP_UP, f_.ocs_ports[h]);
    }
  }
  for (int a = 0; a < n_; ++a) {
    for (int b = a + 1; b < n_; ++b) {
      const double rate = f_.circuit_Bps(a, b) / cmax;
      if (rate <= 0) continue;
      if (relaxed) {
        const int most = std::min(f_.ocs_ports[a], f_.ocs_ports[b]);
        if (most <= 0) continue;
        const int x = AddCol(GLP_DB, 0, most, 0);
        x_col[static_cast<size_t>(a) * n_ + b] = x;
        Put(port_row[a], x, 1);
        Put(port_row[b], x, 1);
        for (auto [s, t] : {std::pair{a, b}, std::pair{b, a}}) {
          const int r = AddRow(GLP_UP, 0);
          Put(r, x, -rate);
          circ_row_[static_cast<size_t>(s) * n_ + t] = r;
        }
      } else {
        const int count = (*counts_)[static_cast<size_t>(a) * n_ + b];
        if (count <= 0) continue;
        circ_row_[static_cast<size_t>(a) * n_ + b] = AddRow(GLP_UP, count * rate);
        circ_row_[static_cast<size_t>(b) * n_ + a] = AddRow(GLP_UP, count * rate);
      }
    }
  }

  // Paths per pair with bytes; a pair without any path has no finite floor.
  std::vector<int> uses;
  int src = 0, dst = 0;
  auto add_path = [&](int demand_row, OraclePathKind kind, int via,
                      std::initializer_list<int> rows) {
    for (int r : rows) {
      if (r == 0) return;
    }
    const int col = AddCol(GLP_LO, 0, 0, 0);
    Put(demand_row, col, 1);
    for (int r : rows) Put(r, col, 1);
    uses.push_back(col);
    meta_.push_back({col, src, dst, OraclePath{kind, via, 0}});
  };
  for (int i = 0; i < n_; ++i) {
    for (int j = 0; j < n_; ++j) {
      if (i == j || d_.at(i, j) <= 0) continue;
      const int row = AddRow(GLP_FX, 0);
      Put(row, lambda, -d_.at(i, j) * f_.wire_overhead / dmax);
      uses.clear();
      src = i;
      dst = j;
      add_path(row, OraclePathKind::kEps, -1, {eps_out[i], eps_in[j]});
      add_path(row, OraclePathKind::kCircuit, -1, {Circ(i, j)});
      for (int k = 0; k < n_ && opt_.two_hop; ++k) {
        if (k == i || k == j) continue;
        add_path(row, OraclePathKind::kCircuitCircuit, k, {Circ(i, k), Circ(k, j)});
        if (!opt_.one_sided) continue;
        // The data plane sends a hop over its pair's circuits when it has any.
        if (!opt_.data_plane_paths || Circ(i, k) == 0) {
          add_path(row, OraclePathKind::kEpsCircuit, k, {eps_out[i], eps_in[k], Circ(k, j)});
        }
        if (!opt_.data_plane_paths || Circ(k, j) == 0) {
          add_path(row, OraclePathKind::kCircuitEps, k, {Circ(i, k), eps_out[k], eps_in[j]});
        }
      }
      if (uses.empty()) return kInfinity;
    }
  }
  glp_load_matrix(lp_.get(), static_cast<int>(ia_.size()) - 1, ia_.data(), ja_.data(), ar_.data());
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  if (opt_.max_simplex_iterations > 0) parm.it_lim = opt_.max_simplex_iterations;
  const int ret = glp_simplex(lp_.get(), &parm);
  if (ret != 0) return absl::InternalError(absl::StrCat("GLPK simplex: ", GlpReturnName(ret)));
  const int status = glp_get_status(lp_.get());
  if (status != GLP_OPT) {
    return absl::InternalError(absl::StrCat("GLPK simplex ended ", GlpStatusName(status)));
  }
  double scale = glp_get_obj_val(lp_.get());
  if (opt_.fewest_relayed && !relaxed && scale > 0) {
    // Keep lambda within the slack of its best and minimise the two-hop
    // flows, from the optimal basis (no presolve, so GLPK starts from it).
    glp_set_col_bnds(lp_.get(), lambda, GLP_LO, scale * (1 - opt_.optimality_slack), 0.0);
    glp_set_obj_coef(lp_.get(), lambda, 0.0);
    for (const PathMeta& m : meta_) {
      const bool two_hop = m.path.via >= 0;
      glp_set_obj_coef(lp_.get(), m.col, two_hop ? 1.0 : 0.0);
    }
    glp_set_obj_dir(lp_.get(), GLP_MIN);
    parm.presolve = GLP_OFF;
    const int ret2 = glp_simplex(lp_.get(), &parm);
    if (ret2 != 0) {
      return absl::InternalError(
          absl::StrCat("GLPK simplex (fewest relayed bytes): ", GlpReturnName(ret2)));
    }
    const int status2 = glp_get_status(lp_.get());
    if (status2 != GLP_OPT) {
      return absl::InternalError(
          absl::StrCat("GLPK simplex (fewest relayed bytes) ended ", GlpStatusName(status2)));
    }
    scale = glp_get_col_prim(lp_.get(), lambda);
  }
  if (relaxed_counts != nullptr) {
    for (int a = 0; a < n_; ++a) {
      for (int b = a + 1; b < n_; ++b) {
        const int x = x_col[static_cast<size_t>(a) * n_ + b];
        if (x == 0) continue;
        const double v = glp_get_col_prim(lp_.get(), x);
        (*relaxed_counts)[static_cast<size_t>(a) * n_ + b] = v;
        (*relaxed_counts)[static_cast<size_t>(b) * n_ + a] = v;
      }
    }
  }
  if (scale <= 0) return kInfinity;
  if (routing != nullptr) {
    // Each pair's flows over its paths, as shares of the pair's total.
    std::vector<double> total(static_cast<size_t>(n_) * n_, 0.0);
    std::vector<double> flow(meta_.size());
    for (size_t p = 0; p < meta_.size(); ++p) {
      flow[p] = std::max(0.0, glp_get_col_prim(lp_.get(), meta_[p].col));
      total[static_cast<size_t>(meta_[p].src) * n_ + meta_[p].dst] += flow[p];
    }
    for (size_t p = 0; p < meta_.size(); ++p) {
      const size_t pair = static_cast<size_t>(meta_[p].src) * n_ + meta_[p].dst;
      const double share = total[pair] > 0 ? flow[p] / total[pair] : 0;
      if (share <= 1e-9) continue;
      OraclePath path = meta_[p].path;
      path.weight = share;
      routing->paths[pair].push_back(path);
    }
  }
  return dmax / (cmax * scale);
}

absl::Status CheckDemand(const TrafficMatrix& demand, const OracleFabric& fabric) {
  if (absl::Status s = fabric.Validate(); !s.ok()) return s;
  if (demand.hosts() != fabric.hosts()) {
    return absl::InvalidArgumentError(absl::StrCat("oracle: the matrix has ", demand.hosts(),
                                                   " hosts, the fabric ", fabric.hosts()));
  }
  return demand.Validate();
}

}  // namespace

double OracleFabric::circuit_Bps(int a, int b) const {
  return std::min(ocs_port_Bps[a], ocs_port_Bps[b]);
}

absl::Status OracleFabric::Validate() const {
  const size_t n = eps_Bps.size();
  if (ocs_ports.size() != n || ocs_port_Bps.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat("oracle fabric: eps_Bps has ", n,
                                                   " hosts, ocs_ports ", ocs_ports.size(),
                                                   ", ocs_port_Bps ", ocs_port_Bps.size()));
  }
  for (size_t h = 0; h < n; ++h) {
    if (!std::isfinite(eps_Bps[h]) || eps_Bps[h] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("oracle fabric: host ", h, ": eps_Bps ", eps_Bps[h], " is not >= 0"));
    }
    if (!std::isfinite(ocs_port_Bps[h]) || ocs_port_Bps[h] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("oracle fabric: host ", h, ": ocs_port_Bps ",
                                                     ocs_port_Bps[h], " is not >= 0"));
    }
    if (ocs_ports[h] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("oracle fabric: host ", h, ": ", ocs_ports[h], " OCS ports"));
    }
  }
  if (!(wire_overhead >= 1) || !std::isfinite(wire_overhead)) {
    return absl::InvalidArgumentError(
        absl::StrCat("oracle fabric: wire_overhead ", wire_overhead, " is not >= 1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> NonblockingFloor(const TrafficMatrix& demand, const OracleFabric& fabric) {
  if (absl::Status s = CheckDemand(demand, fabric); !s.ok()) return s;
  double floor = 0;
  for (int h = 0; h < fabric.hosts(); ++h) {
    double out = 0, in = 0;
    for (int k = 0; k < fabric.hosts(); ++k) {
      if (k == h) continue;
      out += demand.at(h, k);
      in += demand.at(k, h);
    }
    const double bytes = std::max(out, in) * fabric.wire_overhead;
    if (bytes == 0) continue;
    const double rate = fabric.eps_Bps[h] + fabric.ocs_ports[h] * fabric.ocs_port_Bps[h];
    floor = std::max(floor, rate > 0 ? bytes / rate : kInfinity);
  }
  return floor;
}

absl::StatusOr<std::vector<int>> CircuitCounts(const OracleFabric& fabric,
                                               const std::vector<UndirectedCircuit>& circuits) {
  const int n = fabric.hosts();
  std::vector<int> counts(static_cast<size_t>(n) * n, 0);
  std::vector<int> used(n, 0);
  for (const UndirectedCircuit& c : circuits) {
    if (c.a < 0 || c.a >= n || c.b < 0 || c.b >= n) {
      return absl::InvalidArgumentError(
          absl::StrCat("oracle: circuit ", c.a, "-", c.b, " names a host outside 0..", n - 1));
    }
    if (c.a == c.b) {
      return absl::InvalidArgumentError(
          absl::StrCat("oracle: circuit ", c.a, "-", c.b, " joins a host to itself"));
    }
    for (int h : {c.a, c.b}) {
      if (++used[h] > fabric.ocs_ports[h]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "oracle: host ", h, " has more circuits than its ", fabric.ocs_ports[h], " OCS ports"));
      }
    }
    ++counts[static_cast<size_t>(c.a) * n + c.b];
    ++counts[static_cast<size_t>(c.b) * n + c.a];
  }
  return counts;
}

absl::StatusOr<double> FloorOnCounts(const TrafficMatrix& demand, const OracleFabric& fabric,
                                     const std::vector<int>& counts, const OracleOptions& options) {
  return PathLp(demand, fabric, &counts, options).Solve(nullptr);
}

OracleFabric OracleFabricOf(const Region& region) {
  OracleFabric f;
  for (int h = 0; h < region.hosts(); ++h) {
    const std::vector<OcsPort>& ports = region.input().ports[h];
    f.eps_Bps.push_back(region.input().eps_Bps[h]);
    f.ocs_ports.push_back(static_cast<int>(ports.size()));
    f.ocs_port_Bps.push_back(ports.empty() ? 0 : ports[0].gbps * 1e9 / 8);
  }
  return f;
}

std::vector<UndirectedCircuit> HostCircuitsOf(const Region& region,
                                              const std::vector<PlannedCircuit>& circuits) {
  std::vector<UndirectedCircuit> out;
  for (const PlannedCircuit& c : circuits) {
    out.push_back({c.a.host, c.b.host, region.circuit_Bps(c.a.host, c.b.host)});
  }
  return out;
}

absl::StatusOr<double> InstalledFloor(const TrafficMatrix& demand, const OracleFabric& fabric,
                                      const std::vector<UndirectedCircuit>& circuits,
                                      const OracleOptions& options) {
  if (absl::Status s = CheckDemand(demand, fabric); !s.ok()) return s;
  absl::StatusOr<std::vector<int>> counts = CircuitCounts(fabric, circuits);
  if (!counts.ok()) return counts.status();
  return FloorOnCounts(demand, fabric, *counts, options);
}

std::string_view OraclePathKindName(OraclePathKind kind) {
  switch (kind) {
    case OraclePathKind::kEps:
      return "eps";
    case OraclePathKind::kCircuit:
      return "circuit";
    case OraclePathKind::kCircuitCircuit:
      return "circuit-circuit";
    case OraclePathKind::kEpsCircuit:
      return "eps-circuit";
    case OraclePathKind::kCircuitEps:
      return "circuit-eps";
  }
  return "?";
}

absl::StatusOr<OracleRouting> InstalledRouting(const TrafficMatrix& demand,
                                               const OracleFabric& fabric,
                                               const std::vector<UndirectedCircuit>& circuits,
                                               const OracleOptions& options) {
  if (absl::Status s = CheckDemand(demand, fabric); !s.ok()) return s;
  absl::StatusOr<std::vector<int>> counts = CircuitCounts(fabric, circuits);
  if (!counts.ok()) return counts.status();
  OracleRouting r;
  absl::StatusOr<double> floor = PathLp(demand, fabric, &*counts, options).Solve(nullptr, &r);
  if (!floor.ok()) return floor.status();
  r.floor_s = *floor;
  if (!std::isfinite(r.floor_s) || r.floor_s == 0) {
    r.paths.assign(static_cast<size_t>(fabric.hosts()) * fabric.hosts(), {});
  }
  return r;
}

absl::StatusOr<Relaxation> RelaxedFloor(const TrafficMatrix& demand, const OracleFabric& fabric,
                                        const OracleOptions& options) {
  if (absl::Status s = CheckDemand(demand, fabric); !s.ok()) return s;
  Relaxation r;
  absl::StatusOr<double> lb = PathLp(demand, fabric, nullptr, options).Solve(&r.circuits);
  if (!lb.ok()) return lb.status();
  r.lower_bound_s = *lb;
  return r;
}

}  // namespace mixnet::planner
