# zlib, libdeflate and SQLite as the libraries link them: kernalyse::zlib, kernalyse::deflate and
# kernalyse::sqlite3. A program that sets the target property KERNALYSE_STATIC_DEPS
# (kernalyse-merge) gets Debian's static archives of them (zlib1g-dev, libdeflate-dev,
# libsqlite3-dev ship both), every other consumer the shared ones (the Python module is a shared
# object: the archives are not built position-independent). The property is read on the program
# being linked, as KERNALYSE_H5_ON_DEMAND is (aggregator/store/CMakeLists.txt).
#
# Why: every shared library a process maps costs it at start: kernalyse-merge --version took
# 1.95 ms with them and 1.27 ms with them and libstdc++ linked in, and the import + --all of the
# trace_filter pair 1.4 ms less (docs/benchmarks.md, "Start-up"). Sanitized and fuzz builds keep
# the shared ones (their runtimes expect to interpose on them).
set(_kernalyse_static_ok ON)
if(KERNALYSE_SANITIZE OR KERNALYSE_FUZZ)
  set(_kernalyse_static_ok OFF)
endif()

# kernalyse_dep(NAME ARCHIVE_NAME SHARED...): kernalyse::NAME, linking lib<ARCHIVE_NAME>.a into a
# program with KERNALYSE_STATIC_DEPS when the archive is there, SHARED otherwise.
function(kernalyse_dep name archive)
  set(shared ${ARGN})
  add_library(kernalyse_dep_${name} INTERFACE)
  find_library(KERNALYSE_${name}_ARCHIVE NAMES lib${archive}.a)
  if(_kernalyse_static_ok AND KERNALYSE_${name}_ARCHIVE)
    target_link_libraries(kernalyse_dep_${name} INTERFACE
      "$<IF:$<BOOL:$<TARGET_PROPERTY:KERNALYSE_STATIC_DEPS>>,${KERNALYSE_${name}_ARCHIVE},${shared}>")
  else()
    target_link_libraries(kernalyse_dep_${name} INTERFACE ${shared})
  endif()
  add_library(kernalyse::${name} ALIAS kernalyse_dep_${name})
endfunction()

kernalyse_dep(zlib z ZLIB::ZLIB)
target_include_directories(kernalyse_dep_zlib INTERFACE ${ZLIB_INCLUDE_DIRS})
kernalyse_dep(sqlite3 sqlite3 SQLite::SQLite3)
target_include_directories(kernalyse_dep_sqlite3 INTERFACE ${SQLite3_INCLUDE_DIRS})
# gzip: Debian's libdeflate-dev, when there, inflates small files at once (twice zlib's speed,
# aggregator/importers/src/trace_input.h); zlib reads the rest, and everything without it.
find_path(KERNALYSE_LIBDEFLATE_INCLUDE libdeflate.h)
find_library(KERNALYSE_LIBDEFLATE_LIB deflate)
if(KERNALYSE_LIBDEFLATE_INCLUDE AND KERNALYSE_LIBDEFLATE_LIB)
  kernalyse_dep(deflate deflate ${KERNALYSE_LIBDEFLATE_LIB})
  target_include_directories(kernalyse_dep_deflate INTERFACE ${KERNALYSE_LIBDEFLATE_INCLUDE})
  target_compile_definitions(kernalyse_dep_deflate INTERFACE KERNALYSE_HAVE_LIBDEFLATE)
endif()

# kernalyse_static_runtime(TARGET): the program links the archives above, libstdc++ and libgcc.
function(kernalyse_static_runtime target)
  if(_kernalyse_static_ok)
    set_target_properties(${target} PROPERTIES KERNALYSE_STATIC_DEPS ON)
    target_link_options(${target} PRIVATE -static-libstdc++ -static-libgcc)
  endif()
endfunction()
