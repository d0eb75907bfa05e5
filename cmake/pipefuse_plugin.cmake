# pipefuse_plugin.cmake: pipefuse_add_plugin(), to build a pipefuse plugin against an
# installed pipefuse. Included by pipefuseConfig.cmake (find_package(pipefuse)).
#
# pipefuse_add_plugin(NAME
#     SOURCES a.c ...              the C side: descriptors, parameter tables, CPU code
#     [CUDA_SOURCES k.cu ...]      compiled when a CUDA compiler is found; the C side then
#                                  sees PF_PLUGIN_HAVE_CUDA=1 (PF_CUDA() in plugin.h)
#     [POINT_OPS ops.h ...]        point-op headers; each one's text is embedded as
#                                  `const char pf_src_<file name without .h>[]` so that
#                                  the engine can fuse the ops with NVRTC (after a
#                                  `#line 1 "<header>"`, so NVRTC's messages name it)
#     [OUTPUT_DIRECTORY dir]       where NAME.so is built (default:
#                                  ${CMAKE_BINARY_DIR}/pipefuse-plugins); the engine
#                                  loads every .so of a directory, so keep it for plugins
#     [INSTALL_DESTINATION dir]    where `cmake --install` puts NAME.so (default:
#                                  ${CMAKE_INSTALL_LIBDIR}/pipefuse/plugins)
#     [NO_CUDA]                    ignore CUDA_SOURCES
#     [CHECK])                     add a test, NAME_plugin_check, running
#                                  `pipefuse plugin check` on the plugin
#
# The plugin is C11 (-std=c11, no GNU extensions), optimised with -O2 when the project
# sets no CMAKE_BUILD_TYPE (a build type, when given, chooses the flags).
# It is a MODULE library named NAME.so (no "lib" prefix) that exports only
# pf_plugin_entry (everything else is hidden), links the CUDA runtime statically (so it
# loads on machines without a driver) and never links libpipefuse. After each build its
# file and directory lose group and other write permission: the engine refuses plugins
# that other users could replace (a umask of 002 would otherwise make them so).
#
# CUDA: the first call that has CUDA_SOURCES enables the CUDA language when a compiler
# is found (set PIPEFUSE_PLUGIN_CUDA to OFF to never do so, ON to require it). Call
# pipefuse_add_plugin from your top-level CMakeLists.txt, or enable CUDA there yourself
# (project(... LANGUAGES C CUDA)), since CMake enables languages for a directory tree.
# CMAKE_CUDA_ARCHITECTURES defaults to those pipefuse itself was built for.

include_guard(GLOBAL)
include(GNUInstallDirs)
include(${CMAKE_CURRENT_LIST_DIR}/pipefuse_embed.cmake) # pf_embed_text()

set(PIPEFUSE_PLUGIN_CUDA AUTO CACHE STRING
    "Compile plugins' CUDA sources: AUTO (when a CUDA compiler is found), ON or OFF")
set_property(CACHE PIPEFUSE_PLUGIN_CUDA PROPERTY STRINGS AUTO ON OFF)

# A macro, not a function: enable_language() must run in the caller's (directory) scope.
macro(_pipefuse_plugin_enable_cuda)
  get_property(_pf_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "CUDA" IN_LIST _pf_langs AND NOT PIPEFUSE_PLUGIN_CUDA STREQUAL "OFF")
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND PIPEFUSE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES "${PIPEFUSE_CUDA_ARCHITECTURES}")
      endif()
      enable_language(CUDA)
    elseif(PIPEFUSE_PLUGIN_CUDA STREQUAL "ON")
      message(FATAL_ERROR "PIPEFUSE_PLUGIN_CUDA is ON but no CUDA compiler (nvcc) was found")
    else()
      message(STATUS "pipefuse: no CUDA compiler found; plugins are built for the CPU only")
    endif()
  endif()
  get_property(_pf_langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST _pf_langs AND NOT TARGET CUDA::cudart_static)
    find_package(CUDAToolkit REQUIRED)
  endif()
  unset(_pf_langs)
endmacro()

macro(pipefuse_add_plugin _pf_name)
  cmake_parse_arguments(_PF_ARGS "NO_CUDA;CHECK" "OUTPUT_DIRECTORY;INSTALL_DESTINATION"
                        "SOURCES;CUDA_SOURCES;POINT_OPS" ${ARGN})
  if(_PF_ARGS_CUDA_SOURCES AND NOT _PF_ARGS_NO_CUDA)
    _pipefuse_plugin_enable_cuda()
  endif()
  _pipefuse_add_plugin(${_pf_name} ${ARGN})
  foreach(_pf_var NO_CUDA CHECK OUTPUT_DIRECTORY INSTALL_DESTINATION SOURCES CUDA_SOURCES
          POINT_OPS UNPARSED_ARGUMENTS KEYWORDS_MISSING_VALUES)
    unset(_PF_ARGS_${_pf_var})
  endforeach()
  unset(_pf_var)
endmacro()

function(_pipefuse_add_plugin name)
  cmake_parse_arguments(A "NO_CUDA;CHECK" "OUTPUT_DIRECTORY;INSTALL_DESTINATION"
                        "SOURCES;CUDA_SOURCES;POINT_OPS" ${ARGN})
  if(A_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "pipefuse_add_plugin(${name}): unexpected arguments: "
                        "${A_UNPARSED_ARGUMENTS} (see ${CMAKE_CURRENT_FUNCTION_LIST_FILE})")
  endif()
  if(NOT A_SOURCES)
    message(FATAL_ERROR "pipefuse_add_plugin(${name}): no SOURCES given")
  endif()
  if(NOT TARGET pipefuse::plugin_sdk)
    message(FATAL_ERROR "pipefuse_add_plugin(${name}): call find_package(pipefuse) first")
  endif()
  if(NOT A_OUTPUT_DIRECTORY)
    set(A_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/pipefuse-plugins)
  endif()
  if(NOT A_INSTALL_DESTINATION)
    set(A_INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/pipefuse/plugins)
  endif()

  get_property(langs GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(cuda OFF)
  if(A_CUDA_SOURCES AND NOT A_NO_CUDA AND "CUDA" IN_LIST langs)
    set(cuda ON)
  endif()

  set(srcs ${A_SOURCES})
  if(cuda)
    list(APPEND srcs ${A_CUDA_SOURCES})
  endif()
  set(op_dirs)
  foreach(h ${A_POINT_OPS})
    get_filename_component(base ${h} NAME_WE)
    get_filename_component(abs ${h} ABSOLUTE)
    get_filename_component(dir ${abs} DIRECTORY)
    set(out ${CMAKE_CURRENT_BINARY_DIR}/${name}_${base}_src.c)
    pf_embed_text(${out} pf_src_${base} ${abs} LINE)
    list(APPEND srcs ${out})
    list(APPEND op_dirs ${dir})
  endforeach()

  add_library(${name} MODULE ${srcs})
  target_link_libraries(${name} PRIVATE pipefuse::plugin_sdk)
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${op_dirs})
  if(NOT APPLE AND NOT WIN32)
    target_link_libraries(${name} PRIVATE m)
  endif()
  if(cuda)
    target_compile_definitions(${name} PRIVATE PF_PLUGIN_HAVE_CUDA=1)
    target_link_libraries(${name} PRIVATE CUDA::cudart_static)
  endif()
  # "$<0:>" keeps multi-config generators from adding a per-configuration subdirectory:
  # the search path names one directory.
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    C_STANDARD 11
    C_STANDARD_REQUIRED ON
    C_EXTENSIONS OFF
    C_VISIBILITY_PRESET hidden
    CUDA_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    LIBRARY_OUTPUT_DIRECTORY "${A_OUTPUT_DIRECTORY}$<0:>")
  # No build type means no optimisation flags at all: a stage would run several times
  # slower than it will for users. Give plugins -O2 then (a build type, when set, wins).
  if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES
     AND CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${name} PRIVATE $<$<COMPILE_LANGUAGE:C>:-O2>
                                           $<$<COMPILE_LANGUAGE:CUDA>:-O2>)
    if(NOT _pf_said_O2)
      message(STATUS "pipefuse plugins: no CMAKE_BUILD_TYPE set; plugins are built with -O2")
      set(_pf_said_O2 ON PARENT_SCOPE)
    endif()
  endif()
  if(UNIX)
    add_custom_command(TARGET ${name} POST_BUILD
      COMMAND chmod go-w $<TARGET_FILE:${name}> $<TARGET_FILE_DIR:${name}>
      VERBATIM)
  endif()
  install(TARGETS ${name} LIBRARY DESTINATION ${A_INSTALL_DESTINATION}
          PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                      WORLD_READ WORLD_EXECUTE)
  if(A_CHECK)
    add_test(NAME ${name}_plugin_check
             COMMAND ${PIPEFUSE_EXECUTABLE} plugin check $<TARGET_FILE:${name}>)
  endif()
  if(A_CUDA_SOURCES AND NOT cuda AND NOT A_NO_CUDA)
    message(STATUS "pipefuse plugin ${name}: built without its CUDA sources (no CUDA "
                   "compiler); its stages run on the CPU backend only")
  endif()
endfunction()
