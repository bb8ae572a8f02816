// Where `sf` and sf-serve find the master when no flag says: the CLI defaults file,
// $XDG_CONFIG_HOME/steadfast/cli.json (default ~/.config/steadfast/cli.json), which
// `sf deploy local up` writes so that the plain `sf` commands that follow reach its HTTPS master
// without flags:
//
//   {"master": "https://127.0.0.1:8080", "ca_file": "/home/me/.steadfast/local/tls/ca.pem",
//    "deployment": "/home/me/.steadfast/local"}
//
// Precedence for cluster commands: --master, then $SF_MASTER, then the file's "master", then
// http://127.0.0.1:8080; the CA to verify an https:// master by: --ca-file, then $SF_CA_FILE,
// then the file's "ca_file" when its "master" was taken, else the system's CAs. Keys other than
// these three are ignored. Thread-safe (no state; the file is written by rename). The file is
// read and written with common/value.h's JSON.
#pragma once

#include <optional>
#include <string>

#include "common/status.h"

namespace sf::api {

struct CliDefaults {
  std::string master;      // the master's URL
  std::string ca_file;     // PEM CA certificate(s) for an https:// master; may be empty
  std::string deployment;  // the `sf deploy local` directory that wrote the file; may be empty
};

// $XDG_CONFIG_HOME/steadfast/cli.json, or $HOME/.config/steadfast/cli.json.
std::string CliDefaultsPath();
// $XDG_CONFIG_HOME/steadfast (absolute), else ~/.config/steadfast: where sf keeps its files
// (cli.json here, sessions.json: cli/session_store.h).
std::string ConfigDir();

// The defaults in `path`; nullopt when there is no such file. A file that is not a JSON object
// of strings is an InvalidArgument naming the file.
Result<std::optional<CliDefaults>> ReadCliDefaults(const std::string& path);

// Writes `defaults` to `path` (mode 600; its directory made mode 700 when missing), replacing
// the file whole.
Status WriteCliDefaults(const std::string& path, const CliDefaults& defaults);

// The master a cluster command talks to and the CA it verifies it by, from the flags (empty:
// not given), the environment and the defaults file, as the header says.
struct MasterEndpoint {
  std::string url;
  std::string ca_file;
};
Result<MasterEndpoint> ResolveMasterEndpoint(const std::string& master_flag,
                                             const std::string& ca_file_flag);

}  // namespace sf::api
