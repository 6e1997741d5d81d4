# Debian packages, one per install component of
# cmake/MixnetInstall.cmake but `dev`, built by CPack from an already built
# folder (./scripts/package.sh; `cpack -G DEB` in the build folder):
#   mixnet-common       the private shared library the others load
#   mixnet-nccl-plugin  libnccl-net-mixnet.so
#   mixnet-ocsd         daemon, systemd unit, /etc/mixnet/mixnet-ocsd.env
#   mixnet-controller   daemon, systemd unit, /etc/mixnet/mixnet-controller.env
#   mixnet-tools        mixnetctl, mixnet-fabric, the benchmarks
#   python3-mixnet      the mixnet package in /usr/lib/python3/dist-packages
# Depends on Debian's libraries come from dpkg-shlibdeps (SHLIBDEPS), so a
# library linked later (e.g. prometheus-cpp) shows up without editing this
# file; Depends between the packages from CPACK_COMPONENT_<C>_DEPENDS (exact
# version). Binaries are stripped (RelWithDebInfo objects are large); set
# MIXNET_PACKAGE_STRIP=OFF to keep the debug information.
set(MIXNET_PACKAGE_MAINTAINER "MixNet maintainers <mixnet@localhost>" CACHE STRING
  "Maintainer field of the Debian packages")
set(MIXNET_PACKAGE_RELEASE "1" CACHE STRING "Debian revision of the packages (version 0.1.0-<this>)")
option(MIXNET_PACKAGE_STRIP "Strip the binaries in the Debian packages" ON)

set(_pkg ${CMAKE_SOURCE_DIR}/packaging)
set(_debian_out ${CMAKE_BINARY_DIR}/packaging/debian)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mixnet)
set(CPACK_PACKAGE_VENDOR "MixNet")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${MIXNET_PACKAGE_MAINTAINER}")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: each package's description (first line
# the synopsis, the rest wrapped under 80 columns) is its own.
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages)
set(CPACK_STRIP_FILES ${MIXNET_PACKAGE_STRIP})
# Install with DESTDIR and prefix /usr: files under /etc (see
# mixnet_install_sysconf) land in the package's /etc.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL common nccl_plugin ocsd controller tools)
if(TARGET mixnet_python)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${MIXNET_PACKAGE_RELEASE})
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libmixnet_proto_control.so is found here while packaging; it belongs to no
# installed package, so dpkg-shlibdeps leaves it out (--ignore-missing-info,
# CPack's default) and the component Depends name mixnet-common instead.
get_target_property(_proto_dir mixnet_proto_control BINARY_DIR)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${_proto_dir})
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_COMMON_PACKAGE_NAME mixnet-common)
set(CPACK_COMPONENT_COMMON_DESCRIPTION
  "MixNet private shared libraries\n\
libmixnet_proto_control.so (the control-plane messages) in\n\
/usr/lib/<multiarch>/mixnet, loaded by the NCCL plugin, mixnet-controller\n\
and the Python package; not for linking by other software.")

set(CPACK_DEBIAN_NCCL_PLUGIN_PACKAGE_NAME mixnet-nccl-plugin)
set(CPACK_DEBIAN_NCCL_PLUGIN_PACKAGE_SECTION libs)
set(CPACK_COMPONENT_NCCL_PLUGIN_DEPENDS common)
set(CPACK_COMPONENT_NCCL_PLUGIN_DESCRIPTION
  "MixNet network plugin for NCCL\n\
libnccl-net-mixnet.so (ncclNet v8 to v11) over MixNet's TCP and RDMA\n\
transports, following the OCS circuits the MixNet controller installs.\n\
Load it with NCCL_NET_PLUGIN=mixnet.")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME mixnet-tools)
# No tool links libmixnet_proto_control.so (package_test checks that every
# binary that does is in a package depending on mixnet-common).
# mixnet_ocs_bench starts mixnet-ocsd; mixnet_nccl_plugin_bench loads the
# plugin (--plugin /usr/lib/<multiarch>/libnccl-net-mixnet.so).
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS
  "mixnet-ocsd (= ${PROJECT_VERSION}-${MIXNET_PACKAGE_RELEASE}), mixnet-nccl-plugin (= ${PROJECT_VERSION}-${MIXNET_PACKAGE_RELEASE}), iproute2")
set(CPACK_COMPONENT_TOOLS_DESCRIPTION
  "MixNet command-line tools and benchmarks\n\
mixnetctl (the OCS driver's client), mixnet-fabric (the emulated cluster in\n\
network namespaces) and the benchmarks (mixnet_alltoall_perf,\n\
mixnet_ocs_bench, mixnet_planner_bench, mixnet_route_bench, ...).")

if(TARGET mixnet_python)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-mixnet)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
  set(CPACK_COMPONENT_PYTHON_DEPENDS common)
  # The extension module is built for this python3 (X.Y) only.
  execute_process(COMMAND ${MIXNET_PYTHON_EXECUTABLE} -c
    "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]};{sys.version_info[0]}.{sys.version_info[1] + 1}')"
    OUTPUT_VARIABLE _py_versions OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  list(GET _py_versions 0 _py_this)
  list(GET _py_versions 1 _py_next)
  set(CPACK_DEBIAN_PYTHON_PACKAGE_DEPENDS "python3 (>= ${_py_this}), python3 (<< ${_py_next})")
  set(CPACK_DEBIAN_PYTHON_PACKAGE_RECOMMENDS python3-torch)
  set(CPACK_COMPONENT_PYTHON_DESCRIPTION
  "MixNet runtime for Python\n\
import mixnet: the runtime's all-to-all for torch CPU tensors, gate reports\n\
to the MixNet controller and topology inspection.")
endif()

# The daemons: unit, dedicated system user made by the postinst (adduser),
# /etc/mixnet/<daemon>.env as a conffile.
foreach(_d ocsd controller)
  string(TOUPPER ${_d} _D)
  set(MIXNET_DAEMON mixnet-${_d})
  foreach(_script postinst prerm postrm)
    configure_file(${_pkg}/debian/${_script}.in ${_debian_out}/${_d}/${_script} @ONLY
      FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
        WORLD_READ WORLD_EXECUTE)
  endforeach()
  file(WRITE ${_debian_out}/${_d}/conffiles "/etc/mixnet/mixnet-${_d}.env\n")
  set(CPACK_DEBIAN_${_D}_PACKAGE_NAME mixnet-${_d})
  set(CPACK_DEBIAN_${_D}_PACKAGE_DEPENDS adduser)
  set(CPACK_DEBIAN_${_D}_PACKAGE_CONTROL_EXTRA
    ${_debian_out}/${_d}/postinst ${_debian_out}/${_d}/prerm ${_debian_out}/${_d}/postrm
    ${_debian_out}/${_d}/conffiles)
endforeach()
set(CPACK_DEBIAN_OCSD_PACKAGE_SUGGESTS mixnet-tools)
set(CPACK_COMPONENT_OCSD_DESCRIPTION
  "MixNet optical circuit switch driver daemon\n\
mixnet-ocsd serves the OcsDriver gRPC API for one switch (backends: sim,\n\
netns, Polatis SCPI and TL1), keeping the desired state in\n\
/var/lib/mixnet-ocsd. Unit mixnet-ocsd.service, settings in\n\
/etc/mixnet/mixnet-ocsd.env.")
set(CPACK_COMPONENT_CONTROLLER_DEPENDS common)
set(CPACK_DEBIAN_CONTROLLER_PACKAGE_RECOMMENDS mixnet-ocsd)
set(CPACK_COMPONENT_CONTROLLER_DESCRIPTION
  "MixNet controller daemon\n\
mixnet-controller plans OCS circuits per region from the workers' traffic\n\
reports and reconfigures the switches through their mixnet-ocsd, keeping\n\
its fencing epoch in /var/lib/mixnet-controller. Unit\n\
mixnet-controller.service, settings in /etc/mixnet/mixnet-controller.env.")

include(CPack)
