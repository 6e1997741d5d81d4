# The MixNet controller core (issue 5): Controller (planning, rounds, epochs),
# the mixnet.control.v1 gRPC service and server. Talks to switches through
# SwitchDriver (switch_driver.h); ocs_driver/client implements it.
add_library(mixnet_control_controller
  ${CMAKE_CURRENT_LIST_DIR}/epoch_store.cc
  ${CMAKE_CURRENT_LIST_DIR}/region_reports.cc
  ${CMAKE_CURRENT_LIST_DIR}/controller.cc
  ${CMAKE_CURRENT_LIST_DIR}/controller_metrics.cc
  ${CMAKE_CURRENT_LIST_DIR}/controller_rounds.cc
  ${CMAKE_CURRENT_LIST_DIR}/controller_rollback.cc
  ${CMAKE_CURRENT_LIST_DIR}/controller_warm.cc
  ${CMAKE_CURRENT_LIST_DIR}/warm_sweep.cc
  ${CMAKE_CURRENT_LIST_DIR}/controller_service.cc)
target_link_libraries(mixnet_control_controller
  PUBLIC mixnet_proto_control mixnet_planner mixnet_locality mixnet_cluster mixnet_common
         mixnet_grpc_server_limits mixnet_grpc_tls mixnet_metrics_exposer prometheus-cpp::core
         gRPC::grpc++ absl::status absl::statusor absl::synchronization absl::time
  PRIVATE gRPC::grpc++_reflection nlohmann_json::nlohmann_json absl::strings)
