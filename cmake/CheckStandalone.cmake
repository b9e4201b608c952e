# Checks that the repository stands alone: no source, test, benchmark, script or build file
# reads a path outside the repository through the parent folder's `shared/` (a clone has no such
# sibling; what the tests need is bundled under data/). .ci/ is not read: .ci/run looks for
# that sibling on purpose, to run the suite on a clone that has none.
#   cmake -DROOT=<repository root> -P CheckStandalone.cmake
# Prints one line per offending file line and fails; prints the number of files read otherwise.
if(NOT DEFINED ROOT)
  message(FATAL_ERROR "CheckStandalone.cmake needs -DROOT=<repository root>")
endif()
# Spelled in two pieces so that this file does not match itself.
set(needle "../")
string(APPEND needle "shared")
set(files)
foreach(dir IN ITEMS src tests bench scripts tools python fuzz cmake deploy examples)
  if(IS_DIRECTORY "${ROOT}/${dir}")
    file(GLOB_RECURSE found LIST_DIRECTORIES false "${ROOT}/${dir}/*")
    list(APPEND files ${found})
  endif()
endforeach()
foreach(top IN ITEMS CMakeLists.txt CMakePresets.json pyproject.toml setup.py)
  if(EXISTS "${ROOT}/${top}")
    list(APPEND files "${ROOT}/${top}")
  endif()
endforeach()
set(violations 0)
set(checked 0)
foreach(path IN LISTS files)
  file(RELATIVE_PATH relative "${ROOT}" "${path}")
  # Test data of checks (this one's included) and binary files are not read.
  if(relative MATCHES "(^|/)(__pycache__|testdata|corpus)/" OR relative MATCHES "\\.(png|gz|pyc)$")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS "${path}" hits REGEX "\\.\\./shared")
  foreach(hit IN LISTS hits)
    string(STRIP "${hit}" hit)
    message("${relative}: reads outside the repository: ${hit}")
    math(EXPR violations "${violations} + 1")
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} line(s) name ${needle}; bundle the file under data/ instead")
endif()
message("standalone: ${checked} files read, none names ${needle}")
