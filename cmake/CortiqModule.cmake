# cortiq_module(NAME DIR [DEPS dir...] [TOOL])
# One object library per source folder src/DIR. Every *.c in the folder belongs to it
# (globbed so that adding a file needs no CMake edit). Files named *_avx2.c and
# *_avx512.c (and *_amx.c: AVX-512 + AMX; *_avxvnni.c: AVX2 + AVX-VNNI) are compiled for that
# ISA only; the runtime picks them by CPUID.
#
# Layering: a module sees the public headers (include/cortiq/), its own folder and the folders
# it names in DEPS, nothing else: `#include "cli/cli.h"` from the engine does not compile.
# Modules are compiled with -fvisibility=hidden: only declarations marked CORTIQ_API
# (include/cortiq/export.h) are exported by libcortiq.so.
# TOOL: not part of libcortiq (code that only the cortiq executable, tests or benchmarks link).
set(CORTIQ_AVX2_FLAGS -mavx2 -mfma -mf16c -mbmi2)
set(CORTIQ_AVXVNNI_FLAGS ${CORTIQ_AVX2_FLAGS} -mavxvnni)
set(CORTIQ_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
    -mavx2 -mfma -mf16c -mbmi2)

set(CORTIQ_AMX_FLAGS ${CORTIQ_AVX512_FLAGS} -mamx-tile -mamx-bf16 -mamx-int8)

# Public headers: the source tree's include/ and the generated ones (cortiq/version.h).
set(CORTIQ_PUBLIC_INCLUDES ${PROJECT_SOURCE_DIR}/include ${PROJECT_BINARY_DIR}/include)

function(cortiq_isa_flags)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "_amx\\.c$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AMX_FLAGS}")
    elseif(src MATCHES "_avx512\\.c$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AVX512_FLAGS}")
    elseif(src MATCHES "_avxvnni\\.c$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AVXVNNI_FLAGS}")
    elseif(src MATCHES "_avx2\\.c$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AVX2_FLAGS}")
    endif()
  endforeach()
endfunction()

# cortiq_include_view(VIEW dir...): the folder build/include-views/VIEW holding one symbolic link
# per allowed src/<dir>, so that "dir/header.h" resolves for those folders only. Returns the
# folder's path in CORTIQ_VIEW_DIR.
function(cortiq_include_view view)
  set(vdir ${PROJECT_BINARY_DIR}/include-views/${view})
  file(MAKE_DIRECTORY ${vdir})
  # drop links a previous configure made (file(REMOVE) unlinks a link, never its target)
  file(GLOB old LIST_DIRECTORIES true ${vdir}/*)
  foreach(link IN LISTS old)
    file(REMOVE ${link})
  endforeach()
  foreach(dir IN LISTS ARGN)
    if(NOT IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${dir})
      message(FATAL_ERROR "include view ${view}: no module folder src/${dir}")
    endif()
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${dir} ${vdir}/${dir} SYMBOLIC)
  endforeach()
  set(CORTIQ_VIEW_DIR ${vdir} PARENT_SCOPE)
endfunction()

function(cortiq_module name dir)
  cmake_parse_arguments(M "TOOL" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${dir}/*.c)
  if(NOT srcs)
    return()
  endif()
  cortiq_isa_flags(${srcs})
  add_library(${name} OBJECT ${srcs})
  cortiq_include_view(${name} ${dir} ${M_DEPS})
  target_include_directories(${name} PUBLIC ${CORTIQ_PUBLIC_INCLUDES} PRIVATE ${CORTIQ_VIEW_DIR})
  target_compile_options(${name} PRIVATE -fvisibility=hidden)
  target_link_libraries(${name} PUBLIC PkgConfig::JANSSON Threads::Threads)
  if(NOT M_TOOL)
    set_property(GLOBAL APPEND PROPERTY CORTIQ_MODULES ${name})
  endif()
endfunction()
