# agentkv_module(NAME SOURCES ... [DEPS ...] [EXTERNAL ...])
#
# Declares one module of ARCHITECTURE.md as the static library `agentkv_NAME` with the alias
# `agentkv::NAME`. DEPS lists the agentkv modules it may use (by short name) and is the only
# way it reaches them, so the dependency rules are enforced by what each target links.
# EXTERNAL lists third-party targets. Headers are included by repo-rooted path
# ("agentkv/kv/block_pool.h"), hence the include root `src/`.
function(agentkv_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;EXTERNAL" ${ARGN})
  add_library(agentkv_${name} STATIC ${ARG_SOURCES})
  add_library(agentkv::${name} ALIAS agentkv_${name})
  target_include_directories(agentkv_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(agentkv_${name} PRIVATE agentkv_warnings)
  foreach(dep IN LISTS ARG_DEPS)
    target_link_libraries(agentkv_${name} PUBLIC agentkv::${dep})
  endforeach()
  target_link_libraries(agentkv_${name} PUBLIC ${ARG_EXTERNAL})
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
