// Checkpoint storage (common/storage/checkpoint_storage.h) on both types: a directory stored to
// the real S3 server of tests/storage/s3_test.sh comes back byte for byte and verified; a
// checkpoint whose manifest never arrived, or whose object was replaced, is refused; Remove and
// RemoveAll leave nothing behind; shared_fs fetches copy and verify. Bad configs are named.
#include "common/storage/checkpoint_storage.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/env.h"
#include "common/storage/s3_client.h"
#include "tests/support/testing.h"

namespace sf::storage {
namespace {
namespace fs = std::filesystem;

void WriteFile(const fs::path& p, const std::string& body) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << body;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A checkpoint-like directory: a large file (multipart: over the client's 16 MiB part size is
// not needed here — Store sends files in parallel), small ones, a nested one.
fs::path MakeCheckpoint(const fs::path& dir) {
  std::mt19937 rng(7);
  std::string big(3 << 20, '\0');
  for (char& ch : big) ch = static_cast<char>(rng());
  WriteFile(dir / "model.safetensors", big);
  WriteFile(dir / "trainer_state.json", "{\"step\": 40}");
  WriteFile(dir / "nested/notes.txt", "hello");
  WriteFile(dir / "empty.bin", "");
  return dir;
}

config::CheckpointStorageConfig S3Section(const std::string& prefix) {
  config::CheckpointStorageConfig c;
  c.type = "s3";
  c.bucket = Env("SF_S3_BUCKET");
  c.prefix = prefix;
  c.endpoint_url = Env("SF_S3_ENDPOINT");
  return c;
}

class CheckpointStorageS3 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Env("SF_S3_ENDPOINT").empty())
      GTEST_SKIP() << "no S3 server: run through tests/storage/s3_test.sh";
    tmp_ = fs::path(::testing::TempDir()) /
           ("ckstore-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(tmp_);
    config_ = S3Section(std::string("ckpt/") +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    auto opened = CheckpointStorage::Open(config_, "/unused");
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(opened).value();
    S3Config raw;
    raw.endpoint_url = config_.endpoint_url;
    raw.bucket = config_.bucket;
    auto client = S3Client::Create(raw);
    ASSERT_TRUE(client.ok());
    client_ = std::make_unique<S3Client>(*client);
  }
  void TearDown() override { fs::remove_all(tmp_); }
  std::string KeyOf(const std::string& url) {
    return url.substr(("s3://" + config_.bucket + "/").size());
  }

  fs::path tmp_;
  config::CheckpointStorageConfig config_;
  std::unique_ptr<CheckpointStorage> store_;
  std::unique_ptr<S3Client> client_;
};

TEST_F(CheckpointStorageS3, AStoredCheckpointComesBackVerifiedAndRemoveLeavesNoObject) {
  ASSERT_TRUE(store_->Check().ok());
  EXPECT_TRUE(store_->staged());
  const std::string root = store_->ExperimentRoot(12);
  EXPECT_EQ(root, "s3://" + config_.bucket + "/" + config_.prefix + "/experiment-12");
  const fs::path local = MakeCheckpoint(tmp_ / "written");
  const std::string path = root + "/trial-3/uuid-1";
  ASSERT_TRUE(store_->Store(local.string(), path).ok());
  auto listed = client_->List(KeyOf(path) + "/");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 5u) << "four files and the manifest";

  auto fetched = store_->Fetch(path, (tmp_ / "fetched").string());
  ASSERT_TRUE(fetched.ok()) << fetched.status().message();
  ASSERT_EQ(fetched->size(), 4u);
  for (const char* f :
       {"model.safetensors", "trainer_state.json", "nested/notes.txt", "empty.bin"}) {
    EXPECT_EQ(ReadFile(tmp_ / "fetched" / f), ReadFile(local / f)) << f;
  }
  EXPECT_FALSE(fs::exists(tmp_ / "fetched" / kObjectManifest))
      << "the manifest is storage's, not the checkpoint's";
  // Into a directory that exists: refused, nothing overwritten.
  EXPECT_EQ(store_->Fetch(path, (tmp_ / "fetched").string()).status().code(),
            StatusCode::kAlreadyExists);

  ASSERT_TRUE(store_->Remove(path).ok());
  EXPECT_TRUE(client_->List(KeyOf(path) + "/")->empty());
  EXPECT_TRUE(store_->Remove(path).ok()) << "removing a removed checkpoint is fine";
}

TEST_F(CheckpointStorageS3, ACheckpointWithoutItsManifestOrWithAChangedObjectIsRefused) {
  const fs::path local = MakeCheckpoint(tmp_ / "written");
  const std::string root = store_->ExperimentRoot(1);
  const std::string half = root + "/trial-1/half", changed = root + "/trial-1/changed";
  ASSERT_TRUE(store_->Store(local.string(), half).ok());
  ASSERT_TRUE(store_->Store(local.string(), changed).ok());
  // An upload cut off before its last step: every file there, no manifest.
  ASSERT_TRUE(client_->Delete(KeyOf(half) + "/" + kObjectManifest).ok());
  auto got = store_->Fetch(half, (tmp_ / "half").string());
  ASSERT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("its upload never completed"), std::string::npos)
      << got.status().message();
  EXPECT_FALSE(fs::exists(tmp_ / "half"));
  // An object replaced after the manifest was written.
  ASSERT_TRUE(client_->Put(KeyOf(changed) + "/trainer_state.json", "{\"step\": 41}").ok());
  got = store_->Fetch(changed, (tmp_ / "changed").string());
  ASSERT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("trainer_state.json does not match its SHA-256"),
            std::string::npos)
      << got.status().message();
  EXPECT_FALSE(fs::exists(tmp_ / "changed"))
      << "a failed fetch leaves no directory that looks whole";
  // The experiment's root goes as a whole.
  ASSERT_TRUE(store_->RemoveAll(root).ok());
  EXPECT_TRUE(client_->List(KeyOf(root) + "/")->empty());
}

TEST_F(CheckpointStorageS3, StorageThatCannotBeUsedSaysWhichAndWhy) {
  config::CheckpointStorageConfig missing = config_;
  missing.bucket = "no-such-bucket-for-checkpoints";
  auto store = CheckpointStorage::Open(missing, "/unused");
  ASSERT_TRUE(store.ok());
  Status st = (*store)->Check();
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.message();
  EXPECT_NE(
      st.message().find("checkpoint storage: checking bucket s3://no-such-bucket-for-checkpoints"),
      std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("NoSuchBucket"), std::string::npos) << st.message();

  config::CheckpointStorageConfig wrong = config_;
  wrong.access_key = Env("AWS_ACCESS_KEY_ID");
  wrong.secret_key = "not-the-secret";
  st = (*CheckpointStorage::Open(wrong, "/unused"))->Check();
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.message();
  EXPECT_NE(st.message().find("check the access key and secret key"), std::string::npos)
      << st.message();

  config::CheckpointStorageConfig away = config_;
  away.endpoint_url = "http://127.0.0.1:1";
  st = (*CheckpointStorage::Open(away, "/unused"))->Check();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.message();
  EXPECT_NE(st.message().find("http://127.0.0.1:1"), std::string::npos) << st.message();

  config::CheckpointStorageConfig bad = config_;
  bad.bucket = "Not_A_Bucket";
  auto refused = CheckpointStorage::Open(bad, "/unused");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("checkpoint_storage"), std::string::npos)
      << refused.status().message();
}

TEST(CheckpointStorageSharedFs, FetchCopiesAndVerifiesAndRemoveDeletes) {
  const fs::path tmp = fs::path(::testing::TempDir()) / ("ckstore-fs-" + std::to_string(getpid()));
  fs::remove_all(tmp);
  config::CheckpointStorageConfig c;
  c.host_path = (tmp / "root").string();
  c.storage_path = "sub";
  auto store = CheckpointStorage::Open(c, "/unused");
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE((*store)->staged());
  EXPECT_EQ((*store)->ExperimentRoot(4), (tmp / "root/sub/experiment-4").string());
  auto fallback = CheckpointStorage::Open(std::nullopt, (tmp / "default").string());
  EXPECT_EQ((*fallback)->ExperimentRoot(4), (tmp / "default/experiment-4").string());
  const fs::path ck = MakeCheckpoint(tmp / "root/sub/experiment-4/trial-1/u1");
  auto fetched = (*store)->Fetch(ck.string(), (tmp / "copy").string());
  ASSERT_TRUE(fetched.ok()) << fetched.status().message();
  EXPECT_EQ(fetched->size(), 4u);
  EXPECT_EQ(ReadFile(tmp / "copy/nested/notes.txt"), "hello");
  EXPECT_EQ((*store)->Fetch((tmp / "nope").string(), (tmp / "copy2").string()).status().code(),
            StatusCode::kNotFound);
  ASSERT_TRUE((*store)->Remove(ck.string()).ok());
  EXPECT_FALSE(fs::exists(ck));
  fs::remove_all(tmp);
}

// Found by the two-hour soak: retention removing a checkpoint while its experiment's directory
// was being deleted made the experiment's deletion fail ("No such file or directory": an entry
// taken from under the walk). Two removers on one tree now both succeed.
TEST(CheckpointStorageSharedFs, TwoRemoversOfOneTreeBothSucceed) {
  const fs::path tmp = fs::path(::testing::TempDir()) / ("ckstore-race-" + std::to_string(getpid()));
  auto store = CheckpointStorage::Open(std::nullopt, tmp.string());
  ASSERT_TRUE(store.ok());
  for (int round = 0; round < 20; ++round) {
    fs::remove_all(tmp);
    const fs::path root = tmp / "experiment-1";
    for (int t = 0; t < 40; ++t) MakeCheckpoint(root / ("trial-" + std::to_string(t)) / "u");
    Status whole, parts;
    std::thread experiment([&] { whole = (*store)->RemoveAll(root.string()); });
    for (int t = 0; t < 40 && parts.ok(); ++t) parts = (*store)->Remove((root / ("trial-" + std::to_string(t))).string());
    experiment.join();
    EXPECT_TRUE(whole.ok()) << "round " << round << ": " << whole.message();
    EXPECT_TRUE(parts.ok()) << "round " << round << ": " << parts.message();
    EXPECT_FALSE(fs::exists(root));
  }
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace sf::storage
