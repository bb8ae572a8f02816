// The cluster CA's certificates for the hop to tasks (master/auth/task_certificates.h), checked
// with OpenSSL itself: a task's certificate chains to the CA, names the task and is fit to serve
// only; the master's names the master and is fit to be a client only; a bad CA is refused with
// the file and the cause named. (The hop itself, both ways: tests/master/proxy/task_proxy_test.cc.)
#include "master/auth/task_certificates.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>

#include <memory>
#include <string>

#include "cli/cluster_certificates.h"
#include "common/http/tls_context.h"
#include "tests/support/testing.h"

namespace sf::master {
namespace {

struct Chain {
  X509* leaf = nullptr;
  X509* ca = nullptr;
  ~Chain() {
    X509_free(leaf);
    X509_free(ca);
  }
};

// The leaf (first PEM certificate) of `pem`, and the CA of `ca_pem`.
void Read(const std::string& pem, const std::string& ca_pem, Chain& out) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  out.leaf = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  out.ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
}

// Whether `leaf` verifies against `ca` for `purpose` (X509_PURPOSE_SSL_SERVER / _CLIENT).
bool Verifies(X509* leaf, X509* ca, int purpose) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx, purpose);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok;
}

TEST(TaskCertificates, ATasksCertificateServesOnlyAndTheMastersIsAClientOnly) {
  sf::testing::TempDir dir;
  auto files = cli::EnsureClusterCertificates(dir.path() + "/tls", {"127.0.0.1"});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto certificates = TaskCertificates::Load(files->ca_cert, files->ca_key);
  ASSERT_TRUE(certificates.ok()) << certificates.status().ToString();
  const TaskCertificates& ca = **certificates;

  auto task = ca.IssueTask(7);
  ASSERT_TRUE(task.ok()) << task.status().ToString();
  EXPECT_NE(task->private_key_pem.find("PRIVATE KEY"), std::string::npos);
  Chain t;
  Read(task->cert_chain_pem, ca.ca_pem(), t);
  ASSERT_TRUE(t.leaf && t.ca);
  EXPECT_TRUE(http::CertificateHasUri(t.leaf, "urn:steadfast:task:7"));
  EXPECT_FALSE(http::CertificateHasUri(t.leaf, "urn:steadfast:task:70"));
  EXPECT_FALSE(http::CertificateHasUri(t.leaf, kMasterIdentityUri));
  EXPECT_TRUE(Verifies(t.leaf, t.ca, X509_PURPOSE_SSL_SERVER));
  EXPECT_FALSE(Verifies(t.leaf, t.ca, X509_PURPOSE_SSL_CLIENT))
      << "a task could pose as the master";

  Chain m;
  Read(ca.master_client().cert_chain_pem, ca.ca_pem(), m);
  ASSERT_TRUE(m.leaf);
  EXPECT_TRUE(http::CertificateHasUri(m.leaf, kMasterIdentityUri));
  EXPECT_TRUE(Verifies(m.leaf, m.ca, X509_PURPOSE_SSL_CLIENT));
  EXPECT_FALSE(Verifies(m.leaf, m.ca, X509_PURPOSE_SSL_SERVER));

  // Every issue is a new key.
  auto again = ca.IssueTask(7);
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->private_key_pem, task->private_key_pem);

  // Another CA's certificates do not verify against this one.
  auto other_files = cli::EnsureClusterCertificates(dir.path() + "/other", {"127.0.0.1"});
  ASSERT_TRUE(other_files.ok());
  auto other = TaskCertificates::Load(other_files->ca_cert, other_files->ca_key);
  ASSERT_TRUE(other.ok());
  auto foreign = (*other)->IssueTask(7);
  ASSERT_TRUE(foreign.ok());
  Chain f;
  Read(foreign->cert_chain_pem, ca.ca_pem(), f);
  EXPECT_FALSE(Verifies(f.leaf, f.ca, X509_PURPOSE_SSL_SERVER));
}

TEST(TaskCertificates, ABadCaIsRefusedNamingTheFile) {
  sf::testing::TempDir dir;
  auto files = cli::EnsureClusterCertificates(dir.path() + "/tls", {"127.0.0.1"});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  auto missing = TaskCertificates::Load(dir.path() + "/nope.pem", files->ca_key);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(dir.path() + "/nope.pem: cannot read it"),
            std::string::npos)
      << missing.status().message();
  // The master's own certificate is not a CA's.
  auto leaf = TaskCertificates::Load(files->server_cert, files->server_key);
  ASSERT_FALSE(leaf.ok());
  EXPECT_NE(leaf.status().message().find("is not a CA's"), std::string::npos)
      << leaf.status().message();
  // The CA with another key.
  auto mismatched = TaskCertificates::Load(files->ca_cert, files->server_key);
  ASSERT_FALSE(mismatched.ok());
  EXPECT_NE(mismatched.status().message().find("the key does not match the certificate"),
            std::string::npos)
      << mismatched.status().message();
  const std::string junk = dir.WriteFile("junk.pem", "not a certificate\n");
  auto not_pem = TaskCertificates::Load(junk, files->ca_key);
  ASSERT_FALSE(not_pem.ok());
  EXPECT_NE(not_pem.status().message().find("no PEM certificate"), std::string::npos)
      << not_pem.status().message();
}

}  // namespace
}  // namespace sf::master
