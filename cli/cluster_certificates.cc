#include "cli/cluster_certificates.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/subprocess.h"

namespace sf::cli {
namespace fs = std::filesystem;
namespace {

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Runs openssl with `args`; errors carry the command and what it printed.
Status Openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions options;
  options.timeout = std::chrono::seconds(60);
  Result<CommandResult> run = RunCommand(argv, options);
  if (!run.ok()) {
    return FailedPrecondition("cannot run openssl (is it installed? apt-get install openssl): " +
                              run.status().message());
  }
  if (run->exit_code != 0) {
    return Internal(JoinCommand(argv) + " failed (exit " + std::to_string(run->exit_code) +
                    "): " + run->output);
  }
  return Status::Ok();
}

// An empty file only its owner can read, for openssl to write a private key into.
Status CreatePrivateFile(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Internal(path + ": cannot create it: " + std::strerror(errno));
  const bool restricted = fchmod(fd, 0600) == 0;  // an existing file keeps its mode otherwise
  close(fd);
  if (!restricted) return Internal(path + ": cannot make it mode 600: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

ClusterCertificates ClusterCertificateFiles(const std::string& dir) {
  return {dir + "/ca.pem", dir + "/ca-key.pem", dir + "/server.pem", dir + "/server-key.pem"};
}

std::vector<std::string> LocalHostNames() {
  std::vector<std::string> hosts = {"127.0.0.1", "::1", "localhost"};
  char name[256] = {0};
  if (gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0' &&
      std::string(name) != "localhost") {
    hosts.emplace_back(name);
  }
  return hosts;
}

Result<ClusterCertificates> EnsureClusterCertificates(const std::string& dir,
                                                      const std::vector<std::string>& hosts) {
  const ClusterCertificates files = ClusterCertificateFiles(dir);
  std::error_code ec;
  if (fs::exists(files.ca_cert, ec) && fs::exists(files.ca_key, ec) &&
      fs::exists(files.server_cert, ec) && fs::exists(files.server_key, ec)) {
    return files;
  }
  fs::create_directories(dir, ec);
  if (ec) return Internal(dir + ": cannot create it: " + ec.message());
  chmod(dir.c_str(), 0755);  // the CA certificate is for every local user; the keys are 600

  // The CA: self-signed, allowed to sign certificates and nothing else.
  SF_RETURN_IF_ERROR(CreatePrivateFile(files.ca_key));
  SF_RETURN_IF_ERROR(Openssl({"req",
                              "-x509",
                              "-new",
                              "-newkey",
                              "ec",
                              "-pkeyopt",
                              "ec_paramgen_curve:prime256v1",
                              "-nodes",
                              "-keyout",
                              files.ca_key,
                              "-out",
                              files.ca_cert,
                              "-days",
                              "3650",
                              "-subj",
                              "/CN=Steadfast cluster CA",
                              "-addext",
                              "basicConstraints=critical,CA:TRUE",
                              "-addext",
                              "keyUsage=critical,keyCertSign,cRLSign"}));

  // The master's key and certificate request, then the certificate the CA signs for `hosts`.
  std::string names;
  for (const std::string& host : hosts) {
    names += (names.empty() ? "" : ",") + std::string(IsIpAddress(host) ? "IP:" : "DNS:") + host;
  }
  const std::string request = dir + "/server.csr";
  const std::string extensions = dir + "/server.ext";
  std::ofstream(extensions) << "basicConstraints=critical,CA:FALSE\n"
                               "keyUsage=critical,digitalSignature,keyEncipherment\n"
                               "extendedKeyUsage=serverAuth\n"
                            << "subjectAltName=" << names << "\n";
  SF_RETURN_IF_ERROR(CreatePrivateFile(files.server_key));
  SF_RETURN_IF_ERROR(
      Openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
               "-keyout", files.server_key, "-out", request, "-subj", "/CN=steadfast-master"}));
  // No serial file: openssl picks a random serial number.
  SF_RETURN_IF_ERROR(
      Openssl({"x509", "-req", "-in", request, "-CA", files.ca_cert, "-CAkey", files.ca_key, "-out",
               files.server_cert, "-days", "825", "-sha256", "-extfile", extensions}));
  fs::remove(request, ec);
  fs::remove(extensions, ec);
  return files;
}

}  // namespace sf::cli
