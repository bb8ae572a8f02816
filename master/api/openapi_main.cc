// sf-openapi: prints /api/v1/openapi.json as the master serves it (generated from the proto's
// route options, docs/api.md), for the build to write build/openapi.json and the dashboard's
// TypeScript types to be generated from (webui/scripts/gen-api-types.mjs).
#include <iostream>

#include "master/api/http_server.h"

int main() {
  std::cout << sf::master::OpenApiDocument() << "\n";
  return std::cout.good() ? 0 : 1;
}
