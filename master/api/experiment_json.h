// The experiment list's JSON, written directly instead of through protobuf's JSON printer.
//
// protobuf 3.21's MessageToJsonString goes through the binary encoding and a type resolver and
// allocates per field; for a page of 100 experiments it was most of the master's CPU time per
// GET /api/v1/experiments (perf, bench/api_load.sh). This writes the same document (the proto3
// JSON mapping as HttpServer prints it: lowerCamelCase names, int64 as strings, enums by name,
// primitive fields always printed, unset optional and message fields left out) in one pass.
// tests/master/api/experiment_json_test.cc checks it against protobuf's printer. Thread-safe
// (pure functions).
#pragma once

#include <string>

#include "steadfast/v1/api.pb.h"

namespace sf::master {

// Appends `e` as a JSON object to `out`.
void AppendExperimentJson(const steadfast::v1::Experiment& e, std::string* out);
// The whole GetExperimentsResponse as JSON.
std::string ExperimentsResponseJson(const steadfast::v1::GetExperimentsResponse& r);

}  // namespace sf::master
