# MIXNET_QUICK_TESTS: the ctest tests labelled "quick" (cmake/MixnetTest.cmake),
# the inner loop's check before a commit (docs/developers.md):
#   ctest --test-dir build -L quick        or   ./scripts/test.sh -L quick
# The rule: every cpu-label test that ran under 5 s in a whole-suite run on the
# 2-core VM (ctest's own per-test times), except the Python package's test
# (it needs the extension module built) and the install test (it builds a
# consumer project). Together they ran in 54 s there. A new test that meets
# the rule belongs here; one that grows past it leaves. Every name must be a
# registered test (tests/CMakeLists.txt checks).
set(MIXNET_QUICK_TESTS
  alltoall_perf_launch_test
  cluster_spec_test
  controller_agent_test
  controller_limits_test
  controller_plan_test
  controller_probe_test
  controller_restart_test
  controller_switch_time_test
  controller_test
  cpu_affinity_test
  demo_e2e_test_cpu
  demo_simulation_test
  demo_step_test
  demo_workload_test
  emulated_fabric_test_cpu
  fluid_model_test
  launcher_env_test
  link_rate_test_cpu
  locality_collector_test
  locality_predictor_test
  lock_checks_test
  log_test
  mixnet_fabric_cli_test_cpu
  mixnetctl_test
  moe_reference_test
  nccl_net_api_test
  nccl_net_epoch_test
  nccl_net_gpu_direct_test
  nccl_net_handshake_test
  nccl_net_identity_test
  nccl_net_interface_choice_test
  nccl_net_mem_pin_test
  nccl_net_nic_test
  nccl_net_stripe_test
  nccl_net_transfer_test
  nccl_net_verbs_gpu_test
  nccl_plugin_bench_test
  netns_ocs_test_cpu
  ocs_bench_smoke_test
  ocs_client_test
  ocs_mtls_test
  ocs_output_test
  ocsd_daemon_test
  ocsd_limits_test
  ocsd_parts_test
  ocsd_polatis_test
  path_mover_stripe_test
  path_mover_test
  peer_runner_test
  planner_property_test
  planner_test
  polatis_backend_test
  polatis_fake_switch_test
  polatis_scpi_format_test
  polatis_tl1_backend_test
  progress_placement_test
  pull_test
  relay_test
  route_bench_e2e_test_cpu
  route_bench_test
  route_table_test
  route_table_v2_test
  settings_test
  sim_emulated_test
  sim_flow_test
  sim_model_test
  sim_router_check_test
  split_routing_test
  status_test
  verbs_collectives_test
  verbs_unit_test
  worker_agent_test
)
