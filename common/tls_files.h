// TLS credentials kept in PEM files (docs/security.md, "TLS"): the master's certificate chain
// and private key, and the CA certificate(s) its clients verify it by. Each is read and parsed
// with OpenSSL once, at start, so a wrong file is refused there with a message naming it rather
// than at the first handshake. Key material is never put into an error message or a log.
//
// Thread-safe (no state).
#pragma once

#include <string>

#include "common/status.h"

namespace sf {

// A server's certificate chain (leaf first) and its private key, as PEM text.
struct ServerCertificate {
  std::string cert_chain_pem;
  std::string private_key_pem;
};

// Reads `cert_file` (one or more PEM certificates, the server's own first) and `key_file` (its
// PEM private key) and checks that the key belongs to the certificate. Errors name the file and
// the cause: missing or unreadable ("TLS certificate file /x/server.pem: cannot read it: No such
// file or directory"), no PEM certificate or key in it, or a key that does not match the
// certificate.
Result<ServerCertificate> LoadServerCertificate(const std::string& cert_file,
                                                const std::string& key_file);

// Whether the first certificate in `cert_chain_pem` is for `host` (an IP address or a DNS name,
// as a client dialling that host checks it: subject alternative names, wildcards included).
bool CertificateNamesHost(const std::string& cert_chain_pem, const std::string& host);

// Reads `ca_file`: one or more PEM certificates of the CAs to trust. Errors name the file, and
// `what` names its use in them ("master CA file").
Result<std::string> LoadCaCertificates(const std::string& ca_file,
                                       const std::string& what = "CA file");

}  // namespace sf
