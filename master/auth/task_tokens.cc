#include "master/auth/task_tokens.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "common/secret_file.h"
#include "common/sha256.h"

namespace sf::master {
namespace {

constexpr std::string_view kPrefix = "sft1_";

// Lower- or upper-case hex to bytes; false on an odd length or a bad digit.
bool FromHex(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = digit(hex[i]), lo = digit(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

}  // namespace

Result<TaskTokens> TaskTokens::Load(Database* db) {
  unsigned char fresh[kSecretBytes];
  if (RAND_bytes(fresh, sizeof fresh) != 1) return Internal("task tokens: the system's random generator failed");
  const std::string fresh_hex = ToHex(std::string_view(reinterpret_cast<const char*>(fresh), sizeof fresh));
  OPENSSL_cleanse(fresh, sizeof fresh);
  std::string stored;
  Status st = db->Transact("task token secret", [&](pqxx::work& tx) {
    // Two masters starting at once: both insert, one wins, both read the winner's.
    tx.exec_params("INSERT INTO cluster_secrets (name, secret_hex) VALUES ('task_tokens', $1) "
                   "ON CONFLICT (name) DO NOTHING",
                   fresh_hex);
    stored = tx.exec1("SELECT secret_hex FROM cluster_secrets WHERE name = 'task_tokens'")[0].as<std::string>();
    return Status::Ok();
  });
  if (!st.ok()) return st;
  Result<TaskTokens> tokens = FromHexSecret(stored);
  if (!tokens.ok()) return Internal("task tokens: the stored secret (cluster_secrets 'task_tokens') is damaged");
  return tokens;
}

Result<TaskTokens> TaskTokens::FromHexSecret(std::string_view hex) {
  std::string secret;
  if (hex.size() != kSecretBytes * 2 || !FromHex(hex, &secret)) {
    return InvalidArgument("task token secret: expected " + std::to_string(kSecretBytes * 2) + " hex digits");
  }
  return TaskTokens(std::move(secret));
}

std::string TaskTokens::Mac(const TaskClaims& claims) const {
  // Length-prefixed fields, so no two claim sets encode alike.
  std::string message = "steadfast task token v1";
  auto field = [&](const std::string& v) {
    message += std::to_string(v.size());
    message += ':';
    message += v;
  };
  field(std::to_string(claims.trial_id));
  field(std::to_string(claims.rank));
  field(std::to_string(claims.restart));
  field(claims.task_id);
  return HmacSha256(secret_, message);
}

std::string TaskTokens::Issue(const TaskClaims& claims) const { return std::string(kPrefix) + ToHex(Mac(claims)); }

std::string TaskTokens::IssueServing(int64_t serving_id) const {
  return "sfs1_" + ToHex(HmacSha256(secret_, "steadfast serving token v1:" + std::to_string(serving_id)));
}

Status TaskTokens::Verify(std::string_view token, const TaskClaims& claims) const {
  // Every TrialLink call comes through here: the reason is only spelled out for a refusal.
  auto who = [&] { return "trial " + std::to_string(claims.trial_id) + " rank " + std::to_string(claims.rank); };
  if (token.empty()) return Unauthenticated("no task token (" + std::string(kMetadataKey) + ") for " + who());
  std::string given;
  if (token.substr(0, kPrefix.size()) != kPrefix || !FromHex(token.substr(kPrefix.size()), &given)) {
    return Unauthenticated("malformed task token for " + who());
  }
  const std::string expected = Mac(claims);
  if (given.size() != expected.size() || CRYPTO_memcmp(given.data(), expected.data(), expected.size()) != 0) {
    return Unauthenticated("the task token was not issued for " + who() + " (restart " +
                           std::to_string(claims.restart) + ", task " + claims.task_id + ")");
  }
  return Status::Ok();
}

}  // namespace sf::master
