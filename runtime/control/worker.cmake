# mixnet_control_worker: WorkerAgent (the worker side of mixnet.control.v1)
# and the proto <-> runtime conversions it shares with the controller.
add_library(mixnet_control_proto_convert topology_proto.cc)
target_link_libraries(mixnet_control_proto_convert PUBLIC mixnet_proto_control mixnet_router
  mixnet_locality absl::status absl::statusor absl::strings)
add_library(mixnet_control_worker worker_agent.cc plan_tracker.cc controller_channel.cc)
target_link_libraries(mixnet_control_worker PUBLIC mixnet_control_proto_convert mixnet_router
  mixnet_grpc_tls
  mixnet_cluster mixnet_locality absl::status absl::statusor absl::time absl::synchronization
  PRIVATE mixnet_common mixnet_proto_control)
