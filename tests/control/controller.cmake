# Controller tests (issue 5): in-process controller + sim OCS daemons + fake
# workers; restart / fencing; the mixnet-controller binary. Label cpu.
set(_ctl_test_libs mixnet_control_controller mixnet_ocs_switch_driver mixnet_ocs_service
  mixnet_ocs_sim nlohmann_json::nlohmann_json)
mixnet_add_test(NAME controller_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_test.cc
  LIBS ${_ctl_test_libs}
  LABELS cpu
  TIMEOUT 120)
mixnet_add_test(NAME controller_restart_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_restart_test.cc
  LIBS ${_ctl_test_libs} mixnet_proto_grpc_health
  LABELS cpu
  TIMEOUT 120)
mixnet_build_paths(controller_restart_test MIXNET_CONTROLLER_BIN "$<TARGET_FILE:mixnet-controller>")
add_dependencies(controller_restart_test mixnet-controller)
if(TARGET mixnet_control_worker)
  mixnet_add_test(NAME controller_plan_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_plan_test.cc
    LIBS ${_ctl_test_libs} mixnet_control_worker
    LABELS cpu
    TIMEOUT 120)
  # mixnet-controller's --ocs-tls-* to a mixnet-ocsd requiring mTLS
  # (certificates made by openssl at test time).
  mixnet_add_test(NAME controller_ocs_tls_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_ocs_tls_test.cc
    LIBS ${_ctl_test_libs} mixnet_control_worker mixnet_ocs_client
    LABELS cpu
    TIMEOUT 120)
  mixnet_build_paths(controller_ocs_tls_test
    MIXNET_CONTROLLER_BIN "$<TARGET_FILE:mixnet-controller>"
    MIXNET_OCSD_BIN "$<TARGET_FILE:mixnet-ocsd>")
  add_dependencies(controller_ocs_tls_test mixnet-controller mixnet-ocsd)
  # A switch failing mid-round: the others put back, workers consistent.
  mixnet_add_test(NAME controller_rollback_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_rollback_test.cc
    LIBS ${_ctl_test_libs} mixnet_control_worker
    LABELS cpu
    TIMEOUT 120)
  # The controller's own API over mTLS: certificates bound to hosts.
  mixnet_add_test(NAME controller_tls_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_tls_test.cc
    LIBS ${_ctl_test_libs} mixnet_control_worker
    LABELS cpu
    TIMEOUT 120)
  mixnet_add_test(NAME controller_agent_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_agent_test.cc
    LIBS ${_ctl_test_libs} mixnet_control_worker
    LABELS cpu
    TIMEOUT 120)
endif()
mixnet_add_test(NAME controller_limits_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_limits_test.cc
  LIBS ${_ctl_test_libs}
  LABELS cpu
  TIMEOUT 120)
mixnet_add_test(NAME controller_switch_time_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_switch_time_test.cc
  LIBS ${_ctl_test_libs}
  LABELS cpu
  TIMEOUT 120)
mixnet_add_test(NAME controller_probe_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_probe_test.cc
  LIBS ${_ctl_test_libs} mixnet_proto_grpc_health
  LABELS cpu
  TIMEOUT 120)
mixnet_build_paths(controller_probe_test MIXNET_CONTROLLER_BIN "$<TARGET_FILE:mixnet-controller>")
add_dependencies(controller_probe_test mixnet-controller)
# Prometheus metrics (--metrics-listen): rounds, decisions, planner time,
# workers scraped over HTTP; the binary's flags and listen policy.
mixnet_add_test(NAME controller_metrics_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/controller_metrics_test.cc
  LIBS ${_ctl_test_libs}
  LABELS cpu
  TIMEOUT 60)
mixnet_build_paths(controller_metrics_test MIXNET_CONTROLLER_BIN "$<TARGET_FILE:mixnet-controller>")
add_dependencies(controller_metrics_test mixnet-controller)
# The warm-up sweep's rounds (pure; closed-form counts).
mixnet_add_test(NAME warm_sweep_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/warm_sweep_test.cc
  LIBS mixnet_control_controller
  LABELS cpu
  TIMEOUT 60)
