# agentkv_module(NAME SOURCES ... [DEPS ...] [EXTERNAL ...])
#
# Declares one module of ARCHITECTURE.md as the static library `agentkv_NAME` with the alias
# `agentkv::NAME`. DEPS lists the agentkv modules it may use (by short name) and is the only
# way it reaches them, so the dependency rules are enforced by what each target links.
# EXTERNAL lists third-party targets. Headers are included by repo-rooted path
# ("agentkv/kv/block_pool.h"), hence the include root `src/`.
#
# Each module is also recorded (its folder under src/agentkv and DEPS) for
# agentkv_write_module_table, from which the include_rules test checks that every
# `#include "agentkv/..."` names the module itself or one of its DEPS: the include root is
# shared, so linking alone would not catch a header-only use.
function(agentkv_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;EXTERNAL" ${ARGN})
  file(RELATIVE_PATH module_dir ${PROJECT_SOURCE_DIR}/src/agentkv ${CMAKE_CURRENT_SOURCE_DIR})
  set_property(GLOBAL APPEND PROPERTY AGENTKV_MODULES ${name})
  set_property(GLOBAL PROPERTY AGENTKV_MODULE_DIR_${name} ${module_dir})
  set_property(GLOBAL PROPERTY AGENTKV_MODULE_DEPS_${name} "${ARG_DEPS}")
  add_library(agentkv_${name} STATIC ${ARG_SOURCES})
  add_library(agentkv::${name} ALIAS agentkv_${name})
  target_include_directories(agentkv_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(agentkv_${name} PRIVATE agentkv_warnings)
  foreach(dep IN LISTS ARG_DEPS)
    target_link_libraries(agentkv_${name} PUBLIC agentkv::${dep})
  endforeach()
  target_link_libraries(agentkv_${name} PUBLIC ${ARG_EXTERNAL})
endfunction()

# agentkv_write_module_table(FILE): writes every recorded module as CMake `set` commands
# (AGENTKV_MODULES; AGENTKV_MODULE_DIR_<name>; AGENTKV_MODULE_DEPS_<name>) for
# cmake/CheckIncludeRules.cmake. Call after every module is declared.
function(agentkv_write_module_table file)
  get_property(modules GLOBAL PROPERTY AGENTKV_MODULES)
  set(text "set(AGENTKV_MODULES \"${modules}\")\n")
  foreach(module IN LISTS modules)
    get_property(dir GLOBAL PROPERTY AGENTKV_MODULE_DIR_${module})
    get_property(deps GLOBAL PROPERTY AGENTKV_MODULE_DEPS_${module})
    string(APPEND text "set(AGENTKV_MODULE_DIR_${module} \"${dir}\")\n")
    string(APPEND text "set(AGENTKV_MODULE_DEPS_${module} \"${deps}\")\n")
  endforeach()
  file(WRITE ${file} "${text}")
endfunction()

# agentkv_test(NAME SOURCES ... DEPS ... [LABELS ...])
# One GoogleTest executable registered with CTest; LABELS defaults to `unit`.
function(agentkv_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE agentkv_warnings ${ARG_DEPS} GTest::gmock_main)
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()
