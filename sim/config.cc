// YAML loading of model configs and the price file (see config.h). Main thread.
#include "sim/config.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace mixnet::sim {
namespace {

// Reads `key` from `node` into `out` when present; InvalidArgument naming the
// file and key when it does not convert.
template <typename T>
absl::Status Read(const YAML::Node& node, const char* key, T& out, const std::string& file) {
  const YAML::Node v = node[key];
  if (!v) return absl::OkStatus();
  try {
    out = v.as<T>();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": field '", key, "': ", e.what()));
  }
  return absl::OkStatus();
}

#define SIM_READ(node, key, out, file)    \
  do {                                    \
    auto s_ = Read(node, key, out, file); \
    if (!s_.ok()) return s_;              \
  } while (0)

absl::StatusOr<YAML::Node> LoadFile(const std::string& path) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", e.what()));
  }
}

}  // namespace

absl::Status UseTrace(ModelConfig& m, const std::string& path, const std::string& placement) {
  if (placement != "contiguous" && placement != "round_robin")
    return absl::InvalidArgumentError(
        absl::StrCat("trace placement '", placement, "' (contiguous or round_robin)"));
  m.skew.kind = "trace";
  m.skew.trace = path;
  m.skew.placement = placement;
  return absl::OkStatus();
}

absl::StatusOr<GpuSpec> BuiltinGpu(const std::string& name) {
  GpuSpec g;
  g.name = name;
  if (name == "h100") return g;
  if (name == "a100") {
    g.peak_tflops = 312;
    g.hbm_GBps = 2039;
    g.nvlink_GBps = 300;
    return g;
  }
  return absl::NotFoundError(absl::StrCat("unknown GPU '", name, "' (built in: a100, h100)"));
}

absl::Status ModelConfig::Validate() const {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("model ", name, ": ", what));
  };
  if (layers < 1 || hidden < 1 || ffn_hidden < 1 || experts < 1 || seq_len < 1 || micro_batch < 1 ||
      micro_batches < 1 || dtype_bytes < 1 || heads < 1 || kv_heads < 1)
    return bad(
        "layers, hidden, ffn_hidden, heads, kv_heads, experts, seq_len, micro_batch, "
        "micro_batches and dtype_bytes must be >= 1");
  if (top_k < 1 || top_k > experts)
    return bad(absl::StrCat("top_k ", top_k, " not in [1, experts]"));
  if (dense_layers < 0 || dense_layers >= layers) return bad("dense_layers must be in [0, layers)");
  if (dp < 1 || tp < 1 || pp < 1 || ep < 1) return bad("dp, tp, pp, ep must be >= 1");
  if (static_cast<long>(dp) * ep * tp * pp != gpus)
    return bad(absl::StrCat("dp x ep x tp x pp = ", static_cast<long>(dp) * ep * tp * pp,
                            " but gpus = ", gpus));
  if (layers % pp != 0) return bad(absl::StrCat("layers ", layers, " not divisible by pp ", pp));
  if (experts % ep != 0) return bad(absl::StrCat("experts ", experts, " not divisible by ep ", ep));
  const int g = ep * tp;
  if (g % 8 != 0)
    return bad(absl::StrCat("ep x tp = ", g, " must be a multiple of 8 (GPUs per server)"));
  if (tp > 8 && tp % 8 != 0) return bad("tp above 8 must be a multiple of 8");
  if (gpu.peak_tflops <= 0 || gpu.hbm_GBps <= 0 || gpu.nvlink_GBps <= 0 || gpu.efficiency <= 0 ||
      gpu.efficiency > 1)
    return bad("gpu figures must be positive (efficiency in (0, 1])");
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> LoadModel(const std::string& path) {
  auto root = LoadFile(path);
  if (!root.ok()) return root.status();
  const YAML::Node& n = *root;
  ModelConfig m;
  m.name = std::filesystem::path(path).stem().string();
  SIM_READ(n, "name", m.name, path);
  SIM_READ(n, "layers", m.layers, path);
  SIM_READ(n, "dense_layers", m.dense_layers, path);
  SIM_READ(n, "hidden", m.hidden, path);
  SIM_READ(n, "ffn_hidden", m.ffn_hidden, path);
  SIM_READ(n, "heads", m.heads, path);
  SIM_READ(n, "kv_heads", m.kv_heads, path);
  SIM_READ(n, "experts", m.experts, path);
  SIM_READ(n, "top_k", m.top_k, path);
  SIM_READ(n, "shared_experts", m.shared_experts, path);
  SIM_READ(n, "seq_len", m.seq_len, path);
  SIM_READ(n, "micro_batch", m.micro_batch, path);
  SIM_READ(n, "micro_batches", m.micro_batches, path);
  SIM_READ(n, "dtype_bytes", m.dtype_bytes, path);
  SIM_READ(n, "gpus", m.gpus, path);
  if (const YAML::Node p = n["parallel"]) {
    SIM_READ(p, "dp", m.dp, path);
    SIM_READ(p, "tp", m.tp, path);
    SIM_READ(p, "pp", m.pp, path);
    SIM_READ(p, "ep", m.ep, path);
  }
  if (const YAML::Node g = n["gpu"]) {
    std::string gname = "h100";
    if (g.IsScalar()) {
      gname = g.as<std::string>();
    } else {
      SIM_READ(g, "name", gname, path);
    }
    auto base = BuiltinGpu(gname);
    if (base.ok()) {
      m.gpu = *base;
    } else if (g.IsScalar()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", base.status().message()));
    }
    m.gpu.name = gname;
    if (!g.IsScalar()) {
      SIM_READ(g, "peak_tflops", m.gpu.peak_tflops, path);
      SIM_READ(g, "hbm_GBps", m.gpu.hbm_GBps, path);
      SIM_READ(g, "nvlink_GBps", m.gpu.nvlink_GBps, path);
      SIM_READ(g, "efficiency", m.gpu.efficiency, path);
    }
  }
  if (const YAML::Node s = n["skew"]) {
    SIM_READ(s, "kind", m.skew.kind, path);
    SIM_READ(s, "zipf_s", m.skew.zipf_s, path);
    SIM_READ(s, "drift", m.skew.drift, path);
    SIM_READ(s, "noise", m.skew.noise, path);
    SIM_READ(s, "shares", m.skew.shares, path);
    SIM_READ(s, "trace", m.skew.trace, path);
    SIM_READ(s, "placement", m.skew.placement, path);
    SIM_READ(s, "seed", m.skew.seed, path);
    if (!m.skew.trace.empty() && std::filesystem::path(m.skew.trace).is_relative())
      m.skew.trace = (std::filesystem::path(path).parent_path() / m.skew.trace).string();
  }
  auto st = m.Validate();
  if (!st.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", st.message()));
  return m;
}

absl::StatusOr<ModelConfig> FindModel(const std::string& name_or_path, const std::string& dir) {
  if (std::filesystem::exists(name_or_path) && !std::filesystem::is_directory(name_or_path))
    return LoadModel(name_or_path);
  const std::string p = (std::filesystem::path(dir) / (name_or_path + ".yaml")).string();
  if (!std::filesystem::exists(p)) {
    std::string known;
    for (const auto& n : ListModels(dir)) absl::StrAppend(&known, known.empty() ? "" : ", ", n);
    return absl::NotFoundError(
        absl::StrCat("model '", name_or_path, "' not found in ", dir, " (known: ", known, ")"));
  }
  return LoadModel(p);
}

std::vector<std::string> ListModels(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".yaml") out.push_back(e.path().stem().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<LinkPrices> Prices::At(int gbps) const {
  auto it = by_gbps.find(gbps);
  if (it != by_gbps.end()) return it->second;
  std::string known;
  for (const auto& [g, p] : by_gbps) absl::StrAppend(&known, known.empty() ? "" : ", ", g);
  return absl::NotFoundError(
      absl::StrCat("no prices for ", gbps, " Gb/s links (price file has: ", known, ")"));
}

absl::StatusOr<Prices> LoadPrices(const std::string& path) {
  auto root = LoadFile(path);
  if (!root.ok()) return root.status();
  const YAML::Node& n = *root;
  Prices p;
  SIM_READ(n, "fibre_m", p.fibre_m, path);
  auto bom = [&](const char* key, TreeBom& b) -> absl::Status {
    if (const YAML::Node t = n[key]) {
      SIM_READ(t, "eps_ports", b.eps_ports, path);
      SIM_READ(t, "transceivers", b.transceivers, path);
      SIM_READ(t, "links", b.links, path);
    }
    return absl::OkStatus();
  };
  p.rail = {4, 5, 2};
  if (auto s = bom("fattree", p.fattree); !s.ok()) return s;
  if (auto s = bom("rail", p.rail); !s.ok()) return s;
  const YAML::Node links = n["links"];
  if (!links || !links.IsMap())
    return absl::InvalidArgumentError(absl::StrCat(path, ": missing map 'links' (per Gb/s)"));
  for (const auto& kv : links) {
    int gbps = 0;
    try {
      gbps = kv.first.as<int>();
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": link speed key is not an integer"));
    }
    LinkPrices lp;
    const YAML::Node& v = kv.second;
    SIM_READ(v, "transceiver", lp.transceiver, path);
    SIM_READ(v, "nic", lp.nic, path);
    SIM_READ(v, "eps_port", lp.eps_port, path);
    SIM_READ(v, "ocs_port", lp.ocs_port, path);
    SIM_READ(v, "patch_panel_port", lp.patch_panel_port, path);
    SIM_READ(v, "fibre_per_m", lp.fibre_per_m, path);
    if (lp.transceiver < 0 || lp.nic < 0 || lp.eps_port < 0 || lp.ocs_port < 0 ||
        lp.patch_panel_port < 0 || lp.fibre_per_m < 0)
      return absl::InvalidArgumentError(absl::StrCat(path, ": negative price at ", gbps, " Gb/s"));
    p.by_gbps[gbps] = lp;
  }
  return p;
}

}  // namespace mixnet::sim
