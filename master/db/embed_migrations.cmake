# Generates migrations.cc from the numbered SQL files (NNN_name.sql) in MIGRATIONS_DIR.
file(GLOB files "${MIGRATIONS_DIR}/*.sql")
list(SORT files)
set(body "")
foreach(f ${files})
  get_filename_component(name ${f} NAME_WE)
  string(REGEX MATCH "^([0-9]+)_(.*)$" _ ${name})
  set(version ${CMAKE_MATCH_1})
  set(label ${CMAKE_MATCH_2})
  math(EXPR version "${version} + 0")
  file(READ ${f} sql)
  string(APPEND body "      {${version}, \"${label}\", R\"sfsql(${sql})sfsql\"},\n")
endforeach()
file(WRITE ${OUTPUT}.tmp
"// Generated from master/db/migrations/*.sql by embed_migrations.cmake. Do not edit.
#include \"master/db/database.h\"

namespace sf::master {

const std::vector<Migration>& Migrations() {
  static const auto* migrations = new std::vector<Migration>{
${body}  };
  return *migrations;
}

}  // namespace sf::master
")
file(COPY_FILE ${OUTPUT}.tmp ${OUTPUT} ONLY_IF_DIFFERENT)
