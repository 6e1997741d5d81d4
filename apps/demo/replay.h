// `mixnet-demo simulate --run-dir DIR`: the fabric simulator's emulation
// mode (issue 22 item 5) run on a kept demo run (`mixnet-demo --keep-dir`)
// instead of a live one. For every phase folder of DIR (eps, oversub,
// static, mixnet, nonblocking) it reads what the orchestrator wrote there
// (config.json: workload, step model, router, relays, burst, switching time,
// leaf uplinks; spec.yaml: hosts, NICs, rates, circuits) and what the
// workers measured (results/rank*.jsonl: per all-to-all the times, the NIC
// counters and, for mixnet, the circuits and plan rank 0 ran), predicts each
// iteration and all-to-all with the same SimulatePhase the live demo calls,
// and prints them beside the measurements: a table, or with `json` one
// object per fabric (`fabric`, `iteration_ms`, `simulated_ms`, `error`,
// `alltoall_ms`, `simulated_alltoall_ms`, `simulated_reconfig_ms`,
// `floor_ms`, `busiest_nic_utilisation`) and a summary. The folder may have
// been moved: paths are taken relative to DIR. Main thread.
#pragma once

#include <string>

namespace mixnet::demo {

// Exit code: 0 when every phase found was simulated, 1 when one could not
// be (its reason printed), 2 when DIR holds no phase.
int RunSimulateCommand(const std::string& run_dir, bool json);

}  // namespace mixnet::demo
