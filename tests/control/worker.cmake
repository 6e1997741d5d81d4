mixnet_add_test(NAME worker_agent_test SOURCES worker_agent_test.cc
  LIBS mixnet_control_worker mixnet_proto_control LABELS cpu TIMEOUT 120)
