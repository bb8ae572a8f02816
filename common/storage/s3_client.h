// An S3 client for checkpoint storage (docs/object-storage.md): objects in one bucket of an
// S3-compatible server (AWS S3, Ceph's RADOS Gateway, MinIO), over HTTP(S) with libcurl and
// AWS Signature Version 4 (libcurl's CURLOPT_AWS_SIGV4: the signing is libcurl's, not ours).
//
// Contract:
// - Addressing is path-style (`<endpoint>/<bucket>/<key>`), which every S3-compatible server
//   serves; keys are sent percent-encoded except for '/'.
// - Credentials: the config's keys, else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY from the
//   environment (S3Client::Create says which is missing). The region defaults to
//   AWS_DEFAULT_REGION, else us-east-1.
// - Every request carries the payload's SHA-256 (x-amz-content-sha256, signed), so a body
//   altered on the way is refused by the server; Download verifies nothing by itself (the
//   checkpoint manifest's per-file digests do, in the caller).
// - Upload sends a file of up to part_bytes in one PUT, a larger one as a multipart upload whose
//   parts go `parallel_parts` at a time, each read from the file as it is sent; a part that
//   fails is retried (`attempts`), and an upload that fails is aborted at the server, so no
//   half-written object ever appears under the key.
// - Errors name the operation, the bucket and key, and what the server said (its error code and
//   message, e.g. "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch") or that the
//   endpoint did not answer. kNotFound for a missing key or bucket, kPermissionDenied for a
//   refused key, kUnavailable when the endpoint cannot be reached or answers 5xx.
// - Thread-safe: every call uses its own libcurl handle.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sf::storage {

struct S3Config {
  std::string endpoint_url;  // e.g. "http://127.0.0.1:7480", "https://s3.eu-west-1.amazonaws.com"
  std::string bucket;
  std::string region;                  // "" -> AWS_DEFAULT_REGION, else "us-east-1"
  std::string access_key, secret_key;  // "" -> the environment's
  std::chrono::seconds connect_timeout{10};
  std::chrono::seconds request_timeout{300};  // per request (one part of a multipart upload)
  int64_t part_bytes = 16 << 20;              // multipart above this; S3's minimum part is 5 MiB
  int parallel_parts = 4;
  int attempts = 3;           // per request, for transport errors and 5xx
  int list_page_keys = 1000;  // keys per ListObjectsV2 page (S3's most)
};

struct S3Object {
  std::string key;
  int64_t size = 0;
  std::string etag;
};

class S3Client {
 public:
  // Checks the config's form (an http(s) endpoint, a bucket name S3 accepts, credentials) and
  // fills what comes from the environment; contacts nothing.
  static Result<S3Client> Create(S3Config config);

  const S3Config& config() const { return config_; }

  // HEAD on the bucket: whether the endpoint answers, the credentials are accepted and the
  // bucket exists, as one clear error.
  Status CheckBucket() const;
  Status CreateBucket() const;  // for tests and `sf deploy local up --s3`; an existing one is fine

  Status Put(const std::string& key, std::string_view data) const;
  Status Upload(const std::string& key, const std::string& path) const;
  Result<std::string> Get(const std::string& key) const;
  Status Download(const std::string& key, const std::string& path) const;
  // Every object whose key starts with `prefix`, in key order (ListObjectsV2, all pages).
  Result<std::vector<S3Object>> List(const std::string& prefix) const;
  // Deleting a key that does not exist succeeds (as S3 does).
  Status Delete(const std::string& key) const;

  // "s3://bucket/key", for messages and stored paths.
  std::string Url(const std::string& key) const;

 private:
  explicit S3Client(S3Config config) : config_(std::move(config)) {}
  S3Config config_;
};

// Splits "s3://bucket/some/prefix" into bucket and key prefix; kInvalidArgument otherwise.
Result<std::pair<std::string, std::string>> ParseS3Url(const std::string& url);

}  // namespace sf::storage
