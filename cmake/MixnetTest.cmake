# mixnet_add_test(NAME <name> SOURCES <files...> LIBS <targets...> LABELS <labels...>
#                 [TIMEOUT <seconds>] [PARTS <suffix> <label> <cases> ...])
# One GoogleTest binary registered as one ctest test with the given labels
# (cpu, netns, gpu, rdma). Tests run with abseil's lock-order checks on
# (MIXNET_LOCK_CHECKS=1), so a lock-order inversion fails them.
#
# PARTS splits the binary's cases over several ctest tests, so that cases
# with different needs report apart: each triple registers <name>_<suffix>
# with label <label> running only <cases> (a --gtest_filter pattern list,
# e.g. "FabricNamesTest.*" or "*/verbs_*:Foo.Bar"); <name> itself runs the
# other cases under LABELS. E.g. a netns binary with one case that needs no
# root: PARTS cpu cpu "Suite.ThatCase" -> <name> (netns) reports "Skipped"
# without root, <name>_cpu runs the one case everywhere.
#
# Skips: the binary's main() is tests/mixnet_test_main.cc (target
# mixnet_test_main, defined in tests/CMakeLists.txt), not gtest_main. When
# every case it runs calls GTEST_SKIP() (and none fails) it prints
# "MIXNET_SKIPPED: <reason>" and exits with MIXNET_SKIP_RETURN_CODE, which
# ctest counts as "Skipped"; when only some cases skip, the binary passes
# (the others ran) and prints "MIXNET_PARTLY_SKIPPED" lines.
#
# quick: a ctest test whose name is in MIXNET_QUICK_TESTS (tests/quick.cmake,
# read before the test folders) also gets the label "quick": the fast unit
# tests a developer runs after each edit (`ctest -L quick`, under 3 minutes).
#
# Each test is also added to the global property MIXNET_TESTS_<label> for
# each of its labels; tests/CMakeLists.txt turns those into the build targets
# mixnet_tests_<label> (what `ctest -L <label>` needs, see scripts/test.sh).
set(MIXNET_SKIP_RETURN_CODE 77)

function(mixnet_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;PARTS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gmock mixnet_test_main)
  if(MIXNET_FAST_TEST_BUILD AND NOT MIXNET_SANITIZE)
    # The test's own sources only (the code under test is in libraries with
    # the build type's flags). CPU time for tests/control/controller_metrics_test.cc:
    # -O2 -g (with -fno-var-tracking) 14.8-22 s, -O1 -g1 10.8-15 s, measured in pairs.
    # The sanitizer build already compiles everything at -O0 -g1.
    target_compile_options(${T_NAME} PRIVATE
      "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:RelWithDebInfo>>:-O1;-g1>")
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  # (ctest name, labels, gtest filter) of every ctest test of the binary.
  set(names ${T_NAME})
  set(labels_of_${T_NAME} ${T_LABELS})
  set(filter_of_${T_NAME} "")
  list(LENGTH T_PARTS nparts)
  math(EXPR rem "${nparts} % 3")
  if(NOT rem EQUAL 0)
    message(FATAL_ERROR "mixnet_add_test(${T_NAME}): PARTS takes <suffix> <label> <cases> triples")
  endif()
  set(moved "")
  while(T_PARTS)
    list(POP_FRONT T_PARTS suffix label cases)
    set(part ${T_NAME}_${suffix})
    list(APPEND names ${part})
    set(labels_of_${part} ${label})
    set(filter_of_${part} "--gtest_filter=${cases}")
    if(moved)
      string(APPEND moved ":")
    endif()
    string(APPEND moved "${cases}")
  endwhile()
  if(moved)
    set(filter_of_${T_NAME} "--gtest_filter=-${moved}")
  endif()
  set(env "MIXNET_LOCK_CHECKS=1")
  if(MIXNET_SANITIZE AND "gpu" IN_LIST T_LABELS)
    # The CUDA runtime maps memory where AddressSanitizer keeps its shadow
    # gap; with the gap protected (ASan's default) CUDA calls fail.
    list(APPEND env "ASAN_OPTIONS=protect_shadow_gap=0")
  endif()
  foreach(name IN LISTS names)
    set_property(GLOBAL APPEND PROPERTY MIXNET_ALL_TESTS ${name})
    if(name IN_LIST MIXNET_QUICK_TESTS)
      list(APPEND labels_of_${name} quick)
    endif()
    add_test(NAME ${name} COMMAND ${T_NAME} ${filter_of_${name}})
    set_tests_properties(${name} PROPERTIES LABELS "${labels_of_${name}}" TIMEOUT ${T_TIMEOUT}
      SKIP_RETURN_CODE ${MIXNET_SKIP_RETURN_CODE} ENVIRONMENT "${env}")
    foreach(label IN LISTS labels_of_${name})
      set_property(GLOBAL APPEND PROPERTY MIXNET_TESTS_${label} ${T_NAME})
    endforeach()
  endforeach()
endfunction()
