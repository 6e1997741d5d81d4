# Install rules, included from the top-level CMakeLists.txt
# after every target exists; locations from cmake/MixnetInstallDirs.cmake.
# Each file belongs to one install component, and each component but `dev`
# is one Debian package (cmake/MixnetPackaging.cmake):
#   common       libmixnet_proto_control.so in <libdir>/mixnet (private)
#   nccl_plugin  libnccl-net-mixnet.so in <libdir> (NCCL_NET_PLUGIN=mixnet finds it)
#   ocsd         mixnet-ocsd, its systemd unit and /etc/mixnet/mixnet-ocsd.env
#   controller   mixnet-controller, its unit and /etc/mixnet/mixnet-controller.env
#   tools        mixnetctl, mixnet-fabric and the benchmarks
#   cuda_tools   mixnet_moe_kernels_bench (CUDA builds; not packaged)
#   python       the mixnet package in MIXNET_INSTALL_PYTHONDIR
#   dev          the runtime's headers, static libraries and CMake package
#                (find_package(MixNet CONFIG) -> MixNet::runtime)
# `cmake --install <build> [--prefix P] [--component C]` installs all or one.
# Configuration files go to /etc/mixnet when the prefix is /usr (as
# GNUInstallDirs' SYSCONFDIR), else to <prefix>/etc/mixnet; the choice is made
# when installing, so the packages (CPack installs with prefix /usr) get /etc
# whatever prefix the build folder was configured with.
include(CMakePackageConfigHelpers)

set(_pkg ${CMAKE_SOURCE_DIR}/packaging)

# --- common: the private shared library -------------------------------------
install(TARGETS mixnet_proto_control
  LIBRARY DESTINATION ${MIXNET_INSTALL_PRIVATE_LIBDIR} COMPONENT common)

# --- nccl_plugin ----------------------------------------------------------------
# RUNPATH: $ORIGIN too, so that the plugin and libmixnet_proto_control.so
# copied into one folder by hand still work (plugins/nccl_net/README.md).
mixnet_install_rpath(nccl_net_mixnet ${CMAKE_INSTALL_LIBDIR})
set_property(TARGET nccl_net_mixnet APPEND PROPERTY INSTALL_RPATH "$ORIGIN")
install(TARGETS nccl_net_mixnet LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT nccl_plugin)

# --- executables -------------------------------------------------------------
# mixnet-demo and mixnet_fabricsim are not installed: they read data files
# from the source tree (MIXNET_DEMO_PRICES_PATH, MIXNET_SIM_DATA_DIR).
set(_tools mixnetctl mixnet-fabric mixnet-oracle)
foreach(_bench mixnet_alltoall_perf mixnet_alltoall_gloo mixnet_alltoall_mpi mixnet_ocs_bench
    mixnet_planner_bench mixnet_nccl_plugin_bench mixnet_tcp_bidir_bench mixnet_route_bench)
  if(TARGET ${_bench})
    list(APPEND _tools ${_bench})
  endif()
endforeach()
set(_executables mixnet-ocsd mixnet-controller ${_tools})
# The CUDA benchmark links libcudart from /usr/local/cuda, which no Debian
# package provides: `cmake --install` installs it (component cuda_tools),
# the packages do not.
if(TARGET mixnet_moe_kernels_bench)
  list(APPEND _executables mixnet_moe_kernels_bench)
  install(TARGETS mixnet_moe_kernels_bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
    COMPONENT cuda_tools)
endif()
foreach(_exe IN LISTS _executables)
  mixnet_install_rpath(${_exe} ${CMAKE_INSTALL_BINDIR})
endforeach()
install(TARGETS mixnet-ocsd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ocsd)
install(TARGETS mixnet-controller RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT controller)
install(TARGETS ${_tools} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT tools)

# --- the daemons' units and configuration -------------------------------------
# mixnet_install_sysconf(<component> <files...>): into /etc/mixnet or
# <prefix>/etc/mixnet, decided at install time (see the header).
function(mixnet_install_sysconf component)
  foreach(_f IN LISTS ARGN)
    install(CODE "
      if(CMAKE_INSTALL_PREFIX MATCHES \"^/usr/?$\")
        set(_mixnet_etc /etc/mixnet)
      else()
        set(_mixnet_etc \"\${CMAKE_INSTALL_PREFIX}/etc/mixnet\")
      endif()
      file(INSTALL DESTINATION \"\${_mixnet_etc}\" TYPE FILE FILES \"${_f}\")"
      COMPONENT ${component})
  endforeach()
endfunction()
foreach(_d ocsd controller)
  install(FILES ${_pkg}/systemd/mixnet-${_d}.service
    DESTINATION ${MIXNET_INSTALL_SYSTEMDUNITDIR} COMPONENT ${_d})
  mixnet_install_sysconf(${_d} ${_pkg}/etc/mixnet-${_d}.env)
endforeach()
install(FILES ${_pkg}/systemd/mixnet-ocsd-netns.conf
  DESTINATION ${CMAKE_INSTALL_DATADIR}/mixnet/systemd COMPONENT ocsd)

# --- python ------------------------------------------------------------------
if(TARGET mixnet_python)
  mixnet_install_rpath(mixnet_python ${MIXNET_INSTALL_PYTHONDIR}/mixnet)
  install(TARGETS mixnet_python LIBRARY DESTINATION ${MIXNET_INSTALL_PYTHONDIR}/mixnet
    COMPONENT python)
  file(GLOB _mixnet_py CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/python/mixnet/*.py)
  install(FILES ${_mixnet_py} DESTINATION ${MIXNET_INSTALL_PYTHONDIR}/mixnet COMPONENT python)
endif()

# --- dev: MixNet::runtime ------------------------------------------------------
# The runtime's static libraries (see runtime/CMakeLists.txt) without the
# control plane (generated protobuf code) and the CUDA kernels. Headers keep
# their tree: #include "runtime/router/route_table.h" as inside the project.
set(_runtime_libs mixnet_common mixnet_cluster mixnet_rendezvous mixnet_transport
  mixnet_locality mixnet_planner mixnet_router mixnet_collectives mixnet_moe)
set(_runtime_export ${_runtime_libs})
if(TARGET mixnet_transport_verbs)
  list(APPEND _runtime_export mixnet_transport_verbs mixnet_ibverbs)
endif()
set(MIXNET_RUNTIME_LIBRARIES ${_runtime_export})
add_library(mixnet_runtime INTERFACE)
target_link_libraries(mixnet_runtime INTERFACE ${_runtime_libs})
target_include_directories(mixnet_runtime INTERFACE
  $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}> $<INSTALL_INTERFACE:${MIXNET_INSTALL_INCLUDEDIR}>)
if(MIXNET_SANITIZE)
  # Instrumented static libraries need the sanitizer runtimes where they are linked.
  target_link_options(mixnet_runtime INTERFACE -fsanitize=address -fsanitize=undefined)
endif()
set_target_properties(mixnet_runtime PROPERTIES EXPORT_NAME runtime)
foreach(_lib IN LISTS _runtime_export)
  target_include_directories(${_lib} INTERFACE $<INSTALL_INTERFACE:${MIXNET_INSTALL_INCLUDEDIR}>)
  string(REGEX REPLACE "^mixnet_" "" _name ${_lib})
  set_target_properties(${_lib} PROPERTIES EXPORT_NAME ${_name})
endforeach()
install(TARGETS mixnet_runtime ${_runtime_export} EXPORT MixNetTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT dev)
install(EXPORT MixNetTargets NAMESPACE MixNet:: DESTINATION ${MIXNET_INSTALL_CMAKEDIR}
  COMPONENT dev)
set(_header_excludes PATTERN control EXCLUDE PATTERN cuda EXCLUDE
  PATTERN grpc_server_limits.h EXCLUDE)
if(NOT TARGET mixnet_transport_verbs)
  list(APPEND _header_excludes PATTERN verbs EXCLUDE)
endif()
install(DIRECTORY ${CMAKE_SOURCE_DIR}/runtime/ DESTINATION ${MIXNET_INSTALL_INCLUDEDIR}/runtime
  COMPONENT dev FILES_MATCHING PATTERN "*.h" ${_header_excludes})
set(MIXNET_CONFIG_HAVE_VERBS ${MIXNET_HAVE_VERBS})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/MixNetConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/MixNetConfig.cmake INSTALL_DESTINATION ${MIXNET_INSTALL_CMAKEDIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/MixNetConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/MixNetConfig.cmake
  ${CMAKE_BINARY_DIR}/cmake/MixNetConfigVersion.cmake
  DESTINATION ${MIXNET_INSTALL_CMAKEDIR} COMPONENT dev)

include(MixnetPackaging)
