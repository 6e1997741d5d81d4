# Install locations of MixNet (GNUInstallDirs plus MixNet's own), set before
# the subdirectories so that every install rule and RPATH uses the same ones.
# Included from the top-level CMakeLists.txt; the rules are in
# cmake/MixnetInstall.cmake, the Debian packages in cmake/MixnetPackaging.cmake.
#
# On Debian the library folder is lib/<multiarch> for every prefix (ld.so
# searches /usr/local/lib/<multiarch> too), not only for /usr as
# GNUInstallDirs chooses: the packages and `cmake --install` then lay files
# out alike whatever prefix the build folder was configured with.
if(NOT DEFINED CMAKE_INSTALL_LIBDIR AND CMAKE_LIBRARY_ARCHITECTURE AND EXISTS /etc/debian_version)
  set(CMAKE_INSTALL_LIBDIR "lib/${CMAKE_LIBRARY_ARCHITECTURE}" CACHE PATH
    "Object code libraries (LIBDIR)")
endif()
include(GNUInstallDirs)

# Private shared libraries (libmixnet_proto_control.so, see proto/CMakeLists.txt):
# not on ld.so's path; the plugin, the daemons and the Python module reach
# them through their RUNPATH ($ORIGIN-relative, see mixnet_install_rpath).
set(MIXNET_INSTALL_PRIVATE_LIBDIR "${CMAKE_INSTALL_LIBDIR}/mixnet")
set(MIXNET_INSTALL_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}/mixnet")
set(MIXNET_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/MixNet")
set(MIXNET_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE PATH
  "Where the mixnet Python package is installed, relative to the prefix (Debian's python3 reads /usr/lib/python3/dist-packages)")
set(MIXNET_INSTALL_SYSTEMDUNITDIR "lib/systemd/system" CACHE PATH
  "Where the systemd units are installed, relative to the prefix")

# mixnet_install_rpath(<target> <install dir relative to the prefix>): the
# target's installed RUNPATH reaches MIXNET_INSTALL_PRIVATE_LIBDIR from where
# it is installed, so an installed tree can be moved as a whole.
function(mixnet_install_rpath target dir)
  file(RELATIVE_PATH rel "/prefix/${dir}" "/prefix/${MIXNET_INSTALL_PRIVATE_LIBDIR}")
  set_property(TARGET ${target} PROPERTY INSTALL_RPATH "$ORIGIN/${rel}")
endfunction()
