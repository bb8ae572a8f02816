// sf-serve --model NAME [--version N]: the checkpoint directory of a model version in the master's
// model registry (docs/registry.md, docs/serving.md "Serving a registry model").
//
// GetModelVersion (GetModel for the latest version when none is given) over the master's REST
// API, with the typed messages of proto/steadfast/v1/model_registry.proto. The directory is the
// checkpoint's `path` as the master recorded it (an s3:// URL for a checkpoint on object
// storage, with the storage's endpoint and region from GetCheckpoint: the caller fetches it); when `checkpoint_root` is given, it is
// `checkpoint_root/<uuid>` instead (the path rule of trainer/run/checkpoint.cc), for a host that
// mounts the shared checkpoint storage somewhere else. An archived model is served (archiving
// only hides a model from listings and stops new versions); `archived` says so.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace sf::serve {

struct RegistryQuery {
  std::string master;           // URL; empty: as `sf` finds it ($SF_MASTER, the defaults file)
  std::string ca_file;          // PEM CA of an https:// master; empty: as `sf` finds it
  std::string token;            // bearer token; empty: $SF_TOKEN or the saved `sf login` session
  std::string model;            // name or id
  int32_t version = 0;          // 0: the model's latest version
  std::string checkpoint_root;  // empty: the checkpoint's recorded path
};

struct RegistryCheckpoint {
  std::string model;  // the model's name
  int32_t version = 0;
  std::string checkpoint_uuid;
  std::string directory;  // holds manifest.json; or the s3:// URL of a checkpoint on object storage
  std::string s3_endpoint, s3_region;  // for an s3:// directory: its experiment's storage, if configured
  bool archived = false;
};

// Errors: the master unreachable (Unavailable, naming the URL); unknown model or version
// (NotFound, the master's message); a model without versions, a checkpoint the master no longer
// has (FailedPrecondition); a directory that is missing or has no manifest.json
// (FailedPrecondition, naming the path); any other refusal (the master's message).
Result<RegistryCheckpoint> ResolveRegistryCheckpoint(const RegistryQuery& query);

}  // namespace sf::serve
