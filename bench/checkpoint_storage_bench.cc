// Checkpoint write and restore throughput, shared_fs against S3 (common/storage/
// checkpoint_storage.h), for a checkpoint of transformer_base's size: the fp32 weights and the
// two AdamW moments (77 M parameters, about 0.9 GB) in the real format (trainer/run/checkpoint.h).
// Each path is what a trial does:
//   shared_fs write: WriteCheckpoint into the directory (fsynced files, manifest, rename);
//   shared_fs read:  ReadCheckpoint (verifies every file's SHA-256, parses);
//   s3 write:        WriteCheckpoint into a staging directory, then Store (upload, manifest last);
//   s3 read:         Fetch into a directory (verified), then ReadCheckpoint.
// Before each read the page cache is dropped when this runs as root (else it says so), so a read
// comes from the disk. Prints seconds and MB/s per path and the S3/shared_fs ratios.
//
//   build/bench/checkpoint_storage_bench --dir DIR [--params 77000000] [--reps 2]
//   with SF_S3_ENDPOINT, SF_S3_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY set
//   (bench/checkpoint_storage.sh brings up the local radosgw and sets them).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/command_line.h"
#include "common/env.h"
#include "common/storage/checkpoint_storage.h"
#include "trainer/run/checkpoint.h"

namespace {
namespace fs = std::filesystem;

double Seconds(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

bool DropCaches() {
  sync();
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (!drop) return false;
  drop << "3\n";
  return static_cast<bool>(drop);
}

// Weights and two moments of `params` floats, in tensors of transformer-like sizes.
sf::CheckpointContents MakeContents(int64_t params) {
  sf::CheckpointContents c;
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 0.02f);
  const int64_t chunk = 512 * 2048;  // an FFN matrix of d_model 512
  int index = 0;
  for (int64_t left = params; left > 0; left -= chunk, ++index) {
    std::vector<float> values(static_cast<size_t>(std::min(chunk, left)));
    for (float& v : values) v = normal(rng);
    const std::string name = "layers." + std::to_string(index) + ".weight";
    c.model.push_back(sf::NamedBuffer::F32(name, values));
    c.optimizer.push_back(sf::NamedBuffer::F32("exp_avg." + name, values));
    for (float& v : values) v = v * v;
    c.optimizer.push_back(sf::NamedBuffer::F32("exp_avg_sq." + name, values));
  }
  c.state = sf::Value(sf::Value::Map{{"step", int64_t{1000}}});
  c.config_yaml = "name: bench\n";
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("Checkpoint write and restore throughput: shared_fs against S3.", "checkpoint_storage_bench");
  sf::cmdline::UseDefaults(app);
  std::string dir;
  int64_t params = 77'000'000;
  int reps = 2;
  app.add_option("--dir", dir, "a scratch directory on the disk to measure (shared_fs and staging)")->required();
  app.add_option("--params", params, "parameters (fp32 weights; the two moments double it)")
      ->check(sf::cmdline::AtLeast(1));
  app.add_option("--reps", reps, "runs of each path (the best is printed)")->check(sf::cmdline::AtLeast(1));
  if (auto code = sf::cmdline::Parse(app, argc, argv)) return *code;
  if (sf::Env("SF_S3_ENDPOINT").empty() || sf::Env("SF_S3_BUCKET").empty()) {
    std::fprintf(stderr, "checkpoint_storage_bench: SF_S3_ENDPOINT and SF_S3_BUCKET must be set\n");
    return 2;
  }
  sf::config::CheckpointStorageConfig s3_config;
  s3_config.type = "s3";
  s3_config.bucket = sf::Env("SF_S3_BUCKET");
  s3_config.prefix = "bench-" + std::to_string(getpid());
  s3_config.endpoint_url = sf::Env("SF_S3_ENDPOINT");
  auto s3 = sf::storage::CheckpointStorage::Open(s3_config, "");
  if (!s3.ok() || !(*s3)->Check().ok()) {
    std::fprintf(stderr, "checkpoint_storage_bench: %s\n",
                 (s3.ok() ? (*s3)->Check() : s3.status()).message().c_str());
    return 1;
  }
  fs::create_directories(dir);
  const sf::CheckpointContents contents = MakeContents(params);
  const bool dropping = DropCaches();
  std::printf("checkpoint_storage_bench: %lld parameters (weights + 2 moments), page cache %s before reads\n",
              static_cast<long long>(params), dropping ? "dropped" : "NOT dropped (not root)");

  double best[4] = {1e30, 1e30, 1e30, 1e30};  // fs write, fs read, s3 write, s3 read
  int64_t bytes = 0;
  size_t files = 0;
  auto fail = [](const char* what, const sf::Status& st) {
    std::fprintf(stderr, "checkpoint_storage_bench: %s: %s\n", what, st.message().c_str());
    return 1;
  };
  for (int r = 0; r < reps; ++r) {
    const std::string fs_root = dir + "/shared_fs", staging = dir + "/staging", fetched = dir + "/fetched";
    fs::remove_all(fs_root);
    fs::remove_all(staging);
    fs::remove_all(fetched);
    sf::Result<sf::WrittenCheckpoint> written = sf::Status::Ok();
    best[0] = std::min(best[0], Seconds([&] { written = sf::WriteCheckpoint(fs_root, contents); }));
    if (!written.ok()) return fail("shared_fs write", written.status());
    bytes = written->size;
    files = written->files.size();
    DropCaches();
    sf::Result<sf::CheckpointContents> read = sf::Status::Ok();
    best[1] = std::min(best[1], Seconds([&] { read = sf::ReadCheckpoint(written->dir); }));
    if (!read.ok()) return fail("shared_fs read", read.status());

    const std::string url = (*s3)->ExperimentRoot(1) + "/trial-1/" + written->uuid;
    sf::Status stored;
    best[2] = std::min(best[2], Seconds([&] {
                         auto staged = sf::WriteCheckpoint(staging, contents, written->uuid);
                         stored = staged.ok() ? (*s3)->Store(staged->dir, url) : staged.status();
                       }));
    if (!stored.ok()) return fail("s3 write", stored);
    DropCaches();
    sf::Status restored;
    best[3] = std::min(best[3], Seconds([&] {
                         auto got = (*s3)->Fetch(url, fetched);
                         restored = got.ok() ? sf::ReadCheckpoint(fetched).status() : got.status();
                       }));
    if (!restored.ok()) return fail("s3 read", restored);
    (void)(*s3)->Remove(url);
  }
  fs::remove_all(dir + "/shared_fs");
  fs::remove_all(dir + "/staging");
  fs::remove_all(dir + "/fetched");
  const double mb = static_cast<double>(bytes) / 1e6;
  std::printf("checkpoint: %.1f MB in %zu files\n", mb, files);
  std::printf("| path | seconds | MB/s |\n|---|---|---|\n");
  const char* names[4] = {"shared_fs write", "shared_fs read (verified)", "s3 write (staged + upload)",
                          "s3 read (fetch, verified + read)"};
  for (int i = 0; i < 4; ++i) std::printf("| %s | %.2f | %.0f |\n", names[i], best[i], mb / best[i]);
  std::printf("s3/shared_fs: write %.2fx the time, read %.2fx the time\n", best[2] / best[0], best[3] / best[1]);
  return 0;
}
