# cortiq_module(NAME DIR [DEPS targets...])
# One object library per source folder. Every *.c in the folder belongs to it
# (globbed so that adding a file needs no CMake edit). Files named *_avx2.c and
# *_avx512.c (and *_amx.c: AVX-512 + AMX) are compiled for that ISA only; the runtime
# picks them by CPUID.
set(CORTIQ_AVX2_FLAGS -mavx2 -mfma -mf16c -mbmi2)
set(CORTIQ_AVX512_FLAGS -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16
    -mavx2 -mfma -mf16c -mbmi2)

set(CORTIQ_AMX_FLAGS ${CORTIQ_AVX512_FLAGS} -mamx-tile -mamx-bf16 -mamx-int8)

function(cortiq_isa_flags)
  foreach(src IN LISTS ARGN)
    if(src MATCHES "_amx\\.c$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AMX_FLAGS}")
    elseif(src MATCHES "_avx512\\.c$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AVX512_FLAGS}")
    elseif(src MATCHES "_avx2\\.c$")
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${CORTIQ_AVX2_FLAGS}")
    endif()
  endforeach()
endfunction()

function(cortiq_module name dir)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${dir}/*.c)
  if(NOT srcs)
    return()
  endif()
  cortiq_isa_flags(${srcs})
  add_library(${name} OBJECT ${srcs})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PUBLIC PkgConfig::JANSSON Threads::Threads ${ARGN})
  set_property(GLOBAL APPEND PROPERTY CORTIQ_MODULES ${name})
endfunction()
