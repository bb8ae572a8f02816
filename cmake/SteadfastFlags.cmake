# Compiler flags shared by all of Steadfast's own targets.
#
# sf_options (INTERFACE): link it into every target of ours. It carries the warning set
# (-Wall -Wextra, -Werror under SF_WERROR) and the build-type flags:
#   Release: -O3 -march=x86-64-v3 (AVX2/FMA baseline). Wider ISAs (AVX-512, AMX) are used only
#            by code that checks the CPU at run time (oneDNN does this itself; our own kernels
#            compile their AVX-512 variants per file, see sf_enable_avx512()).
#   Debug:   -O1 -g with AddressSanitizer and UndefinedBehaviorSanitizer.
add_library(sf_options INTERFACE)
target_compile_options(sf_options INTERFACE
  # GCC 12 reports false -Wmaybe-uninitialized (std::variant/std::optional) and -Wrestrict
  # (std::string concatenation, GCC bug 105329) at -O3; both are off for our code.
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-maybe-uninitialized -Wno-restrict>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${SF_WERROR}>>:-Werror>)

set(CMAKE_CXX_FLAGS_RELEASE "-O3 -DNDEBUG")
set(CMAKE_C_FLAGS_RELEASE "-O3 -DNDEBUG")
set(CMAKE_CXX_FLAGS_DEBUG "-O1 -g -fno-omit-frame-pointer")
set(CMAKE_C_FLAGS_DEBUG "-O1 -g -fno-omit-frame-pointer")
target_compile_options(sf_options INTERFACE
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release>>:-march=x86-64-v3>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Debug>>:-fsanitize=address,undefined>)
target_link_options(sf_options INTERFACE
  $<$<CONFIG:Debug>:-fsanitize=address,undefined>)

# Compile the given source files with AVX-512 (F/BW/VL/DQ, BF16, FP16) enabled. Code in them
# must only run after a run-time CPU check (sf::cpu::HasAvx512() or __builtin_cpu_supports).
# -Wno-uninitialized: GCC 12's AVX-512 intrinsics (max, shifts, shuffles, conversions) start
# from _mm512_undefined_*(), a self-initialised variable that -Wuninitialized reports once the
# intrinsic is inlined into a loop (GCC bug 105593, fixed in GCC 13); only these files need it.
function(sf_enable_avx512)
  set_source_files_properties(${ARGN} PROPERTIES COMPILE_OPTIONS
    "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mavx512fp16;-mf16c;-mfma;-Wno-uninitialized")
endfunction()
