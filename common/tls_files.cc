#include "common/tls_files.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "common/openssl_handles.h"

namespace sf {
namespace {

using openssl::Bio;
using openssl::Certificate;
using openssl::MemoryBio;
using openssl::PrivateKey;

// The bytes of `path`; `label` names the file in errors ("TLS key file").
Result<std::string> ReadFile(const std::string& path, const std::string& label) {
  if (path.empty()) return InvalidArgument(label + ": no file given");
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(label + " " + path + ": cannot read it: " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return NotFound(label + " " + path + ": cannot read it");
  return text.str();
}

// The certificates in `pem`, in order (none when it holds no PEM certificate).
std::vector<Certificate> ParseCertificates(const std::string& pem) {
  std::vector<Certificate> out;
  Bio bio = MemoryBio(pem);
  while (bio) {
    Certificate cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) break;
    out.push_back(std::move(cert));
  }
  ERR_clear_error();  // the read that ends the loop leaves "no start line" behind
  return out;
}

// "... expired on Nov 24 21:00:00 2026 GMT" when `cert` is not valid now; empty when it is.
std::string ValidityProblem(X509* cert) {
  auto when = [](const ASN1_TIME* t) {
    Bio bio(BIO_new(BIO_s_mem()));
    ASN1_TIME_print(bio.get(), t);
    char* data = nullptr;
    long n = BIO_get_mem_data(bio.get(), &data);
    return std::string(data, static_cast<size_t>(n));
  };
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
    return "expired on " + when(X509_get0_notAfter(cert));
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return "is not valid before " + when(X509_get0_notBefore(cert));
  }
  return "";
}

}  // namespace

Result<ServerCertificate> LoadServerCertificate(const std::string& cert_file,
                                                const std::string& key_file) {
  SF_ASSIGN_OR_RETURN(std::string cert_pem, ReadFile(cert_file, "TLS certificate file"));
  SF_ASSIGN_OR_RETURN(std::string key_pem, ReadFile(key_file, "TLS key file"));
  std::vector<Certificate> chain = ParseCertificates(cert_pem);
  if (chain.empty()) {
    return InvalidArgument("TLS certificate file " + cert_file + ": no PEM certificate in it");
  }
  if (std::string problem = ValidityProblem(chain.front().get()); !problem.empty()) {
    return InvalidArgument("TLS certificate file " + cert_file + ": the certificate " + problem);
  }
  Bio key_bio = MemoryBio(key_pem);
  PrivateKey key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key) {
    return InvalidArgument(
        "TLS key file " + key_file +
        ": no PEM private key in it (an unencrypted key is needed; the master cannot ask for a "
        "passphrase)");
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("TLS key file " + key_file +
                           ": the key does not match the certificate in " + cert_file);
  }
  return ServerCertificate{std::move(cert_pem), std::move(key_pem)};
}

bool CertificateNamesHost(const std::string& cert_chain_pem, const std::string& host) {
  std::vector<Certificate> chain = ParseCertificates(cert_chain_pem);
  if (chain.empty() || host.empty()) return false;
  // An address is matched against the IP names, anything else against the DNS names.
  if (X509_check_ip_asc(chain.front().get(), host.c_str(), 0) == 1) return true;
  return X509_check_host(chain.front().get(), host.data(), host.size(), 0, nullptr) == 1;
}

Result<std::string> LoadCaCertificates(const std::string& ca_file, const std::string& what) {
  SF_ASSIGN_OR_RETURN(std::string pem, ReadFile(ca_file, what));
  if (ParseCertificates(pem).empty())
    return InvalidArgument(what + " " + ca_file + ": no PEM certificate in it");
  return pem;
}

}  // namespace sf
