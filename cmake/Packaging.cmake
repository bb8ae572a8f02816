# Debian packages for real machines (docs/deploy.md): `cmake --build build --target package`
# makes three component packages with CPack's DEB generator:
#
#   steadfast-master  sf-master, the built dashboard, the SQL migrations, the systemd unit and
#                     /etc/steadfast/master.yaml (a conffile)
#   steadfast-agent   sf-agent with the sf-trainer (and its sf-spm helper) it spawns, sf-serve,
#                     sf-task (a rank where no agent runs: Slurm nodes), the
#                     `steadfast` Python package user trials import (/usr/lib/steadfast/python,
#                     where sf-agent looks), the unit and /etc/steadfast/agent.env (a conffile)
#   steadfast-cli     sf
#
# Only install() rules and CPack variables live here, all of them, so that one file says what
# each package holds: nothing runs at configure time, and the normal build and tests do not
# depend on any of it. Included last from the top-level CMakeLists.txt, once every target exists.
include(GNUInstallDirs)

set(SF_PACKAGING_DIR ${PROJECT_SOURCE_DIR}/deploy/packaging)

# The programs, in /usr/bin. Agents run sf-trainer, which finds its SentencePiece helper sf-spm
# beside itself. The trainer is installed as built: install(TARGETS) would rewrite its RUNPATH,
# which CMake 3.25 refuses for the empty entry the CUDA toolkit's link directories leave in it;
# the RUNPATH it keeps (/usr/local/cuda/lib, Open MPI's library directory) is harmless.
if(TARGET sf-master)
  install(TARGETS sf-master RUNTIME COMPONENT master)
endif()
if(TARGET sf-agent AND TARGET sf-trainer AND TARGET sf-spm)
  install(TARGETS sf-agent sf-spm RUNTIME COMPONENT agent)
  install(PROGRAMS $<TARGET_FILE:sf-trainer> TYPE BIN COMPONENT agent)
endif()
# sf-serve translates with the trainer's engine and finds sf-spm beside itself, so it ships with
# them; installed as built for the same RUNPATH reason as sf-trainer.
if(TARGET sf-serve AND TARGET sf-spm)
  install(PROGRAMS $<TARGET_FILE:sf-serve> TYPE BIN COMPONENT agent)
endif()
if(TARGET sf-task)
  install(TARGETS sf-task RUNTIME COMPONENT agent)
endif()
if(TARGET sf)
  install(TARGETS sf RUNTIME COMPONENT cli)
  # `sf deploy local up --slurm` and `--s3` run them (cli/deploy_local_slurm.h, deploy_local_s3.h);
  # both source lib/script.sh beside them.
  install(PROGRAMS ${PROJECT_SOURCE_DIR}/deploy/local-slurm.sh ${PROJECT_SOURCE_DIR}/deploy/local-s3.sh
          DESTINATION share/steadfast COMPONENT cli)
  install(FILES ${PROJECT_SOURCE_DIR}/deploy/lib/script.sh DESTINATION share/steadfast/lib COMPONENT cli)
endif()
# The Core API's Python package as the build made it (sources and generated stubs), where
# sf-agent finds it: <prefix>/lib/steadfast/python (docs/core-api.md).
if(TARGET steadfast_python)
  install(DIRECTORY ${CMAKE_BINARY_DIR}/python/steadfast DESTINATION lib/steadfast/python COMPONENT agent
          PATTERN __pycache__ EXCLUDE)
endif()

# The master's data: the dashboard as built by `npm run build` (webui/dist; packaged when it is
# there at package time, as in CI where tests/webui/run.sh builds it first), and the migrations
# (also compiled into sf-master, which applies them at start; these copies are for reading).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/webui/dist/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/steadfast/webui COMPONENT master OPTIONAL)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/master/db/migrations/
        DESTINATION ${CMAKE_INSTALL_DATADIR}/steadfast/migrations COMPONENT master
        FILES_MATCHING PATTERN "*.sql")
# Absolute destinations: systemd units and configuration do not move with the prefix.
install(FILES ${SF_PACKAGING_DIR}/master/steadfast-master.service
        DESTINATION /lib/systemd/system COMPONENT master)
install(FILES ${SF_PACKAGING_DIR}/master/master.yaml DESTINATION /etc/steadfast COMPONENT master)
install(FILES ${SF_PACKAGING_DIR}/agent/steadfast-agent.service
        DESTINATION /lib/systemd/system COMPONENT agent)
install(FILES ${SF_PACKAGING_DIR}/agent/agent.env DESTINATION /etc/steadfast COMPONENT agent)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME steadfast)
set(CPACK_PACKAGE_VENDOR "Steadfast")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "Steadfast maintainers <steadfast@example.org>")
# No CPACK_PACKAGE_DESCRIPTION_SUMMARY: each component description's first line is its synopsis.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL master agent cli)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # steadfast-master_0.1.0_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Runtime dependencies (libgrpc++, libpqxx, oneDNN, ...) from dpkg-shlibdeps (package dpkg-dev).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS OFF)
# Maintainer scripts must be 0755 and conffiles 0644 in the control archive.
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_STRIP_FILES ON)

# The daemons' maintainer scripts (the steadfast user, directories, the unit) and conffiles.
set(SF_CONTROL_FILES postinst prerm postrm conffiles)

set(CPACK_DEBIAN_MASTER_PACKAGE_NAME steadfast-master)
set(CPACK_DEBIAN_MASTER_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_MASTER_PACKAGE_RECOMMENDS "postgresql")
set(CPACK_COMPONENT_MASTER_DESCRIPTION
    "Steadfast cluster training service: the master daemon (sf-master)\n\
The master schedules experiments onto agents, keeps everything in PostgreSQL and serves the\n\
REST and gRPC APIs and the web dashboard. Runs as the steadfast system user under systemd.")
list(TRANSFORM SF_CONTROL_FILES PREPEND ${SF_PACKAGING_DIR}/master/
     OUTPUT_VARIABLE CPACK_DEBIAN_MASTER_PACKAGE_CONTROL_EXTRA)

set(CPACK_DEBIAN_AGENT_PACKAGE_NAME steadfast-agent)
# openmpi-bin: ompi-server and orted, which distributed trials start (docs/distributed.md).
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "adduser, openmpi-bin, python3, python3-grpcio, python3-protobuf")
# python3-notebook: the Jupyter server notebooks run, and Tornado for shells (docs/tasks.md); an
# agent that never runs either trains without them.
# python3-boto3 and python3-yaml: Core API trials whose checkpoints go to S3
# (checkpoint_storage type s3; docs/object-storage.md).
set(CPACK_DEBIAN_AGENT_PACKAGE_RECOMMENDS "python3-notebook, python3-boto3, python3-yaml")
set(CPACK_COMPONENT_AGENT_DESCRIPTION
    "Steadfast cluster training service: the agent (sf-agent) and trainer\n\
One agent runs on each training machine: it offers the machine's GPU or CPU slots to the\n\
master and runs sf-trainer processes for the trials scheduled there.")
list(TRANSFORM SF_CONTROL_FILES PREPEND ${SF_PACKAGING_DIR}/agent/
     OUTPUT_VARIABLE CPACK_DEBIAN_AGENT_PACKAGE_CONTROL_EXTRA)

set(CPACK_DEBIAN_CLI_PACKAGE_NAME steadfast-cli)
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "Steadfast cluster training service: the command line client (sf)\n\
sf submits and follows experiments, reads metrics, logs and checkpoints, and manages users and\n\
tokens on a Steadfast master.")

include(CPack)
