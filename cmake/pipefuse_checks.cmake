# Checking builds beyond PIPEFUSE_SANITIZE (ASan + UBSan, in the top-level file):
#
#   PIPEFUSE_TSAN=ON  ThreadSanitizer over every C target (the `tsan` preset, gcc: see
#                     docs/testing.md on clang 14).
#   PIPEFUSE_FUZZ=ON  libFuzzer targets in tests/fuzz/ (the `fuzz` preset, clang only):
#                     every C target is instrumented for coverage with ASan and UBSan,
#                     and the fuzz targets link libFuzzer's main. docs/testing.md says
#                     how to run them.
option(PIPEFUSE_TSAN "Build with ThreadSanitizer" OFF)
option(PIPEFUSE_FUZZ "Build the libFuzzer targets (clang), everything with ASan and UBSan" OFF)

if(PIPEFUSE_TSAN AND (PIPEFUSE_SANITIZE OR PIPEFUSE_FUZZ))
  message(FATAL_ERROR "PIPEFUSE_TSAN cannot be combined with PIPEFUSE_SANITIZE or PIPEFUSE_FUZZ "
                      "(ThreadSanitizer and AddressSanitizer exclude each other)")
endif()

if(PIPEFUSE_TSAN)
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=thread>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>)
  add_link_options(-fsanitize=thread)
endif()

if(PIPEFUSE_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PIPEFUSE_FUZZ needs clang (libFuzzer), not ${CMAKE_C_COMPILER_ID}: "
                        "configure with CC=clang or the `fuzz` preset")
  endif()
  add_compile_options($<$<COMPILE_LANGUAGE:C>:-fsanitize=fuzzer-no-link,address,undefined>
                      $<$<COMPILE_LANGUAGE:C>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:C>:-fno-sanitize-recover=undefined>)
  add_link_options(-fsanitize=address,undefined)
endif()
