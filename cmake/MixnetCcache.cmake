# Compiler cache for C, C++ and CUDA compiles (read at configure time).
#
#   MIXNET_CCACHE          auto (default: ccache when installed), on (fail
#                          when it is missing) or off.
#   MIXNET_CCACHE_DIR      the cache folder; empty (default) leaves ccache's
#                          own choice: $CCACHE_DIR, else the user's cache
#                          directory ($XDG_CACHE_HOME/ccache, ~/.cache/ccache).
#                          Never inside the checkout.
#   MIXNET_CCACHE_MAXSIZE  the cache's size bound (ccache's syntax, e.g. 2G);
#                          empty (default) keeps ccache's own bound (5 GB
#                          unless its configuration says otherwise), which a
#                          shared cache folder's other users rely on. One
#                          plain and one sanitizer build of this tree take
#                          about 0.25 GB of it (compressed).
#
# Each is a CMake cache variable whose default comes from the environment
# variable of the same name (scripts/build.sh passes the environment through),
# so `MIXNET_CCACHE=off ./scripts/build.sh` and `cmake -DMIXNET_CCACHE=off`
# agree.
#
# Clones in other folders share entries: ccache sees the source tree as its
# base_dir (absolute paths under it become relative before hashing and
# compiling), and the build folder maps to "." in debug info
# (-fdebug-prefix-map), which is what ccache hashes in place of the build
# folder's absolute path. Debug info therefore names the tests' sources
# relative to the build folder (run gdb from there), and an object compiled
# first in another clone names that clone's paths (gdb's substitute-path).
foreach(_var MIXNET_CCACHE MIXNET_CCACHE_DIR MIXNET_CCACHE_MAXSIZE)
  if(DEFINED ENV{${_var}} AND NOT DEFINED CACHE{${_var}})
    set(_default_${_var} "$ENV{${_var}}")
  endif()
endforeach()
if(NOT DEFINED _default_MIXNET_CCACHE)
  set(_default_MIXNET_CCACHE auto)
endif()
set(MIXNET_CCACHE "${_default_MIXNET_CCACHE}" CACHE STRING
  "Compiler cache: auto (ccache when installed), on or off")
set_property(CACHE MIXNET_CCACHE PROPERTY STRINGS auto on off)
set(MIXNET_CCACHE_DIR "${_default_MIXNET_CCACHE_DIR}" CACHE PATH
  "ccache's folder (empty: ccache's default, the user's cache directory)")
set(MIXNET_CCACHE_MAXSIZE "${_default_MIXNET_CCACHE_MAXSIZE}" CACHE STRING
  "ccache's size bound (e.g. 2G; empty: ccache's own, 5 GB by default)")

set(MIXNET_HAVE_CCACHE OFF CACHE INTERNAL "ccache in use (scripts/build.sh reads it)")
string(TOLOWER "${MIXNET_CCACHE}" _mode)
if(NOT _mode MATCHES "^(auto|on|off)$")
  message(FATAL_ERROR "MIXNET_CCACHE=${MIXNET_CCACHE}: expected auto, on or off")
endif()
if(NOT _mode STREQUAL "off")
  find_program(MIXNET_CCACHE_PROGRAM ccache)
  find_program(MIXNET_ENV_PROGRAM env)
  if(MIXNET_CCACHE_PROGRAM AND MIXNET_ENV_PROGRAM)
    if(MIXNET_CCACHE_DIR AND NOT IS_ABSOLUTE "${MIXNET_CCACHE_DIR}")
      message(FATAL_ERROR "MIXNET_CCACHE_DIR=${MIXNET_CCACHE_DIR}: give an absolute path")
    endif()
    cmake_path(IS_PREFIX CMAKE_SOURCE_DIR "${MIXNET_CCACHE_DIR}" NORMALIZE _inside)
    if(MIXNET_CCACHE_DIR AND _inside)
      message(FATAL_ERROR "MIXNET_CCACHE_DIR=${MIXNET_CCACHE_DIR} is inside the checkout; "
        "give a folder outside it (default: the user's cache directory)")
    endif()
    set(_launcher ${MIXNET_ENV_PROGRAM} "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}")
    if(MIXNET_CCACHE_MAXSIZE)
      list(APPEND _launcher "CCACHE_MAXSIZE=${MIXNET_CCACHE_MAXSIZE}")
    endif()
    if(MIXNET_CCACHE_DIR)
      list(APPEND _launcher "CCACHE_DIR=${MIXNET_CCACHE_DIR}")
    endif()
    list(APPEND _launcher ${MIXNET_CCACHE_PROGRAM})
    foreach(_lang C CXX CUDA)
      if(NOT CMAKE_${_lang}_COMPILER_LAUNCHER)
        set(CMAKE_${_lang}_COMPILER_LAUNCHER ${_launcher})
      endif()
    endforeach()
    add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fdebug-prefix-map=${CMAKE_BINARY_DIR}=.>)
    set(MIXNET_HAVE_CCACHE ON CACHE INTERNAL "ccache in use (scripts/build.sh reads it)")
  elseif(_mode STREQUAL "on")
    message(FATAL_ERROR "MIXNET_CCACHE=on but ccache is not installed (apt-get install ccache)")
  else()
    message(STATUS "MixNet: ccache not found, compiling without a cache (apt-get install ccache)")
  endif()
endif()
