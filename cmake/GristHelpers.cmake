# The include paths enforce the component boundaries (DESIGN.md: dependencies point one way; tools,
# benchmarks and the Python bindings use public headers only). Sources include by path from the
# source root ("dedup/dedup.h"), but no target sees the source root itself. Each folder gets two
# trees in the build folder:
#   include/<dir>/<dir>/<header>   a symbolic link to each public header of <dir> (its top-level *.h,
#                                  never internal/): the PUBLIC include directory of the folder's
#                                  library, so a target sees the public headers of what it links
#                                  and nothing else;
#   include_private/<dir>/<dir>    a link to the folder itself, internal/ included: the PRIVATE
#                                  include directory of the folder's own targets, and of a test of
#                                  the folder's internals (grist_cc_test INTERNAL <dir>).
# Links follow edits to the headers at once; a header added or removed re-runs CMake (a
# CONFIGURE_DEPENDS glob), which links it or drops its link. Generated headers are written as files
# into these trees (common/version.h into common's public tree) and are left alone.
# scripts/check_deps.py checks what the paths cannot: that a library's CMake dependencies are the
# components it includes.

# grist_include_trees(<dir> [PUBLIC_HDRS <header>...])
# Makes the two trees of the folder <dir> (relative to the source root); PUBLIC_HDRS (relative to
# <dir>) replaces the default public headers, every <dir>/*.h. Sets grist_public_include and
# grist_private_include in the caller's scope.
function(grist_include_trees dir)
  cmake_parse_arguments(ARG "" "" "PUBLIC_HDRS" ${ARGN})
  set(src ${PROJECT_SOURCE_DIR}/${dir})
  set(pub ${PROJECT_BINARY_DIR}/include/${dir})
  set(priv ${PROJECT_BINARY_DIR}/include_private/${dir})
  if(ARG_PUBLIC_HDRS)
    set(hdrs ${ARG_PUBLIC_HDRS})
  else()
    file(GLOB hdrs CONFIGURE_DEPENDS RELATIVE ${src} ${src}/*.h)
  endif()
  set(wanted)
  foreach(h ${hdrs})
    if(h MATCHES "(^|/)internal/")
      message(FATAL_ERROR "${dir}: ${h} is under internal/ and cannot be a public header")
    endif()
    set(link ${pub}/${dir}/${h})
    list(APPEND wanted ${link})
    get_filename_component(parent ${link} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${src}/${h} ${link} SYMBOLIC)
  endforeach()
  file(GLOB_RECURSE present LIST_DIRECTORIES false ${pub}/*)
  foreach(p ${present})
    if(IS_SYMLINK ${p} AND NOT p IN_LIST wanted)
      file(REMOVE ${p})
    endif()
  endforeach()
  file(MAKE_DIRECTORY ${priv})
  file(CREATE_LINK ${src} ${priv}/${dir} SYMBOLIC)
  set(grist_public_include ${pub} PARENT_SCOPE)
  set(grist_private_include ${priv} PARENT_SCOPE)
endfunction()

# The private include tree of <dir> (made by grist_include_trees in that folder's CMakeLists, or
# here for folders without a library: tests/, fuzz/).
function(grist_private_include_of dir out)
  set(priv ${PROJECT_BINARY_DIR}/include_private/${dir})
  if(NOT IS_SYMLINK ${priv}/${dir})
    file(MAKE_DIRECTORY ${priv})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${dir} ${priv}/${dir} SYMBOLIC)
  endif()
  set(${out} ${priv} PARENT_SCOPE)
endfunction()

# grist_cc_library(NAME <name> SRCS ... [HDRS ...] [PUBLIC_HDRS ...] [DEPS ...] [PRIVATE_DEPS ...])
# Makes the static library grist_<name> and its alias grist::<name>. Link only through the alias.
# Its sources see their own folder (internal/ included); what links it sees the folder's public
# headers (grist_include_trees: PUBLIC_HDRS, default every top-level *.h of the folder).
function(grist_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;HDRS;PUBLIC_HDRS;DEPS;PRIVATE_DEPS;DEFINES" ${ARGN})
  set(target grist_${ARG_NAME})
  add_library(${target} STATIC ${ARG_SRCS} ${ARG_HDRS})
  add_library(grist::${ARG_NAME} ALIAS ${target})
  file(RELATIVE_PATH dir ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
  grist_include_trees(${dir} PUBLIC_HDRS ${ARG_PUBLIC_HDRS})
  target_include_directories(${target} PRIVATE ${grist_private_include}
                                       PUBLIC ${grist_public_include})
  target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  target_compile_definitions(${target} PUBLIC ${ARG_DEFINES})
  grist_set_warnings(${target})
endfunction()

# grist_cc_test(NAME <name> SRCS ... DEPS ... [INTERNAL <dir>...] [TIMEOUT seconds] [LABELS ...])
# One GoogleTest executable per component, registered with ctest (gtest_discover_tests). It sees
# tests/ (the shared test helpers) and the public headers of its DEPS; INTERNAL names the folders
# whose internal/ headers it tests.
function(grist_cc_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SRCS;DEPS;INTERNAL;LABELS" ${ARGN})
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
  grist_private_include_of(tests tests_include)
  target_include_directories(${ARG_NAME} PRIVATE ${tests_include})
  foreach(dir ${ARG_INTERNAL})
    grist_private_include_of(${dir} internal_include)
    target_include_directories(${ARG_NAME} PRIVATE ${internal_include})
  endforeach()
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
