# cmake -DTABLE=<module table> -DSOURCE_ROOT=<dir holding agentkv/> -P CheckIncludeRules.cmake
#
# Checks the module dependency rules on the sources: every `#include "agentkv/..."` in a
# module's files must name a header of that module or of one of its DEPS (as declared with
# agentkv_module and written by agentkv_write_module_table), and a header under an
# `internal/` folder may be included from its own module only. A file belongs to the module
# whose folder is the longest prefix of its path; a file under no module's folder is an error.
# Prints one line per violation and fails when there is any.
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED TABLE OR NOT DEFINED SOURCE_ROOT)
  message(FATAL_ERROR "usage: cmake -DTABLE=FILE -DSOURCE_ROOT=DIR -P CheckIncludeRules.cmake")
endif()
get_filename_component(SOURCE_ROOT "${SOURCE_ROOT}" ABSOLUTE)
include(${TABLE})

# Sets `out` to the module owning `path` (relative to agentkv/), or "" when none does.
function(owning_module path out)
  set(best "")
  set(best_length -1)
  foreach(module IN LISTS AGENTKV_MODULES)
    set(dir "${AGENTKV_MODULE_DIR_${module}}")
    string(LENGTH "${dir}" length)
    string(FIND "${path}" "${dir}/" at)
    if(at EQUAL 0 AND length GREATER best_length)
      set(best ${module})
      set(best_length ${length})
    endif()
  endforeach()
  set(${out} "${best}" PARENT_SCOPE)
endfunction()

set(violations 0)
file(GLOB_RECURSE files RELATIVE ${SOURCE_ROOT}/agentkv
     ${SOURCE_ROOT}/agentkv/*.h ${SOURCE_ROOT}/agentkv/*.cc)
list(SORT files)
foreach(file IN LISTS files)
  owning_module("${file}" module)
  if(module STREQUAL "")
    message("agentkv/${file}: lies in no module's folder")
    math(EXPR violations "${violations} + 1")
    continue()
  endif()
  set(allowed ${module} ${AGENTKV_MODULE_DEPS_${module}})
  file(STRINGS ${SOURCE_ROOT}/agentkv/${file} includes REGEX "^#include \"agentkv/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"agentkv/([^\"]+)\".*" "\\1" header "${line}")
    owning_module("${header}" used)
    if(used STREQUAL "")
      message("agentkv/${file}: includes agentkv/${header}, which is in no module")
      math(EXPR violations "${violations} + 1")
    elseif(NOT used IN_LIST allowed)
      message("agentkv/${file}: module ${module} includes agentkv/${header} of module ${used}, "
              "which its DEPS (${AGENTKV_MODULE_DEPS_${module}}) do not grant")
      math(EXPR violations "${violations} + 1")
    elseif(header MATCHES "/internal/" AND NOT used STREQUAL module)
      message("agentkv/${file}: includes agentkv/${header}, internal to module ${used}")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
list(LENGTH files checked)
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} violation(s) of the module rules in ${checked} files")
endif()
message("include rules hold in ${checked} files")
