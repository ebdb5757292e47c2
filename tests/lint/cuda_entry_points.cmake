# cmake -DSOURCE_DIR=<the project's root> -P cuda_entry_points.cmake
#
# Every entry point of the CUDA backend that queues work on a context's
# device begins with DC_CUDA_ENTER(ctx), which makes that device current
# (see src/cuda/cuda_state.h). test_cuda's test_two_devices shows it for the
# first device work of each op; an entry point reached later in an op runs
# with the device its op already made current there, so a missing
# DC_CUDA_ENTER would only show once the op changes. This check reads the
# sources instead: each `dc_status dc_cuda_NAME(dc_ctx *ctx, ...)`
# definition's first statement. The few that manage the device themselves
# are named below.
cmake_minimum_required(VERSION 3.16)
set(own_device_handling dc_cuda_check dc_cuda_enter dc_cuda_init)
set(checked 0)
set(missing "")
file(GLOB sources "${SOURCE_DIR}/src/cuda/*.cu")
foreach(file IN LISTS sources)
  file(READ "${file}" text)
  # keep the matches whole: a CMake list would split them at semicolons
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REGEX MATCHALL "dc_status dc_cuda_[a-z_]+\\(dc_ctx \\*ctx[^{]*\\)\n{\n[^\n]*" definitions "${text}")
  foreach(definition IN LISTS definitions)
    string(REGEX MATCH "dc_cuda_[a-z_]+" name "${definition}")
    if(name IN_LIST own_device_handling)
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    if(NOT definition MATCHES "\n{\n    DC_CUDA_ENTER\\(ctx\\)<semicolon>$")
      get_filename_component(base "${file}" NAME)
      list(APPEND missing "${name} (${base})")
    endif()
  endforeach()
endforeach()
if(checked LESS 15)
  message(FATAL_ERROR "cuda_entry_points: found ${checked} entry points; the sources' form changed, update this check")
endif()
if(missing)
  string(REPLACE ";" "\n  " missing "${missing}")
  message(FATAL_ERROR "cuda_entry_points: these do not begin with DC_CUDA_ENTER(ctx):\n  ${missing}")
endif()
message(STATUS "cuda_entry_points: ${checked} entry points begin with DC_CUDA_ENTER(ctx)")
