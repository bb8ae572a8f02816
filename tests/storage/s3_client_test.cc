// The S3 client (common/storage/s3_client.h) against a real S3 server: Ceph's RADOS Gateway,
// brought up by tests/storage/s3_test.sh (deploy/local-s3.sh), which runs this binary with
// SF_S3_ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and SF_S3_BUCKET set. The checks
// of a config's form need no server.
#include "common/storage/s3_client.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <set>

#include "common/env.h"
#include "common/sha256.h"
#include "tests/support/testing.h"

namespace sf::storage {
namespace {

// The server's config, from s3_test.sh's environment.
S3Config ServerConfig() {
  S3Config c;
  c.endpoint_url = Env("SF_S3_ENDPOINT");
  c.bucket = Env("SF_S3_BUCKET");
  return c;
}

class S3ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (Env("SF_S3_ENDPOINT").empty())
      GTEST_SKIP() << "no S3 server: run through tests/storage/s3_test.sh";
    auto client = S3Client::Create(ServerConfig());
    ASSERT_TRUE(client.ok()) << client.status().message();
    client_ = std::make_unique<S3Client>(*client);
    // Each test in a prefix of its own.
    prefix_ = std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "/";
  }
  std::unique_ptr<S3Client> client_;
  std::string prefix_;
};

TEST_F(S3ServerTest, ObjectsGoInComeBackAreListedByPrefixAndDeleted) {
  ASSERT_TRUE(client_->CheckBucket().ok());
  // Keys with characters that must be encoded (space, '+', '=', non-ASCII) and a binary body.
  const std::vector<std::string> keys = {prefix_ + "a/plain.txt",
                                         prefix_ + "a/with space+plus=eq.bin",
                                         prefix_ +
                                             "b/\xc3\xbc"
                                             "ber.txt"};
  std::string binary;
  for (int i = 0; i < 70000; ++i) binary += static_cast<char>(i * 7919 % 256);
  for (const std::string& k : keys)
    ASSERT_TRUE(client_->Put(k, k == keys[1] ? binary : k).ok()) << k;
  auto got = client_->Get(keys[1]);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, binary);
  auto listed = client_->List(prefix_ + "a/");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, keys[0]);
  EXPECT_EQ((*listed)[1].key, keys[1]);
  EXPECT_EQ((*listed)[1].size, 70000);
  ASSERT_TRUE(client_->Delete(keys[1]).ok());
  EXPECT_TRUE(client_->Delete(keys[1]).ok());  // gone already: as S3, not an error
  auto missing = client_->Get(keys[1]);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("NoSuchKey"), std::string::npos)
      << missing.status().message();
  auto all = client_->List(prefix_);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 2u);
}

TEST_F(S3ServerTest, AListOfManyPagesHasEveryKeyOnce) {
  S3Config c = ServerConfig();
  c.list_page_keys = 2;
  auto paged = S3Client::Create(c);
  ASSERT_TRUE(paged.ok());
  std::set<std::string> put;
  for (int i = 0; i < 7; ++i) {
    put.insert(prefix_ + "k" + std::to_string(i));
    ASSERT_TRUE(client_->Put(prefix_ + "k" + std::to_string(i), "x").ok());
  }
  auto listed = paged->List(prefix_);
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  std::set<std::string> seen;
  for (const S3Object& o : *listed) EXPECT_TRUE(seen.insert(o.key).second) << o.key;
  EXPECT_EQ(seen, put);
}

TEST_F(S3ServerTest, ALargeFileGoesUpInParallelPartsAndComesDownWhole) {
  sf::testing::TempDir dir;
  const std::string src = dir.path() + "/big.bin", dst = dir.path() + "/back.bin";
  {
    std::mt19937_64 rng(7);
    std::ofstream out(src, std::ios::binary);
    std::string chunk(1 << 20, '\0');
    for (int mib = 0; mib < 12; ++mib) {
      for (char& ch : chunk) ch = static_cast<char>(rng());
      out.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    }
    out.write("tail", 4);  // 12 MiB + 4 bytes: three parts of 5, 5 and 2 MiB
  }
  S3Config c = ServerConfig();
  c.part_bytes = 5 << 20;
  c.parallel_parts = 2;
  auto client = S3Client::Create(c);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->Upload(prefix_ + "big.bin", src).ok());
  auto listed = client->List(prefix_);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].size, (12 << 20) + 4);
  EXPECT_NE((*listed)[0].etag.find("-3"), std::string::npos)
      << "a multipart ETag names its parts: " << (*listed)[0].etag;
  ASSERT_TRUE(client->Download(prefix_ + "big.bin", dst).ok());
  EXPECT_EQ(*Sha256File(dst), *Sha256File(src));
  // A small file is one PUT.
  std::ofstream(dir.path() + "/small.txt") << "small";
  ASSERT_TRUE(client->Upload(prefix_ + "small.txt", dir.path() + "/small.txt").ok());
  EXPECT_EQ(*client->Get(prefix_ + "small.txt"), "small");
  // A missing key downloads nothing, not even a partial file.
  auto missing = client->Download(prefix_ + "nothing", dir.path() + "/nothing");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound) << missing.message();
  EXPECT_FALSE(std::ifstream(dir.path() + "/nothing").good());
  EXPECT_FALSE(std::ifstream(dir.path() + "/nothing.partial").good());
}

TEST_F(S3ServerTest, AWrongKeyAndAMissingBucketAreNamed) {
  S3Config wrong = ServerConfig();
  wrong.access_key = Env("AWS_ACCESS_KEY_ID");
  wrong.secret_key = "not-the-secret";
  auto refused = S3Client::Create(wrong)->CheckBucket();
  EXPECT_EQ(refused.code(), StatusCode::kPermissionDenied) << refused.message();
  auto put = S3Client::Create(wrong)->Put(prefix_ + "x", "x");
  EXPECT_EQ(put.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(put.message().find("SignatureDoesNotMatch"), std::string::npos) << put.message();
  EXPECT_NE(put.message().find("check the access key and secret key"), std::string::npos)
      << put.message();
  wrong.access_key = "NOSUCHKEY";
  auto unknown = S3Client::Create(wrong)->Put(prefix_ + "x", "x");
  EXPECT_EQ(unknown.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(unknown.message().find("InvalidAccessKeyId"), std::string::npos) << unknown.message();

  S3Config other = ServerConfig();
  other.bucket = "no-such-bucket-here";
  auto missing = S3Client::Create(other)->CheckBucket();
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("s3://no-such-bucket-here"), std::string::npos)
      << missing.message();
  EXPECT_NE(missing.message().find("NoSuchBucket"), std::string::npos) << missing.message();
  auto listed = S3Client::Create(other)->List("");
  EXPECT_EQ(listed.status().code(), StatusCode::kNotFound) << listed.status().message();
  ASSERT_TRUE(S3Client::Create(other)->CreateBucket().ok());
  EXPECT_TRUE(S3Client::Create(other)->CheckBucket().ok());
  EXPECT_TRUE(S3Client::Create(other)->CreateBucket().ok());  // already there, and ours
}

// ---- Without a server

TEST(S3Client, AnEndpointThatDoesNotAnswerIsUnavailable) {
  // A port nobody listens on: bound, never listened to.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  S3Config c;
  c.endpoint_url = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  c.bucket = "checkpoints";
  c.access_key = "k";
  c.secret_key = "s";
  c.attempts = 2;
  auto st = S3Client::Create(c)->CheckBucket();
  close(fd);
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("did not answer"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(c.endpoint_url), std::string::npos) << st.message();
}

TEST(S3Client, AConfigOfTheWrongFormIsRefusedNamingTheField) {
  S3Config c;
  c.endpoint_url = "127.0.0.1:7480";
  c.bucket = "checkpoints";
  c.access_key = "k";
  c.secret_key = "s";
  EXPECT_NE(S3Client::Create(c).status().message().find("endpoint_url"), std::string::npos);
  c.endpoint_url = "http://127.0.0.1:7480/";
  auto ok = S3Client::Create(c);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->config().endpoint_url, "http://127.0.0.1:7480");
  EXPECT_EQ(ok->Url("a/b"), "s3://checkpoints/a/b");
  for (const char* bad : {"", "ab", "Upper", "under_score", "-dash", "dot."}) {
    c.bucket = bad;
    auto r = S3Client::Create(c);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("bucket"), std::string::npos) << r.status().message();
  }
  c.bucket = "checkpoints";
  c.secret_key = "";
  EXPECT_NE(S3Client::Create(c).status().message().find("give both or neither"), std::string::npos);
  c.access_key = "";
  // The server's keys are put back after: later tests in this process use them.
  const std::string saved_key = Env("AWS_ACCESS_KEY_ID"), saved_secret = Env("AWS_SECRET_ACCESS_KEY");
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_NE(S3Client::Create(c).status().message().find("AWS_ACCESS_KEY_ID"), std::string::npos);
  setenv("AWS_ACCESS_KEY_ID", "from-env", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  auto env = S3Client::Create(c);
  EXPECT_TRUE(env.ok());
  if (env.ok()) {
    EXPECT_EQ(env->config().access_key, "from-env");
  }
  setenv("AWS_ACCESS_KEY_ID", saved_key.c_str(), 1);
  setenv("AWS_SECRET_ACCESS_KEY", saved_secret.c_str(), 1);
}

TEST(S3Client, S3UrlsSplitIntoBucketAndPrefix) {
  auto r = ParseS3Url("s3://my-bucket/runs/exp-1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "my-bucket");
  EXPECT_EQ(r->second, "runs/exp-1");
  EXPECT_EQ(ParseS3Url("s3://my-bucket")->second, "");
  EXPECT_FALSE(ParseS3Url("http://my-bucket/x").ok());
  EXPECT_FALSE(ParseS3Url("s3://B/x").ok());
}

}  // namespace
}  // namespace sf::storage
