// Test hooks of the in-process libibverbs simulation (fake_ibverbs.cc).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
// Number of devices ("fake0", "fake1", ...) and their link layer. Call before
// opening devices.
void fake_ibverbs_configure(int num_devices, int ethernet);
// Times a SEND or WRITE WITH IMMEDIATE found no posted receive (receiver not
// ready). The transport's credits should keep this at zero.
uint64_t fake_ibverbs_rnr_events();
// Work requests that failed (protection, length, retry errors), for checks.
uint64_t fake_ibverbs_error_completions();
// Successful memory registrations so far (ibv_reg_mr and friends).
uint64_t fake_ibverbs_reg_mr_calls();
// Memory registrations currently alive.
int64_t fake_ibverbs_live_mrs();
// Dark fabric (a cut circuit): while set, no send reaches its peer; each
// fails with IBV_WC_RETRY_EXC_ERR once its queue pair's RC retries (retry
// count + 1 tries of the ACK timeout) would have run out.
void fake_ibverbs_set_dark(int dark);
// Queue pairs currently alive.
int64_t fake_ibverbs_live_qps();
// Queue pairs moved to RTR so far, and the address vector of the i-th:
// service level, whether it is global (has a GRH) and the GRH's traffic class.
int fake_ibverbs_rtr_count();
// Queue pairs moved to RTS so far, and the i-th's ACK timeout and retry count.
int fake_ibverbs_rts_count();
void fake_ibverbs_rts(int i, int* timeout, int* retry_cnt);
void fake_ibverbs_rtr(int i, int* sl, int* global, int* traffic_class);
// dma-buf support of the adapters (default on): off, ibv_reg_dmabuf_mr fails
// with EOPNOTSUPP as on a kernel or provider without it.
void fake_ibverbs_set_dmabuf(int supported);
// Peer memory: ibv_reg_mr of a range inside [gpu_addr, gpu_addr + len) is
// reached by the NIC at the same offset of `nic_view` (as nvidia-peermem
// resolves GPU pages). The CPU's gpu_addr may be inaccessible (PROT_NONE).
void fake_ibverbs_add_peer_memory(void* gpu_addr, size_t len, void* nic_view);
void fake_ibverbs_clear_peer_memory();
// RDMA READs delivered so far.
uint64_t fake_ibverbs_rdma_reads();
}
