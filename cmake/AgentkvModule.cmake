# agentkv_module(NAME SOURCES ... [DEPS ...] [EXTERNAL ...])
#
# Declares one module of ARCHITECTURE.md as the static library `agentkv_NAME` (an interface
# library when it has no SOURCES: a header-only module) with the alias `agentkv::NAME`. DEPS lists the agentkv modules it may use (by short name) and is the only
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
  if(NOT ARG_SOURCES)
    add_library(agentkv_${name} INTERFACE)
    add_library(agentkv::${name} ALIAS agentkv_${name})
    target_include_directories(agentkv_${name} INTERFACE ${PROJECT_SOURCE_DIR}/src)
    foreach(dep IN LISTS ARG_DEPS)
      target_link_libraries(agentkv_${name} INTERFACE agentkv::${dep})
    endforeach()
    target_link_libraries(agentkv_${name} INTERFACE ${ARG_EXTERNAL})
    return()
  endif()
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

# agentkv_module_uses(MODULE OTHER OUT): OUT is TRUE when MODULE is OTHER or reaches it through
# its DEPS (the modules must be declared already).
function(agentkv_module_uses module other out)
  set(result FALSE)
  if(module STREQUAL other)
    set(result TRUE)
  else()
    get_property(deps GLOBAL PROPERTY AGENTKV_MODULE_DEPS_${module})
    foreach(dep IN LISTS deps)
      agentkv_module_uses(${dep} ${other} dep_uses)
      if(dep_uses)
        set(result TRUE)
        break()
      endif()
    endforeach()
  endif()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# agentkv_test(NAME SOURCES ... DEPS ... [LABELS ...] [SERIAL])
# One GoogleTest executable registered with CTest; LABELS defaults to `unit`. SERIAL runs its
# tests with nothing beside them (RUN_SERIAL: tests whose timings are what they check). A test of a
# threaded module (one that uses `sync`: net and the services) also carries the label
# `threaded` and joins the target `agentkv_threaded_tests`: what the tsan preset builds and
# runs.
#
# With AGENTKV_BUILD_UNIT_TESTS off, a program whose labels are only `unit` (and `threaded`) is
# left out of the default build and of CTest (scripts/test.sh's release build).
#
# In the release build the test code itself (sources under tests/) compiles at -O1, a third
# less build time for the tests; the code under test keeps the release flags. Every test program
# reuses one precompiled header (tests/support/precompiled.h: GoogleTest, GoogleMock, the common
# standard headers), built by agentkv_test_pch.
function(agentkv_test name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  foreach(source IN LISTS ARG_SOURCES)
    get_filename_component(path ${source} ABSOLUTE)
    if(path MATCHES "^${PROJECT_SOURCE_DIR}/tests/")
      set_property(SOURCE ${source} APPEND PROPERTY COMPILE_OPTIONS $<$<CONFIG:Release>:-O1>)
    endif()
  endforeach()
  set(threaded FALSE)
  foreach(dep IN LISTS ARG_DEPS)
    if(dep MATCHES "^agentkv::([a-z_]+)$")
      agentkv_module_uses(${CMAKE_MATCH_1} sync uses_sync)
      if(uses_sync)
        set(threaded TRUE)
      endif()
    endif()
  endforeach()
  if(threaded)
    list(APPEND ARG_LABELS threaded)
    if(NOT TARGET agentkv_threaded_tests)
      add_custom_target(agentkv_threaded_tests)
    endif()
    add_dependencies(agentkv_threaded_tests ${name})
  endif()
  target_link_libraries(${name} PRIVATE agentkv_warnings ${ARG_DEPS} GTest::gmock_main)
  if(TARGET agentkv_test_pch)
    target_precompile_headers(${name} REUSE_FROM agentkv_test_pch)
  endif()
  # Without AGENTKV_BUILD_UNIT_TESTS a unit-test program stays defined (its directory may set
  # properties on it) but is neither built by default nor registered with CTest.
  set(other_labels ${ARG_LABELS})
  list(REMOVE_ITEM other_labels unit threaded)
  if(NOT AGENTKV_BUILD_UNIT_TESTS AND NOT other_labels)
    set_target_properties(${name} PROPERTIES EXCLUDE_FROM_ALL TRUE)
    return()
  endif()
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
  # gtest_discover_tests passes PROPERTIES through unescaped, which splits a list of labels;
  # set them on the discovered tests (<name>_TESTS) from an include file run after its own.
  set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
  set(serial "")
  if(ARG_SERIAL)
    set(serial " RUN_SERIAL TRUE")
  endif()
  file(WRITE ${labels_file} "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} "
       "PROPERTIES LABELS \"${ARG_LABELS}\"${serial})\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_file})
endfunction()
