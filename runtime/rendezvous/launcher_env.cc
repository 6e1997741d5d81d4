// Launcher environments (launcher_env.h): which launcher started this
// process, and what it says about the job.
#include "runtime/rendezvous/launcher_env.h"

#include <cstdlib>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mixnet::rendezvous {
namespace {

constexpr int kDefaultStorePort = 29501;

// A launcher's variables for rank, world size and local rank.
struct Launcher {
  const char* name;
  const char* rank;
  const char* world;
  const char* local_rank;
};

constexpr Launcher kLaunchers[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

absl::StatusOr<int> IntVar(const EnvLookup& env, const char* launcher, const std::string& name,
                           int min) {
  std::optional<std::string> v = env(name);
  int out = 0;
  if (!v.has_value() || !absl::SimpleAtoi(*v, &out) || out < min) {
    return absl::InvalidArgumentError(absl::StrCat("launcher environment (", launcher, "): ", name,
                                                   " = '", v.value_or(""),
                                                   "' is not an integer >= ", min));
  }
  return out;
}

// The store's port: MIXNET_STORE_PORT, else MASTER_PORT + 1, else the default.
absl::StatusOr<int> StorePort(const EnvLookup& env, const Settings& settings,
                              const char* launcher) {
  if (settings.store_port != 0) {
    if (settings.store_port < 1 || settings.store_port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("MIXNET_STORE_PORT = ", settings.store_port, " is not a port (1..65535)"));
    }
    return static_cast<int>(settings.store_port);
  }
  if (env("MASTER_PORT").has_value()) {
    absl::StatusOr<int> p = IntVar(env, launcher, "MASTER_PORT", 1);
    if (!p.ok()) return p.status();
    if (*p >= 65535) {
      return absl::InvalidArgumentError(absl::StrCat(
          "launcher environment (", launcher, "): MASTER_PORT ", *p,
          " leaves no port above it for the store; set MIXNET_STORE_PORT or MIXNET_STORE"));
    }
    return *p + 1;
  }
  return kDefaultStorePort;
}

}  // namespace

EnvLookup ProcessEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

absl::StatusOr<std::string> FirstSlurmHost(const std::string& nodelist) {
  auto bad = [&](const char* why) {
    return absl::InvalidArgumentError(
        absl::StrCat("Slurm node list '", nodelist, "' is malformed: ", why));
  };
  if (nodelist.empty()) return bad("empty");
  // The first entry: up to the first comma outside brackets.
  size_t end = 0;
  int depth = 0;
  for (; end < nodelist.size(); ++end) {
    const char ch = nodelist[end];
    if (ch == '[') ++depth;
    if (ch == ']' && --depth < 0) return bad("']' without '['");
    if (ch == ',' && depth == 0) break;
  }
  if (depth != 0) return bad("'[' without ']'");
  const std::string entry = nodelist.substr(0, end);
  const size_t open = entry.find('[');
  if (open == std::string::npos) {
    if (entry.empty()) return bad("empty first entry");
    return entry;
  }
  const size_t close = entry.find(']', open);
  if (entry.find('[', open + 1) < close) return bad("nested brackets");
  const std::string range = entry.substr(open + 1, close - open - 1);
  // The first number of the range list keeps its zero padding.
  const std::string first = range.substr(0, range.find_first_of(",-"));
  if (first.empty() || first.find_first_not_of("0123456789") != std::string::npos) {
    return bad("a range that does not start with a number");
  }
  return absl::StrCat(entry.substr(0, open), first, entry.substr(close + 1));
}

absl::StatusOr<LaunchInfo> LaunchFromEnvironment(const EnvLookup& env, const Settings& settings,
                                                 StoreNeed need) {
  for (const Launcher& l : kLaunchers) {
    std::vector<std::string> set, missing;
    for (const char* var : {l.rank, l.world, l.local_rank}) {
      if (env(var).has_value()) {
        set.push_back(var);
      } else if (var != l.local_rank) {  // optional (launcher_env.h)
        missing.push_back(var);
      }
    }
    if (set.empty()) continue;
    if (!missing.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("launcher environment (", l.name, "): ", absl::StrJoin(set, ", "),
                       " set but ", absl::StrJoin(missing, ", "),
                       " not; set them, or give rank, world size and store explicitly"));
    }
    LaunchInfo info;
    info.launcher = l.name;
    absl::StatusOr<int> world = IntVar(env, l.name, l.world, 1);
    if (!world.ok()) return world.status();
    absl::StatusOr<int> rank = IntVar(env, l.name, l.rank, 0);
    if (!rank.ok()) return rank.status();
    int local = -1;
    if (env(l.local_rank).has_value()) {
      absl::StatusOr<int> v = IntVar(env, l.name, l.local_rank, 0);
      if (!v.ok()) return v.status();
      local = *v;
    }
    if (*rank >= *world) {
      return absl::InvalidArgumentError(absl::StrCat("launcher environment (", l.name,
                                                     "): ", l.rank, " = ", *rank, " is not below ",
                                                     l.world, " = ", *world));
    }
    info.world = *world;
    info.rank = *rank;
    info.local_rank = local;
    if (!settings.store.empty()) {
      info.store = settings.store;
      return info;
    }
    std::string master = env("MASTER_ADDR").value_or("");
    if (master.empty() && info.launcher == "slurm") {
      std::optional<std::string> nodes = env("SLURM_STEP_NODELIST");
      if (!nodes.has_value()) nodes = env("SLURM_JOB_NODELIST");
      if (!nodes.has_value()) nodes = env("SLURM_NODELIST");
      if (nodes.has_value()) {
        absl::StatusOr<std::string> first = FirstSlurmHost(*nodes);
        if (!first.ok()) return first.status();
        master = *first;
      }
    }
    if (master.empty() && info.launcher == "openmpi") {
      absl::StatusOr<int> local_size = IntVar(env, l.name, "OMPI_COMM_WORLD_LOCAL_SIZE", 1);
      if (local_size.ok() && *local_size == info.world) master = "127.0.0.1";
    }
    if (master.empty() && need == StoreNeed::kOptional) return info;  // the caller has one
    if (master.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "launcher environment (", l.name,
          "): no host for the rendezvous store: set "
          "MASTER_ADDR to rank 0's host, or MIXNET_STORE (file:DIR or tcp://HOST:PORT)"));
    }
    absl::StatusOr<int> port = StorePort(env, settings, l.name);
    if (!port.ok()) return port.status();
    info.store = absl::StrCat("tcp://", master, ":", *port);
    return info;
  }
  return absl::NotFoundError(
      "no launcher environment (torchrun's RANK/WORLD_SIZE/LOCAL_RANK, Slurm's SLURM_PROCID/"
      "SLURM_NTASKS/SLURM_LOCALID or Open MPI's OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK)");
}

}  // namespace mixnet::rendezvous
