# grist_cc_library(NAME <name> SRCS ... [HDRS ...] [DEPS ...] [PRIVATE_DEPS ...])
# Makes the static library grist_<name> and its alias grist::<name>. Link only through the alias.
function(grist_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;HDRS;DEPS;PRIVATE_DEPS;DEFINES" ${ARGN})
  set(target grist_${ARG_NAME})
  add_library(${target} STATIC ${ARG_SRCS} ${ARG_HDRS})
  add_library(grist::${ARG_NAME} ALIAS ${target})
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_definitions(${target} PUBLIC ${ARG_DEFINES})
  grist_set_warnings(${target})
endfunction()

# grist_cc_test(NAME <name> SRCS ... DEPS ... [TIMEOUT seconds] [LABELS ...])
# One GoogleTest executable per component, registered with ctest (gtest_discover_tests).
function(grist_cc_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(NOT TARGET grist_gtest_main)
    # tests/gtest_main.cc: under ctest a skip is an exit code, never an output match (see there).
    add_library(grist_gtest_main STATIC ${PROJECT_SOURCE_DIR}/tests/gtest_main.cc)
    target_link_libraries(grist_gtest_main PUBLIC GTest::gtest)
    grist_set_warnings(grist_gtest_main)
  endif()
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock grist_gtest_main)
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  target_compile_definitions(${ARG_NAME} PRIVATE
    GRIST_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    GRIST_BINARY_DIR="${PROJECT_BINARY_DIR}")
  grist_set_warnings(${ARG_NAME})
  # gtest_discover_tests also sets SKIP_REGULAR_EXPRESSION to gtest's "[  SKIPPED ]", which ctest
  # lets win over a failing exit code (a failed SetUpTestSuite read as skipped). Under
  # GRIST_GTEST_SKIP_EXIT_CODE, tests/gtest_main.cc never prints that marker and exits 77 when
  # every selected test skipped and nothing failed.
  gtest_discover_tests(${ARG_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}" SKIP_RETURN_CODE 77
               ENVIRONMENT GRIST_GTEST_SKIP_EXIT_CODE=77)
  # Until the executable is built, ctest lists its tests as one `<name>_NOT_BUILT` without labels,
  # which `ctest -L` skips silently; tests/CMakeLists.txt writes this list (target and labels) to
  # tests/test_targets.txt so that a script can build every target of the labels it runs.
  string(REPLACE ";" "," labels "${ARG_LABELS}")
  set_property(GLOBAL APPEND PROPERTY GRIST_TEST_TARGETS "${ARG_NAME} ${labels}")
endfunction()

function(grist_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)
  if(GRIST_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()
