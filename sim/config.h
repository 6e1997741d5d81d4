// Configuration of the fabric simulator, loaded from YAML files (yaml-cpp):
// model shapes (sim/models/*.yaml, with the GPU for the roofline and the
// expert-skew generator) and the price file (sim/prices.yaml). Plain value
// types; loaded once by the main thread.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mixnet::sim {

// A GPU for the compute roofline.
struct GpuSpec {
  std::string name = "h100";
  double peak_tflops = 989;  // dense bf16
  double hbm_GBps = 3350;    // memory bandwidth
  double nvlink_GBps = 450;  // per GPU, per direction
  double efficiency = 0.5;   // achieved fraction of peak FLOPs (MFU of the kernels)
};
// Built-in GPUs: "a100", "h100". NotFound otherwise.
absl::StatusOr<GpuSpec> BuiltinGpu(const std::string& name);

// Where the expert popularity comes from.
struct SkewSpec {
  std::string kind = "zipf";   // zipf | uniform | fixed | trace
  double zipf_s = 1.1;         // zipf exponent over a random expert order per layer
  double drift = 0.1;          // std-dev of the per-iteration log-popularity random walk
  double noise = 0.05;         // per source rank multiplicative noise (uniform +-noise)
  std::vector<double> shares;  // fixed: per-expert shares (repeated when shorter)
  std::string trace;           // trace: TrafficReport JSON file(s), one report per line
  // trace: where the trace's expert e lived: "contiguous" (blocks per rank, as
  // the simulator numbers experts and examples/moe_pytorch records them) or
  // "round_robin" (rank e % ranks, the emulated demo's default).
  std::string placement = "contiguous";
  unsigned seed = 1;
};

struct ModelConfig {
  std::string name;
  int layers = 32;       // transformer layers (all MoE unless dense_layers)
  int dense_layers = 0;  // leading dense layers (no all-to-all)
  int hidden = 4096;
  int ffn_hidden = 14336;  // per expert
  int heads = 32;
  int kv_heads = 8;
  int experts = 8;
  int top_k = 2;
  int shared_experts = 0;  // always-on experts (computed locally, no all-to-all)
  int seq_len = 4096;
  int micro_batch = 8;     // sequences per micro-batch per EP rank
  int micro_batches = 16;  // per pipeline, per iteration
  int dtype_bytes = 2;
  // Parallelism; DP is derived from --gpus as gpus / (EP * TP * PP) when the
  // GPU count is given on the command line, else taken from here.
  int dp = 2;
  int tp = 8;
  int pp = 8;
  int ep = 8;
  int gpus = 1024;  // nominal GPU count of the config
  GpuSpec gpu;
  SkewSpec skew;

  // DP x EP x TP x PP must equal gpus; layers divisible by PP; experts by EP;
  // EP x TP a multiple of 8 (a region is whole servers). InvalidArgument naming the field.
  absl::Status Validate() const;
};

// Drives `m` by a token-count trace: skew kind "trace", the file and the
// placement of its experts. InvalidArgument for an unknown placement.
absl::Status UseTrace(ModelConfig& m, const std::string& path, const std::string& placement);

// Loads a model from a YAML file. InvalidArgument naming the file and field.
absl::StatusOr<ModelConfig> LoadModel(const std::string& path);
// `name_or_path`: a file path, or a name looked up as <dir>/<name>.yaml.
absl::StatusOr<ModelConfig> FindModel(const std::string& name_or_path, const std::string& dir);
// Model names (file stems) found in `dir`.
std::vector<std::string> ListModels(const std::string& dir);

// Prices in US$ per unit at one link speed.
struct LinkPrices {
  double transceiver = 0;
  double nic = 0;
  double eps_port = 0;
  double ocs_port = 0;
  double patch_panel_port = 0;
  double fibre_per_m = 0.3;
};

// Bill of materials per GPU (= per NIC) of an electrical fat-tree tier set.
struct TreeBom {
  double eps_ports = 6;     // switch ports per NIC
  double transceivers = 7;  // including the NIC's own
  double links = 3;         // fibres per NIC
};

struct Prices {
  std::map<int, LinkPrices> by_gbps;  // link speed -> prices
  double fibre_m = 500;               // metres per fibre link
  TreeBom fattree;                    // non-blocking, 3 tiers
  TreeBom rail{4, 5, 2};              // rail-optimised (2 tiers)
  // Prices at a link speed; NotFound naming the speed and the known ones.
  absl::StatusOr<LinkPrices> At(int gbps) const;
};

absl::StatusOr<Prices> LoadPrices(const std::string& path);

}  // namespace mixnet::sim
