# sf_add_test(NAME name SOURCES a.cc ... [LIBS lib ...] [LABELS label ...] [TIMEOUT seconds]
#             [RESOURCE_LOCK name])
#
# Builds one GoogleTest executable and registers each of its tests with CTest (discovered at
# build time), labelled so slow suites can be run apart: `ctest -L unit`, `ctest -L engine`, ...
# RESOURCE_LOCK: tests holding the same lock never run at the same time under `ctest -j` (the
# "mpi" lock: tests that start Open MPI jobs on this host, see tests/e2e/CMakeLists.txt).
find_package(GTest REQUIRED)
include(GoogleTest)

function(sf_add_test)
  cmake_parse_arguments(T "RUN_SERIAL" "NAME;TIMEOUT;RESOURCE_LOCK" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} sf_testing GTest::gtest GTest::gmock sf_options)
  target_compile_definitions(${T_NAME} PRIVATE
    SF_SOURCE_DIR="${PROJECT_SOURCE_DIR}" SF_BINARY_DIR="${PROJECT_BINARY_DIR}")
  set(lock)
  if(T_RESOURCE_LOCK)
    set(lock RESOURCE_LOCK ${T_RESOURCE_LOCK})
  endif()
  if(T_RUN_SERIAL)  # no other test runs beside it (a load-sensitive browser test)
    list(APPEND lock RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${T_NAME}
    WORKING_DIRECTORY ${PROJECT_BINARY_DIR}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT} ${lock})
endfunction()
