# dc_add_broadcast_fn(<target> <file>)
#
# Instantiates the broadcast function written in <file> (one DC_BFN body, no
# include guard) for <target>: a primal and a dual version in float and
# double for the CPU and, when dualcast was built with CUDA, the same for the
# GPU. Declare it in C with DC_BFN_DECLARE(<name>) and run it with
# dc_broadcast(tape, DC_BFN_REF(<name>), ...). <name> is the first argument
# of the DC_BFN in <file>.
#
# The generated sources are compiled with -fno-trapping-math and
# -fno-math-errno (so that gcc can if-convert and vectorize a body with
# branches), -fno-finite-math-only (the gradients' guards test for
# infinities and NaN, whatever flags the project sets) and a raised
# loop-unswitching limit (so that a loop whose control inputs are constant
# is split per branch), each flag only where the compiler in use accepts it
# (see _dc_bfn_c_flags).

include(CheckCCompilerFlag)

set(_DC_BFN_TEMPLATE_DIR "${CMAKE_CURRENT_LIST_DIR}")

# _dc_checked_c_flags(<out_var> <flag>...)
#
# Sets <out_var> to the flags the project's C compiler accepts, in order,
# each tried once per build tree (cached as DC_C_FLAG_<flag>). A compiler
# that rejects a flag only loses what the flag tunes: the code is correct
# without any of them.
function(_dc_checked_c_flags out_var)
  set(kept "")
  foreach(flag IN LISTS ARGN)
    string(MAKE_C_IDENTIFIER "DC_C_FLAG_${flag}" var)
    check_c_compiler_flag("${flag}" ${var})
    if(${var})
      list(APPEND kept "${flag}")
    endif()
  endforeach()
  set(${out_var} "${kept}" PARENT_SCOPE)
endfunction()

# _dc_bfn_c_flags(<out_var>)
#
# The options of the generated C units, for the C compiler in use.
# -ffp-contract=off: a*b + c is not fused into an FMA behind the math's back
# (it is what ISO C mode gives; GNU modes and clang fuse by default), so a
# function's CPU code gives the same bits in any project that builds it
# (nvcc fuses in device code, as it does by default). gcc's loop unswitching
# splits a loop whose control inputs are constant into a copy per branch;
# gcc 12 and older allow one level of it by default (max-unswitch-level),
# gcc 13 renamed that limit max-unswitch-depth and raised it to 50, so the
# level is raised only where the old name is known. clang takes none of the
# --param options.
function(_dc_bfn_c_flags out_var)
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "C" IN_LIST languages)
    message(FATAL_ERROR "dc_add_broadcast_fn: the generated kernels are C; enable the C language in this project "
                        "(project(... LANGUAGES C ...) or enable_language(C))")
  endif()
  set(wanted -fno-trapping-math -fno-math-errno -ffp-contract=off -fno-finite-math-only -Wno-unused-parameter)
  if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
    list(APPEND wanted --param=max-unswitch-insns=5000 --param=max-unswitch-level=4)
  endif()
  if(DUALCAST_NATIVE)
    list(APPEND wanted -march=native)
  endif()
  _dc_checked_c_flags(kept ${wanted})
  # In this project's sanitized builds (DC_SANITIZE, DC_FUZZ): without
  # UndefinedBehaviorSanitizer's pointer-overflow check, whose tests on the
  # unrolled dual-number kernels made the 2x2-matrix operator's float64 unit
  # (tests/assoc/mat2.dc.h) take 159 s to compile under clang, 30 s without,
  # and 39 s under gcc at -O2, 23 s without. AddressSanitizer still checks
  # every access.
  # There too the units are optimized at -O1, not -O3: the sanitizers check
  # every access at either level, and the unrolled dual-number kernels under
  # their instrumentation are slow to optimize. On a 2-core AMD EPYC, the
  # sanitizer suite's build (gcc) took 4m28s at -O3 and 2m46s at -O1, its
  # tests 57 s and 69 s; the fuzz build and replay (clang) 6m04s and 4m38s.
  set(level -O3)
  if(DC_SANITIZE)
    list(APPEND kept -fno-sanitize=pointer-overflow)
    set(level -O1)
  endif()
  if(NOT "-ffp-contract=off" IN_LIST kept)
    message(WARNING "dc_add_broadcast_fn: ${CMAKE_C_COMPILER} does not take -ffp-contract=off; its broadcast "
                    "functions may round differently from other builds")
  endif()
  set(${out_var} ${level} ${kept} PARENT_SCOPE)
endfunction()

# _dc_generated_fn_name(<caller> <macro> <file> <src_var> <name_var>)
#
# Sets <src_var> to <file>'s absolute path and <name_var> to the first
# argument of the <macro>( that defines the function in it (comments
# skipped), or stops the configuration naming <caller> and what is missing.
function(_dc_generated_fn_name caller macro file src_var name_var)
  get_filename_component(src "${file}" ABSOLUTE)
  if(NOT EXISTS "${src}")
    message(FATAL_ERROR "${caller}: ${file} does not exist")
  endif()
  file(READ "${src}" body)
  string(REGEX REPLACE "/\\*([^*]|\\*+[^*/])*\\*+/" "" body "${body}")
  string(REGEX REPLACE "//[^\n]*" "" body "${body}")
  string(REGEX MATCH "${macro}[ \t\r\n]*\\([ \t\r\n]*([A-Za-z_][A-Za-z0-9_]*)" found "${body}")
  if(NOT found)
    message(FATAL_ERROR "${caller}: no ${macro}(name, ...) in ${file}")
  endif()
  set(${src_var} "${src}" PARENT_SCOPE)
  set(${name_var} "${CMAKE_MATCH_1}" PARENT_SCOPE)
endfunction()

# _dc_generated_fn_target(<caller> <target> <file> <with_cuda_var>)
#
# Checks that <target> exists and sets <with_cuda_var> to ON when dualcast
# was built with CUDA and this project enabled the CUDA language; warns,
# naming <caller> and <file>, when only the first holds (the function then
# runs on the CPU only).
function(_dc_generated_fn_target caller target file with_cuda_var)
  if(NOT TARGET ${target})
    message(FATAL_ERROR "${caller}: ${target} is not a target")
  endif()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(with_cuda OFF)
  if(DUALCAST_WITH_CUDA AND "CUDA" IN_LIST languages)
    set(with_cuda ON)
  elseif(DUALCAST_WITH_CUDA)
    get_filename_component(fname "${file}" NAME)
    message(WARNING "${caller}(${fname}): CUDA is not enabled in this project, so it "
                    "runs on the CPU only; call enable_language(CUDA) to build its GPU kernels")
  endif()
  set(${with_cuda_var} ${with_cuda} PARENT_SCOPE)
endfunction()

# _dc_generated_fn_attach(<target> <source>...)
#
# Adds the generated units to <target> and links it to dualcast when the
# imported target exists.
function(_dc_generated_fn_attach target)
  target_sources(${target} PRIVATE ${ARGN})
  if(TARGET dualcast::dualcast)
    target_link_libraries(${target} PRIVATE dualcast::dualcast)
  endif()
endfunction()

# _dc_broadcast_fn_sources(<file> <with_cuda> <cuda_suffix> <dir> <out_var>)
#
# Writes the translation units that instantiate <file> under <dir>/<name>/
# and sets <out_var> to their paths: eight C files (float and double; primal,
# dual; uniform and varying control) and, when <with_cuda>, one CUDA file
# named <name>_cuda<cuda_suffix>. Used by dc_add_broadcast_fn, and by the
# tests' CUDA emulation with the suffix .cpp.
function(_dc_broadcast_fn_sources file with_cuda cuda_suffix out_dir out_var)
  _dc_generated_fn_name(dc_add_broadcast_fn DC_BFN "${file}" src name)
  set(dir "${out_dir}/${name}")
  set(sources "")
  # One translation unit per scalar type, kind (primal; dual and adjoint)
  # and control variant (uniform, varying): see broadcast/bfn_cpu_instance.h.
  foreach(bits 32 64)
    foreach(mode 0 1)
      foreach(varying 0 1)
        set(extra "")
        if(bits EQUAL 32 AND mode EQUAL 0 AND varying EQUAL 0)
          set(extra "#define DC_BFN_DESCRIPTOR 1\n")
          if(with_cuda)
            string(APPEND extra "#define DC_BFN_WITH_CUDA 1\n")
          endif()
        endif()
        set(out "${dir}/${name}_f${bits}_${mode}${varying}.c")
        file(CONFIGURE OUTPUT "${out}" CONTENT
"/* Generated by dc_add_broadcast_fn from ${src}; do not edit. */
#define DC_BFN_NAME ${name}
#define DC_BFN_FILE \"${src}\"
#define DC_BFN_BITS ${bits}
#define DC_BFN_DUAL_MODE ${mode}
#define DC_BFN_INSTANCE_VARYING ${varying}
${extra}#include <broadcast/bfn_cpu_instance.h>
")
        list(APPEND sources "${out}")
      endforeach()
    endforeach()
  endforeach()

  _dc_bfn_c_flags(cflags)
  set_source_files_properties(${sources} PROPERTIES COMPILE_OPTIONS "${cflags}")

  if(with_cuda)
    set(cu "${dir}/${name}_cuda${cuda_suffix}")
    file(CONFIGURE OUTPUT "${cu}" CONTENT
"/* Generated by dc_add_broadcast_fn from ${src}; do not edit. */
#define DC_BFN_NAME ${name}
#define DC_BFN_FILE \"${src}\"
#include <broadcast/bfn_cuda_instance.cuh>
")
    list(APPEND sources "${cu}")
  endif()

  set(${out_var} "${sources}" PARENT_SCOPE)
endfunction()

function(dc_add_broadcast_fn target file)
  _dc_generated_fn_target(dc_add_broadcast_fn ${target} "${file}" with_cuda)
  _dc_broadcast_fn_sources("${file}" ${with_cuda} .cu "${CMAKE_CURRENT_BINARY_DIR}/dc_bfn" sources)
  _dc_generated_fn_attach(${target} ${sources})
endfunction()

# Associative operators (dc_add_assoc_fn) share the C units' options above.
include("${CMAKE_CURRENT_LIST_DIR}/DualcastAssocFn.cmake")
