# Sanitizer builds. Flags go on every target of the build (not per target): a sanitized
# executable must not link uninstrumented project code, or UBSan and the fuzzer's coverage miss
# half of what they should see.
#   KERNALYSE_SANITIZE: ASan+UBSan, any compiler (bench/sanitize.sh).
#   KERNALYSE_FUZZ: the same plus libFuzzer's coverage hooks; clang only (tests/fuzz).
set(_kernalyse_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
if(KERNALYSE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KERNALYSE_FUZZ needs clang (libFuzzer): configure with "
                        "CC=clang-14 CXX=clang++-14, in a build directory of its own")
  endif()
  add_compile_options(${_kernalyse_san} -fsanitize=fuzzer-no-link -g)
  add_link_options(-fsanitize=address,undefined)
elseif(KERNALYSE_SANITIZE)
  add_compile_options(${_kernalyse_san} -g)
  add_link_options(-fsanitize=address,undefined)
endif()
