// `sf checkpoint list|delete|download`: an experiment's checkpoints, deleting them now, and
// fetching one's files, through the master's Api methods (cluster_command.h has what they
// share) and the checkpoint storage (common/storage/checkpoint_storage.h).
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/api_call.h"
#include "cli/cluster_command.h"
#include "cli/command.h"
#include "cli/output.h"
#include "cli/reply_text.h"
#include "common/command_line.h"
#include "common/storage/checkpoint_storage.h"
#include "steadfast/v1/api.pb.h"

namespace sf::cli {
namespace {

namespace v1 = steadfast::v1;

int ListCheckpoints(const Flags& f, Api& api) {
  v1::GetExperimentCheckpointsRequest request;
  const auto id = IntegerId(f.id);
  if (!id) return kExitUsage;
  request.set_id(*id);
  auto r = api.Call<v1::GetExperimentCheckpointsResponse>("GetExperimentCheckpoints", request);
  if (!r) return api.exit_code;
  if (f.json) {
    std::cout << r->json << "\n";
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const v1::Checkpoint& c : r->message.checkpoints()) {
    rows.push_back({c.uuid(), std::to_string(c.trial_id()), std::to_string(c.batches()),
                    std::to_string(c.size()),
                    NumberText(c.has_validation_metric(), c.validation_metric()), c.state(),
                    c.path()});
  }
  PrintTable({"UUID", "TRIAL", "BATCHES", "SIZE", "METRIC", "STATE", "PATH"}, rows);
  return kExitOk;
}

// `sf checkpoint delete UUID...`: DeleteCheckpoints, one line per checkpoint; exit 2 when a uuid
// does not exist, else 1 when one was refused, else 0.
int DeleteCheckpoints(const Flags& f, Api& api) {
  v1::DeleteCheckpointsRequest request;
  for (const std::string& uuid : f.ids) request.add_uuids(uuid);
  auto r = api.Call<v1::DeleteCheckpointsResponse>("DeleteCheckpoints", request);
  if (!r) return api.exit_code;
  return PrintResults(
      r->message.results(), r->json, f,
      [](const v1::DeleteCheckpointResult& result) {
        return "checkpoint " + result.uuid() + ": deleted";
      },
      [](const v1::DeleteCheckpointResult& result) { return result.error(); });
}

// `sf checkpoint download UUID DIR`: the checkpoint's files into DIR (which must not exist),
// fetched from its storage (shared_fs: the directory must be reachable here; s3: with this
// process's keys, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) and checked against the sizes and
// SHA-256 the master recorded. Exit 2 for an unknown uuid, 1 when it cannot be fetched or does
// not verify (DIR is then removed), else 0.
int DownloadCheckpoint(const Flags& f, Api& api) {
  v1::GetCheckpointRequest request;
  request.set_uuid(f.id);
  auto r = api.Call<v1::GetCheckpointResponse>("GetCheckpoint", request);
  if (!r) return api.exit_code;
  const v1::Checkpoint& ck = r->message.checkpoint();
  auto fail = [&](const std::string& why) {
    std::cerr << "sf: checkpoint " << ck.uuid() << ": " << why << "\n";
    return kExitFailed;
  };
  if (ck.state() == "DELETED") return fail("it was deleted (state DELETED); its files are gone");
  std::optional<config::CheckpointStorageConfig> storage;
  if (r->message.location().type() == "s3") {
    storage.emplace();
    storage->type = "s3";
    storage->endpoint_url = r->message.location().endpoint_url();
    storage->region = r->message.location().region();
  }
  auto store = storage::CheckpointStorage::ForPath(ck.path(), storage);
  if (!store.ok()) return fail(store.status().message());
  auto fetched = (*store)->Fetch(ck.path(), f.file);
  if (!fetched.ok()) return fail(fetched.status().message());
  std::map<std::string, storage::StoredFile> got;
  for (const storage::StoredFile& file : *fetched) got[file.path] = file;
  std::string mismatch;
  for (const v1::CheckpointFile& want : ck.files()) {
    auto it = got.find(want.path());
    if (it == got.end()) {
      mismatch = want.path() + " is missing";
    } else if (it->second.size != want.size() || (!want.sha256().empty() && it->second.sha256 != want.sha256())) {
      mismatch = want.path() + " differs from what the master recorded (size or SHA-256)";
    }
    if (!mismatch.empty()) break;
  }
  if (!mismatch.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(f.file, ec);
    return fail(mismatch + "; nothing was kept");
  }
  int64_t bytes = 0;
  for (const storage::StoredFile& file : *fetched) bytes += file.size;
  std::cout << "checkpoint " << ck.uuid() << ": " << fetched->size() << " files, " << bytes << " bytes in "
            << f.file << " (verified)\n";
  return kExitOk;
}

}  // namespace

void AddCheckpointCommands(CLI::App& sf, CommandAction& action) {
  CLI::App* checkpoint = sf.add_subcommand("checkpoint", "an experiment's checkpoints");
  checkpoint->require_subcommand(1);
  AddCommand(checkpoint, "list", "list an experiment's checkpoints", action, ListCheckpoints)
      .Id("EXPERIMENT_ID", "the experiment's id");
  ClusterCommand delete_checkpoints = AddCommand(
      checkpoint, "delete", "delete checkpoints now: their files, and their state becomes DELETED", action,
      DeleteCheckpoints);
  delete_checkpoints.app->add_option("UUID", delete_checkpoints.flags->ids, "the checkpoints' uuids")
      ->type_name("")
      ->required();
  ClusterCommand download = AddCommand(
      checkpoint, "download", "fetch a checkpoint's files into a new directory, verified", action,
      DownloadCheckpoint);
  download.app->add_option("UUID", download.flags->id, "the checkpoint's uuid")->type_name("")->required();
  download.app->add_option("DIR", download.flags->file, "a directory to create")->type_name("")->required();
}

}  // namespace sf::cli
