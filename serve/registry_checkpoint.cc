#include "serve/registry_checkpoint.h"

#include <google/protobuf/message.h>

#include <filesystem>

#include "common/api/master_endpoint.h"
#include "common/api/master_client.h"
#include "common/api/rest_request.h"
#include "common/storage/checkpoint_storage.h"
#include "common/value.h"
#include "steadfast/v1/api.pb.h"
#include "steadfast/v1/model_registry.pb.h"

namespace sf::serve {
namespace {
namespace fs = std::filesystem;
namespace v1 = steadfast::v1;

// What a refusal with this HTTP status means here.
StatusCode CodeOf(int http_status) {
  switch (http_status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
      return StatusCode::kNotFound;
    default:
      return StatusCode::kFailedPrecondition;
  }
}

// Calls Api method `method` over REST (its route from the proto) and reads the reply into
// `response`; a refusal is the master's message.
Status CallMaster(api::MasterClient& client, const std::string& method,
                  const google::protobuf::Message& request, google::protobuf::Message* response) {
  SF_ASSIGN_OR_RETURN(api::RestRequest rest, api::EncodeRestRequest(method, request));
  SF_ASSIGN_OR_RETURN(api::HttpResponse reply, rest.method == "GET"
                                                   ? client.Get(rest.target)
                                                   : client.Post(rest.target, rest.body));
  if (reply.status != 200) {
    std::string message = reply.body;
    auto json = Value::FromJson(reply.body);
    if (const Value* m = json.ok() && json->is_map() ? json->Find("message") : nullptr;
        m && m->is_string()) {
      message = m->as_string();
    }
    return Status(CodeOf(reply.status), "the master at " + client.base_url() + " answered " +
                                            method + " with HTTP " + std::to_string(reply.status) +
                                            ": " + message);
  }
  if (Status st = api::DecodeRestResponse(reply.body, response); !st.ok()) {
    return Internal("the master's reply to " + method + " is " + st.message());
  }
  return Status::Ok();
}

}  // namespace

Result<RegistryCheckpoint> ResolveRegistryCheckpoint(const RegistryQuery& query) {
  SF_ASSIGN_OR_RETURN(api::MasterEndpoint master,
                      api::ResolveMasterEndpoint(query.master, query.ca_file));
  SF_ASSIGN_OR_RETURN(api::MasterClient client, api::MasterClient::Create(master.url, master.ca_file));
  if (!query.token.empty()) client.set_token(query.token);

  v1::GetModelRequest model_request;
  model_request.set_name(query.model);
  v1::GetModelResponse model;
  SF_RETURN_IF_ERROR(CallMaster(client, "GetModel", model_request, &model));
  RegistryCheckpoint out;
  out.model = model.model().name();
  out.version = query.version;
  out.archived = model.model().archived();
  if (out.version == 0) {
    out.version = model.model().latest_version();
    if (out.version == 0) return FailedPrecondition("model \"" + out.model + "\" has no versions");
  }
  const std::string what =
      "version " + std::to_string(out.version) + " of model \"" + out.model + "\"";

  v1::ModelVersionRequest version_request;
  version_request.set_name(query.model);
  version_request.set_version(out.version);
  v1::GetModelVersionResponse version;
  SF_RETURN_IF_ERROR(CallMaster(client, "GetModelVersion", version_request, &version));
  out.checkpoint_uuid = version.version().checkpoint_uuid();
  const v1::Checkpoint& checkpoint = version.checkpoint();
  if (!version.has_checkpoint() || checkpoint.state() == "DELETED") {
    return FailedPrecondition(what + ": its checkpoint " + out.checkpoint_uuid + " is deleted");
  }
  if (storage::IsS3Url(checkpoint.path()) && query.checkpoint_root.empty()) {
    // On object storage: where it is (endpoint, region) comes with the checkpoint; the files are
    // fetched by the caller (common/storage/checkpoint_storage.h).
    v1::GetCheckpointRequest where;
    where.set_uuid(out.checkpoint_uuid);
    v1::GetCheckpointResponse located;
    SF_RETURN_IF_ERROR(CallMaster(client, "GetCheckpoint", where, &located));
    out.directory = checkpoint.path();
    out.s3_endpoint = located.location().endpoint_url();
    out.s3_region = located.location().region();
    return out;
  }
  out.directory = query.checkpoint_root.empty() ? checkpoint.path()
                                                : query.checkpoint_root + "/" + out.checkpoint_uuid;
  if (out.directory.empty()) {
    return FailedPrecondition(what + ": the master records no directory for checkpoint " +
                              out.checkpoint_uuid + "; give --checkpoint-root DIR");
  }
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(out.directory) / "manifest.json", ec)) {
    return FailedPrecondition(what + ": checkpoint directory " + out.directory +
                              (fs::is_directory(out.directory, ec)
                                   ? " has no manifest.json"
                                   : " is missing (is the checkpoint storage "
                                     "mounted here? --checkpoint-root DIR names "
                                     "where)"));
  }
  return out;
}

}  // namespace sf::serve
