// The cluster CA's certificates for tasks and for the master's proxy
// (master/auth/task_certificates.h).
#include "master/auth/task_certificates.h"

#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "common/openssl_handles.h"

namespace sf::master {
namespace {

using openssl::Bio;
using openssl::Certificate;
using openssl::MemoryBio;
using openssl::PrivateKey;

Result<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  if (!in || !(text << in.rdbuf())) return InvalidArgument(what + " " + path + ": cannot read it");
  return text.str();
}

std::string Pem(const std::function<int(BIO*)>& write) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return "";
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

bool AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  const bool added = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return added;
}

}  // namespace

struct TaskCertificates::Ca {
  Certificate cert;
  PrivateKey key;
};

TaskCertificates::TaskCertificates(std::unique_ptr<Ca> ca) : ca_(std::move(ca)) {}
TaskCertificates::~TaskCertificates() = default;

Result<std::unique_ptr<TaskCertificates>> TaskCertificates::Load(const std::string& ca_cert_file,
                                                                 const std::string& ca_key_file) {
  SF_ASSIGN_OR_RETURN(std::string cert_pem, ReadFile(ca_cert_file, "task CA certificate file"));
  SF_ASSIGN_OR_RETURN(std::string key_pem, ReadFile(ca_key_file, "task CA key file"));
  auto ca = std::make_unique<Ca>();
  Bio cert_bio = MemoryBio(cert_pem);
  ca->cert.reset(PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr));
  if (!ca->cert)
    return InvalidArgument("task CA certificate file " + ca_cert_file +
                           ": no PEM certificate in it");
  if (X509_check_ca(ca->cert.get()) < 1) {
    return InvalidArgument("task CA certificate file " + ca_cert_file +
                           ": the certificate is not a CA's");
  }
  Bio key_bio = MemoryBio(key_pem);
  ca->key.reset(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  if (!ca->key)
    return InvalidArgument("task CA key file " + ca_key_file + ": no PEM private key in it");
  if (X509_check_private_key(ca->cert.get(), ca->key.get()) != 1) {
    return InvalidArgument("task CA key file " + ca_key_file +
                           ": the key does not match the certificate in " + ca_cert_file);
  }
  std::unique_ptr<TaskCertificates> out(new TaskCertificates(std::move(ca)));
  out->ca_pem_ = Pem([&](BIO* b) { return PEM_write_bio_X509(b, out->ca_->cert.get()); });
  SF_ASSIGN_OR_RETURN(out->master_client_,
                      out->Issue("steadfast master", kMasterIdentityUri, /*server=*/false));
  return out;
}

Result<ServerCertificate> TaskCertificates::IssueTask(int64_t task_id) const {
  return Issue("steadfast task " + std::to_string(task_id), TaskIdentityUri(task_id),
               /*server=*/true);
}

Result<ServerCertificate> TaskCertificates::Issue(const std::string& common_name,
                                                  const std::string& uri, bool server) const {
  const Status failed = Internal("cannot issue a certificate for " + uri);
  PrivateKey key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  Certificate cert(X509_new());
  if (!key || !cert) return failed;
  // A random 127-bit serial: unique without a counter kept anywhere.
  std::unique_ptr<BIGNUM, decltype(&BN_free)> serial(BN_new(), BN_free);
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()))) {
    return failed;
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_set_version(cert.get(), 2) != 1 ||
      !X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert.get()), 397L * 24 * 3600) ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_->cert.get())) != 1 ||
      X509_set_pubkey(cert.get(), key.get()) != 1) {
    return failed;
  }
  X509* ca = ca_->cert.get();
  if (!AddExtension(cert.get(), ca, NID_basic_constraints, "critical,CA:FALSE") ||
      !AddExtension(cert.get(), ca, NID_key_usage, "critical,digitalSignature") ||
      !AddExtension(cert.get(), ca, NID_ext_key_usage, server ? "serverAuth" : "clientAuth") ||
      !AddExtension(cert.get(), ca, NID_subject_alt_name, "URI:" + uri) ||
      !AddExtension(cert.get(), ca, NID_subject_key_identifier, "hash") ||
      !AddExtension(cert.get(), ca, NID_authority_key_identifier, "keyid:always")) {
    return failed;
  }
  if (X509_sign(cert.get(), ca_->key.get(), EVP_sha256()) <= 0) return failed;
  ServerCertificate out;
  out.cert_chain_pem = Pem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); }) + ca_pem_;
  out.private_key_pem = Pem([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  if (out.cert_chain_pem.empty() || out.private_key_pem.empty()) return failed;
  return out;
}

}  // namespace sf::master
