// Workloads for mixnet_planner_bench: per-region byte matrices (uniform,
// Zipf-skewed pairs, the paper's 8-expert skew), region cabling (alpha OCS
// NICs cabled to shared 384-port switches, the rest on EPS) and the paper's
// initial random alpha-regular topology. Deterministic for a seed; main
// thread only.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/cluster/cluster_spec.h"
#include "runtime/locality/traffic_matrix.h"
#include "runtime/planner/planner.h"

namespace mixnet::bench {

enum class Traffic { kUniform, kZipf, kExpert8 };
const char* TrafficName(Traffic t);

struct FabricParams {
  int nics = 8;                   // NICs per host
  int alpha = 6;                  // of which cabled to the OCS
  double gbps = 400;              // per NIC
  int gpus_per_host = 8;          // for the "gpus" column
  int switch_ports = 384;         // Polatis Series 7000
  double bytes_per_host = 805e6;  // dispatch bytes one host sends per all-to-all
  double zipf_s = 1.1;            // Zipf exponent of the skewed pair workload
};

// `count` regions of `hosts` hosts each; region r's hosts are "h<global index>".
std::vector<planner::RegionInput> MakeRegions(int count, int hosts, const FabricParams& p);

// One region's byte matrix (hosts x hosts; the diagonal stays local):
//  - uniform: every host sends about bytes_per_host / hosts to every host
//    (each entry perturbed by at most +-5 %, as real gates never split evenly);
//  - zipf: each source spreads bytes_per_host over destinations by a Zipf(s)
//    law over a random order of them (its own hot peers);
//  - expert8: host j holds expert j % 8 (or a share of it when hosts > 8),
//    expert shares 29.6, 17.1, 3.1, 9.9, 12.2, 9.2, 2.8, 16.2 %, each source's
//    shares perturbed by at most +-5 % ("nearly the same from every source").
TrafficMatrix MakeTraffic(Traffic kind, int hosts, const FabricParams& p, std::mt19937_64& rng);

// A random alpha-regular simple graph on the region's ports (the paper's
// initial topology); falls back to fewer circuits when no such graph is found.
std::vector<planner::PlannedCircuit> RandomRegular(const planner::Region& region,
                                                   std::mt19937_64& rng);

}  // namespace mixnet::bench
