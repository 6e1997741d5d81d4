# Finds the libraries the build uses. Required ones fail the configure step with
# the Debian package to install; optional ones set MIXNET_HAVE_<X>.
find_package(Threads REQUIRED)
find_package(absl REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBNL REQUIRED IMPORTED_TARGET libnl-3.0 libnl-route-3.0)

# GLPK (libglpk-dev): the all-to-all oracle's linear programs
# (runtime/planner/oracle.h). Required.
find_path(GLPK_INCLUDE_DIR glpk.h)
find_library(GLPK_LIBRARY glpk)
if(NOT GLPK_INCLUDE_DIR OR NOT GLPK_LIBRARY)
  message(FATAL_ERROR "MixNet: GLPK not found (apt-get install libglpk-dev, or ./scripts/install-deps.sh)")
endif()
add_library(mixnet_glpk INTERFACE)
target_include_directories(mixnet_glpk INTERFACE ${GLPK_INCLUDE_DIR})
target_link_libraries(mixnet_glpk INTERFACE ${GLPK_LIBRARY})

# RDMA verbs: optional.
set(MIXNET_HAVE_VERBS OFF)
if(MIXNET_WITH_VERBS)
  find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
  find_library(IBVERBS_LIBRARY ibverbs)
  if(IBVERBS_INCLUDE_DIR AND IBVERBS_LIBRARY)
    set(MIXNET_HAVE_VERBS ON)
    add_library(mixnet_ibverbs INTERFACE)
    target_include_directories(mixnet_ibverbs INTERFACE ${IBVERBS_INCLUDE_DIR})
    target_link_libraries(mixnet_ibverbs INTERFACE ${IBVERBS_LIBRARY})
  else()
    message(STATUS "MixNet: libibverbs not found (apt-get install libibverbs-dev); verbs transport disabled")
  endif()
endif()

# CUDA: optional, detected at /usr/local/cuda.
set(MIXNET_HAVE_CUDA OFF)
if(MIXNET_WITH_CUDA AND EXISTS /usr/local/cuda/bin/nvcc)
  set(MIXNET_HAVE_CUDA ON)
endif()

# Benchmark peers: Gloo and MPI (optional).
set(MIXNET_HAVE_GLOO OFF)
find_package(Gloo QUIET)
find_path(GLOO_INCLUDE_DIR gloo/alltoall.h)
find_library(GLOO_LIBRARY gloo)
if(GLOO_INCLUDE_DIR AND GLOO_LIBRARY)
  set(MIXNET_HAVE_GLOO ON)
endif()
find_package(MPI QUIET COMPONENTS CXX)
set(MIXNET_HAVE_MPI ${MPI_CXX_FOUND})

if(MIXNET_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MIXNET_BUILD_BENCH)
  find_package(benchmark QUIET)
endif()

# gRPC and protobuf (control plane): required.
find_package(Protobuf REQUIRED)
find_package(gRPC CONFIG REQUIRED)
# Prometheus metrics of the daemons (--metrics-listen): prometheus-cpp-dev.
find_package(prometheus-cpp CONFIG REQUIRED)
# ... over HTTPS with client certificates when the daemon has mTLS:
# libcpp-httplib-dev (civetweb's TLS in Debian 12 calls OpenSSL 1.1 functions
# that OpenSSL 3 lacks) and OpenSSL for the peer certificate's names.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
find_package(OpenSSL REQUIRED)
find_program(MIXNET_GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# mixnet_add_proto_library(NAME PROTOS a.proto b.proto [DEPS lib ...])
# Generates C++ messages and gRPC stubs for PROTOS (paths relative to
# ${CMAKE_SOURCE_DIR}/proto, also the import root) into the build tree and
# builds them as a static library NAME (SHARED: a shared one, for protos that
# several shared objects of one process use, so protobuf registers them once).
# Include as "mixnet/ocs/v1/x.pb.h".
function(mixnet_add_proto_library NAME)
  cmake_parse_arguments(ARG "SHARED" "" "PROTOS;DEPS" ${ARGN})
  set(root ${CMAKE_SOURCE_DIR}/proto)
  set(out ${CMAKE_BINARY_DIR}/proto_gen)
  set(srcs)
  foreach(proto ${ARG_PROTOS})
    string(REGEX REPLACE "\\.proto$" "" base ${proto})
    set(gen ${out}/${base}.pb.cc ${out}/${base}.pb.h ${out}/${base}.grpc.pb.cc ${out}/${base}.grpc.pb.h)
    add_custom_command(
      OUTPUT ${gen}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${out}
      COMMAND protobuf::protoc --proto_path=${root} --cpp_out=${out} --grpc_out=${out}
              --plugin=protoc-gen-grpc=${MIXNET_GRPC_CPP_PLUGIN} ${root}/${proto}
      DEPENDS ${root}/${proto} protobuf::protoc
      COMMENT "protoc ${proto}"
      VERBATIM)
    list(APPEND srcs ${out}/${base}.pb.cc ${out}/${base}.grpc.pb.cc)
  endforeach()
  if(ARG_SHARED)
    add_library(${NAME} SHARED ${srcs})
  else()
    add_library(${NAME} STATIC ${srcs})
  endif()
  target_include_directories(${NAME} PUBLIC ${out})
  target_link_libraries(${NAME} PUBLIC protobuf::libprotobuf gRPC::grpc++ ${ARG_DEPS})
  # Generated code is not ours to warn about.
  target_compile_options(${NAME} PRIVATE -w)
  # Each generated file compiles on its own: a unity batch includes it by its
  # absolute path, which protobuf's checks expand through __FILE__, so a
  # clone in another folder would miss ccache for the whole batch.
  set_target_properties(${NAME} PROPERTIES UNITY_BUILD OFF)
endfunction()
