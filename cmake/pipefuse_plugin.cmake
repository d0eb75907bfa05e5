# pipefuse_plugin.cmake: pipefuse_add_plugin(), the one way a pipefuse plugin is built:
# against an installed pipefuse (included by pipefuseConfig.cmake, find_package(pipefuse)),
# and in pipefuse's own tree for the built-in plugins, the test plugins and the sample
# (plugins/CMakeLists.txt includes it, with pipefuse::plugin_sdk naming the tree's headers).
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
#     [CHECK]                      add a test, NAME_plugin_check, running
#                                  `pipefuse plugin check` on the plugin
#     [TARGET target]              the CMake target (default NAME), so that one source
#                                  can be built into several plugins named NAME.so
#     [INCLUDE_DIRECTORIES dir ...] [COMPILE_DEFINITIONS def ...] [COMPILE_OPTIONS opt ...]
#                                  added to the plugin's target (PRIVATE)
#     [NO_INSTALL]                 `cmake --install` leaves it out (test plugins)
#     [NO_LINE])                   embed POINT_OPS without the `#line` (NVRTC's messages
#                                  then count lines of the generated source)
#
# The plugin is C11 (-std=c11, no GNU extensions), optimised with -O2 when the project
# sets no CMAKE_BUILD_TYPE (a build type, when given, chooses the flags).
# It is a MODULE library named NAME.so (no "lib" prefix) that exports only
# pf_plugin_entry (everything else is hidden), links the CUDA runtime statically (so it
# loads on machines without a driver) and never links libpipefuse. After each build its
# file and directory lose group and other write permission: the engine refuses plugins
# that other users could replace (a umask of 002 would otherwise make them so). The
# install does the same: the directories it creates (CMAKE_INSTALL_DEFAULT_DIRECTORY_
# PERMISSIONS, when the project sets none) and INSTALL_DESTINATION itself, whatever the umask.
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
  cmake_parse_arguments(_PF_ARGS "NO_CUDA;CHECK;NO_INSTALL;NO_LINE"
                        "OUTPUT_DIRECTORY;INSTALL_DESTINATION;TARGET"
                        "SOURCES;CUDA_SOURCES;POINT_OPS;INCLUDE_DIRECTORIES;COMPILE_DEFINITIONS;COMPILE_OPTIONS"
                        ${ARGN})
  if(_PF_ARGS_CUDA_SOURCES AND NOT _PF_ARGS_NO_CUDA)
    _pipefuse_plugin_enable_cuda()
  endif()
  # Directories the install creates: no group or other write, whatever the umask. CMake
  # reads this when it writes the install scripts, from the directory's scope: set here,
  # in the caller's, unless the project chose its own.
  if(NOT _PF_ARGS_NO_INSTALL AND NOT DEFINED CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS)
    set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
        GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endif()
  _pipefuse_add_plugin(${_pf_name} ${ARGN})
  foreach(_pf_var NO_CUDA CHECK NO_INSTALL NO_LINE OUTPUT_DIRECTORY INSTALL_DESTINATION TARGET
          SOURCES CUDA_SOURCES POINT_OPS INCLUDE_DIRECTORIES COMPILE_DEFINITIONS COMPILE_OPTIONS
          UNPARSED_ARGUMENTS KEYWORDS_MISSING_VALUES)
    unset(_PF_ARGS_${_pf_var})
  endforeach()
  unset(_pf_var)
endmacro()

function(_pipefuse_add_plugin name)
  cmake_parse_arguments(A "NO_CUDA;CHECK;NO_INSTALL;NO_LINE"
                        "OUTPUT_DIRECTORY;INSTALL_DESTINATION;TARGET"
                        "SOURCES;CUDA_SOURCES;POINT_OPS;INCLUDE_DIRECTORIES;COMPILE_DEFINITIONS;COMPILE_OPTIONS"
                        ${ARGN})
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
  set(target ${name})
  if(A_TARGET)
    set(target ${A_TARGET})
  endif()
  set(line LINE)
  if(A_NO_LINE)
    set(line)
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
    set(out ${CMAKE_CURRENT_BINARY_DIR}/${target}_${base}_src.c)
    pf_embed_text(${out} pf_src_${base} ${abs} ${line})
    list(APPEND srcs ${out})
    list(APPEND op_dirs ${dir})
  endforeach()

  add_library(${target} MODULE ${srcs})
  target_link_libraries(${target} PRIVATE pipefuse::plugin_sdk)
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${op_dirs}
                             ${A_INCLUDE_DIRECTORIES})
  target_compile_definitions(${target} PRIVATE ${A_COMPILE_DEFINITIONS})
  target_compile_options(${target} PRIVATE ${A_COMPILE_OPTIONS})
  if(NOT APPLE AND NOT WIN32)
    target_link_libraries(${target} PRIVATE m)
  endif()
  if(cuda)
    target_compile_definitions(${target} PRIVATE PF_PLUGIN_HAVE_CUDA=1)
    # No multiply and add contracted into an FMA: a point op compiled by nvcc rounds as
    # the same op on the CPU does (plugins build as ISO C, which does not contract).
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-fmad=false>)
    target_link_libraries(${target} PRIVATE CUDA::cudart_static)
  endif()
  # "$<0:>" keeps multi-config generators from adding a per-configuration subdirectory:
  # the search path names one directory.
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME ${name}
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
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:-O2>
                                           $<$<COMPILE_LANGUAGE:CUDA>:-O2>)
    if(NOT _pf_said_O2)
      message(STATUS "pipefuse plugins: no CMAKE_BUILD_TYPE set; plugins are built with -O2")
      set(_pf_said_O2 ON PARENT_SCOPE)
    endif()
  endif()
  if(UNIX)
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND chmod go-w $<TARGET_FILE:${target}> $<TARGET_FILE_DIR:${target}>
      VERBATIM)
  endif()
  if(NOT A_NO_INSTALL)
    # As after the build, so after the install: the plugin directory, created now or
    # before, loses group and other write whatever the umask (the directories above it
    # that the install creates: CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS, set by the
    # pipefuse_add_plugin macro).
    install(TARGETS ${target} LIBRARY DESTINATION ${A_INSTALL_DESTINATION}
            PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                        WORLD_READ WORLD_EXECUTE)
    if(UNIX)
      install(CODE "
        set(_pf_dir \"${A_INSTALL_DESTINATION}\")
        if(NOT IS_ABSOLUTE \"\${_pf_dir}\")
          set(_pf_dir \"\${CMAKE_INSTALL_PREFIX}/\${_pf_dir}\")
        endif()
        execute_process(COMMAND chmod go-w \"\$ENV{DESTDIR}\${_pf_dir}\"
                        RESULT_VARIABLE _pf_rc)
        if(NOT _pf_rc EQUAL 0)
          message(WARNING \"pipefuse plugin ${name}: cannot remove group and other write \"
                          \"permission from \${_pf_dir}; the engine refuses plugins there\")
        endif()")
    endif()
  endif()
  if(A_CHECK)
    add_test(NAME ${target}_plugin_check
             COMMAND ${PIPEFUSE_EXECUTABLE} plugin check $<TARGET_FILE:${target}>)
  endif()
  if(A_CUDA_SOURCES AND NOT cuda AND NOT A_NO_CUDA AND NOT PIPEFUSE_PLUGIN_CUDA STREQUAL "OFF")
    message(STATUS "pipefuse plugin ${name}: built without its CUDA sources (no CUDA "
                   "compiler); its stages run on the CPU backend only")
  endif()
endfunction()
