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
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gmock GTest::gtest_main)
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR}/generated)
  target_compile_definitions(${ARG_NAME} PRIVATE
    GRIST_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    GRIST_BINARY_DIR="${PROJECT_BINARY_DIR}")
  grist_set_warnings(${ARG_NAME})
  gtest_discover_tests(${ARG_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES TIMEOUT ${ARG_TIMEOUT} LABELS "${ARG_LABELS}")
endfunction()

function(grist_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)
  if(GRIST_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()
