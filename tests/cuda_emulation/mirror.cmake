# cmake -DSOURCE_ROOT=<dir> -DMIRROR_ROOT=<dir> -DLIST_FILE=<file> -P mirror.cmake
#
# Copies the files LIST_FILE names (a CMake list, relative to SOURCE_ROOT)
# into MIRROR_ROOT with the same relative paths, so that the mirrored sources
# include one another as the originals do. In .cu and .cuh files each kernel launch
#     kernel<T><<<grid, block, shared, stream>>>(args)
# becomes
#     dc_emu::launch(&kernel<T>, grid, block, shared, stream)(args)
# which the emulated runtime (cuda_runtime.h here) runs on the CPU, and each
# declaration of a __shared__ variable
#     __shared__ T name[N];
# becomes a static one that the runtime fills with all bits set whenever a
# new block reaches it:
#     static T name[N]; dc_emu::shared_memory(&name, sizeof name);
# A file is rewritten only when its content changes.
file(READ "${LIST_FILE}" files)
foreach(rel IN LISTS files)
  file(READ "${SOURCE_ROOT}/${rel}" text)
  if(rel MATCHES "\\.cuh?$")
    string(REGEX REPLACE "([A-Za-z_][A-Za-z0-9_]*(<[^<>;]*>)?)<<<" "dc_emu::launch(&\\1, " text "${text}")
    string(REPLACE ">>>(" ")(" text "${text}")
    if(text MATCHES "<<<|>>>")
      message(FATAL_ERROR "mirror.cmake: a launch in ${rel} has a form the rewrite does not know")
    endif()
    string(REGEX REPLACE
           "__shared__[ \t]+([A-Za-z_][A-Za-z0-9_:<>, ]*[A-Za-z0-9_>])[ \t]+([A-Za-z_][A-Za-z0-9_]*)(\\[[^;]*\\])?[ \t]*;"
           "static \\1 \\2\\3; dc_emu::shared_memory(&\\2, sizeof \\2);" text "${text}")
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
