# Run at build time (cmake -P, from the grist_git_commit target of bench/CMakeLists.txt): writes
# OUT, a header defining GRIST_BENCH_GIT_COMMIT as `git describe --always --dirty --abbrev=12` of
# SRC ("unknown" without git or outside a clone), and rewrites it only when that changes, so that
# a build after a commit names it while one without a change recompiles nothing. Taken at
# configure time instead, an incremental build after new commits reported the commit of its
# configure in every benchmark record.
set(commit "unknown")
if(GIT)
  execute_process(COMMAND ${GIT} describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE described
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
  if(rc EQUAL 0 AND described)
    set(commit "${described}")
  endif()
endif()
set(content "// Generated at build time by cmake/GitCommit.cmake: the commit this grist binary was\n// built from, for the environment record of `grist bench` reports. Do not edit.\n#define GRIST_BENCH_GIT_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
