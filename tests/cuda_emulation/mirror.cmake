# cmake -DSOURCE_ROOT=<dir> -DMIRROR_ROOT=<dir> -DLIST_FILE=<file> -P mirror.cmake
#
# Copies the files LIST_FILE names (a CMake list, relative to SOURCE_ROOT)
# into MIRROR_ROOT with the same relative paths, so that the mirrored sources
# include one another as the originals do. In .cu and .cuh files each kernel launch
#     kernel<T><<<grid, block, shared, stream>>>(args)
# becomes
#     dc_emu::launch(&kernel<T>, grid, block, shared, stream)(args)
# which the emulated runtime (cuda_runtime.h here) runs on the CPU. A file is
# rewritten only when its content changes.
file(READ "${LIST_FILE}" files)
foreach(rel IN LISTS files)
  file(READ "${SOURCE_ROOT}/${rel}" text)
  if(rel MATCHES "\\.cuh?$")
    string(REGEX REPLACE "([A-Za-z_][A-Za-z0-9_]*(<[^<>;]*>)?)<<<" "dc_emu::launch(&\\1, " text "${text}")
    string(REPLACE ">>>(" ")(" text "${text}")
    if(text MATCHES "<<<|>>>")
      message(FATAL_ERROR "mirror.cmake: a launch in ${rel} has a form the rewrite does not know")
    endif()
  endif()
  set(out "${MIRROR_ROOT}/${rel}")
  if(rel MATCHES "\\.cu$")
    set(out "${out}.cpp")
  endif()
  set(old "")
  if(EXISTS "${out}")
    file(READ "${out}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${out}" "${text}")
  endif()
endforeach()
