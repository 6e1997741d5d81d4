# mixnet_add_test(NAME <name> SOURCES <files...> LIBS <targets...> LABELS <labels...>
#                 [TIMEOUT <seconds>])
# One GoogleTest binary registered as one ctest test with the given labels
# (cpu, netns, gpu, rdma). Tests run with abseil's lock-order checks on
# (MIXNET_LOCK_CHECKS=1), so a lock-order inversion fails them.
function(mixnet_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "MIXNET_LOCK_CHECKS=1")
endfunction()
