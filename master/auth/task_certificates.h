// Certificates for the hop between the master's proxy and the services tasks run (docs/security.md,
// "The hop to tasks"; master/proxy/task_proxy.h): the master holds the cluster's CA (its
// certificate and key, `task_ca_cert_file` / `task_ca_key_file`) and issues from it
//
// - to each task that serves something (a server, a notebook, a shell), when it starts, a
//   certificate naming the task: subject alternative name URI `urn:steadfast:task:<id>`,
//   extended key usage serverAuth only. The task serves HTTPS with it and requires a client
//   certificate from the same CA naming the master;
// - to itself, once at start, a client certificate: URI `urn:steadfast:master`, extended key
//   usage clientAuth only. The proxy presents it and checks that the service's certificate
//   names the task it meant to reach (not the host name: a task's address is whatever its agent
//   has, while its identity is its id).
//
// Because usages are split, a task's certificate cannot pass as the master's (OpenSSL checks a
// client certificate's purpose), and a task cannot pose as another task. Keys are EC P-256,
// made fresh for each certificate; certificates are valid from 5 minutes ago for 397 days
// (servers run long; every start of a task gets a new one). Key material is never logged.
//
// Contract:
// - Load(cert_file, key_file): the CA's PEM certificate and key; errors name the file and the
//   cause (unreadable, not PEM, not a CA, key not the certificate's).
// - IssueTask(id) / master_client(): PEM certificate (leaf, then the CA) and PEM key.
// - ca_pem(): the CA certificate, which a task trusts for its clients and the proxy for tasks.
// - Thread-safe once built (issuing uses only OpenSSL objects it does not change).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"
#include "common/tls_files.h"

namespace sf::master {

inline std::string TaskIdentityUri(int64_t task_id) {
  return "urn:steadfast:task:" + std::to_string(task_id);
}
inline constexpr char kMasterIdentityUri[] = "urn:steadfast:master";

class TaskCertificates {
 public:
  static Result<std::unique_ptr<TaskCertificates>> Load(const std::string& ca_cert_file,
                                                        const std::string& ca_key_file);
  ~TaskCertificates();
  TaskCertificates(const TaskCertificates&) = delete;
  TaskCertificates& operator=(const TaskCertificates&) = delete;

  Result<ServerCertificate> IssueTask(int64_t task_id) const;
  const ServerCertificate& master_client() const { return master_client_; }
  const std::string& ca_pem() const { return ca_pem_; }

 private:
  struct Ca;
  explicit TaskCertificates(std::unique_ptr<Ca> ca);
  Result<ServerCertificate> Issue(const std::string& common_name, const std::string& uri,
                                  bool server) const;

  std::unique_ptr<Ca> ca_;
  std::string ca_pem_;
  ServerCertificate master_client_;
};

}  // namespace sf::master
