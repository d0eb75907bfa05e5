# pipefuse_sdk.cmake: what `cmake --install` adds for plugin authors and applications,
# on top of the library, headers, CLI and built-in plugins that their own directories
# install: the CMake package (find_package(pipefuse): targets, pipefuse_add_plugin()),
# a pkg-config file, and the sample plugin under the doc directory.
# Included at the end of the top-level CMakeLists.txt.
include(CMakePackageConfigHelpers)

set(PF_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pipefuse)

# The plugin ABI version, read from the header that defines it (the formatter aligns
# the values, so any run of blanks separates name and value). A header whose lines no
# longer match stops the configure rather than installing an empty version.
file(STRINGS ${PROJECT_SOURCE_DIR}/engine/include/pipefuse/plugin.h pf_abi_lines
     REGEX "^#define[ \t]+PF_ABI_(MAJOR|MINOR)[ \t]+[0-9]+")
string(REGEX REPLACE ".*PF_ABI_MAJOR[ \t]+([0-9]+).*" "\\1" PF_ABI_MAJOR "${pf_abi_lines}")
string(REGEX REPLACE ".*PF_ABI_MINOR[ \t]+([0-9]+).*" "\\1" PF_ABI_MINOR "${pf_abi_lines}")
if(NOT PF_ABI_MAJOR MATCHES "^[0-9]+$" OR NOT PF_ABI_MINOR MATCHES "^[0-9]+$")
  message(FATAL_ERROR "cannot read PF_ABI_MAJOR/PF_ABI_MINOR from engine/include/pipefuse/plugin.h")
endif()

# CUDA architectures plugins are built for by default: pipefuse's own.
if(PF_HAVE_CUDA)
  set(PF_SDK_CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
else()
  set(PF_SDK_CUDA_ARCHITECTURES "75-real;80-real;86-real;89-real;90")
endif()

install(EXPORT pipefuse-targets NAMESPACE pipefuse:: DESTINATION ${PF_CMAKE_INSTALL_DIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/pipefuseConfig.cmake.in
  ${PROJECT_BINARY_DIR}/sdk/pipefuseConfig.cmake
  INSTALL_DESTINATION ${PF_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR PF_PLUGIN_INSTALL_DIR)
# 0.x: a minor release may change the API, so only the same minor version matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/sdk/pipefuseConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/sdk/pipefuseConfig.cmake
              ${PROJECT_BINARY_DIR}/sdk/pipefuseConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/pipefuse_plugin.cmake
              ${PROJECT_SOURCE_DIR}/cmake/pipefuse_embed.cmake
              ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
        DESTINATION ${PF_CMAKE_INSTALL_DIR})

# pkg-config: the prefix relative to the .pc file's directory, so a moved tree works.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(PF_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH pf_up /pf-prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /pf-prefix)
  string(REGEX REPLACE "/$" "" pf_up "${pf_up}")
  set(PF_PC_PREFIX "\${pcfiledir}/${pf_up}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/pipefuse.pc.in ${PROJECT_BINARY_DIR}/sdk/pipefuse.pc
               @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/sdk/pipefuse.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# For plugin authors: the sample (with its skeleton) to copy from; the guide,
# docs/plugins.md, is installed with the other docs (cli/CMakeLists.txt).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/samples/plugin DESTINATION ${CMAKE_INSTALL_DOCDIR}/samples
        DIRECTORY_PERMISSIONS ${PF_INSTALL_DIR_PERMISSIONS})

# The headers a generated kernel includes (a kernel kept with --dump-kernels compiles with
# nvcc -I<includedir> from the SDK alone) and that a stage's declared contract names: the
# separable passes' alpha rules (premultiply.h), installed beside the public headers as
# pipefuse/NAME.h, the names the kernels use; and the built-in op headers, the examples of
# point ops, stencil_fn and separable_fn that docs/plugins.md cites, as pipefuse/ops/NAME.h.
install(FILES ${PROJECT_SOURCE_DIR}/kernels/fused_rt.h ${PROJECT_SOURCE_DIR}/kernels/frame_desc.h
              ${PROJECT_SOURCE_DIR}/kernels/edge.h ${PROJECT_SOURCE_DIR}/kernels/separable_rt.h
              ${PROJECT_SOURCE_DIR}/plugins/premultiply.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipefuse)
install(FILES ${PROJECT_SOURCE_DIR}/kernels/point/color_ops.h
              ${PROJECT_SOURCE_DIR}/kernels/point/composite_ops.h
              ${PROJECT_SOURCE_DIR}/kernels/point/filter3x3_ops.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pipefuse/ops)
