// A private certificate authority for one cluster, made with the `openssl` command-line tool:
// what `sf deploy local up` (and the end-to-end test fixture) give the master (--tls-cert-file,
// --tls-key-file) and its clients (sf --ca-file, sf-agent --master-ca-file). See
// docs/security.md, "TLS".
//
// Thread-safe as long as no two calls use the same directory.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace sf::cli {

// The files of a cluster's CA, all PEM, in one directory.
struct ClusterCertificates {
  std::string ca_cert;      // ca.pem: the CA's certificate, what clients verify the master by
  std::string ca_key;       // ca-key.pem (mode 600): the CA's key, used only here
  std::string server_cert;  // server.pem: the master's certificate, signed by the CA
  std::string server_key;   // server-key.pem (mode 600): the master's key
};

// The files EnsureClusterCertificates uses in `dir`.
ClusterCertificates ClusterCertificateFiles(const std::string& dir);

// Makes `dir` (mode 755) hold a CA (EC P-256, 10 years) and a server certificate it signs (EC
// P-256, 825 days) for each of `hosts` (IP addresses become IP subject alternative names, other
// names DNS ones). Keys are created mode 600 before a byte is written to them. When all four
// files already exist they are kept as they are (a deployment started again keeps its CA, so
// clients that trust it keep working). Errors name the file or the openssl command and its
// output ("openssl is not installed" when it is missing).
Result<ClusterCertificates> EnsureClusterCertificates(const std::string& dir,
                                                      const std::vector<std::string>& hosts);

// The host names a local master's certificate should carry: 127.0.0.1, ::1, localhost and this
// machine's host name.
std::vector<std::string> LocalHostNames();

}  // namespace sf::cli
