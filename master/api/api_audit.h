// The audit log's record of an Api call, the same for REST and gRPC (master/auth/audit_log.h,
// docs/security.md). Which methods are audited, what names their target and who acts when no
// one is signed in are declared in the proto next to their access rule (AccessRule.audit,
// audit_target, audit_actor; common/api/route_table.h); the transports only say how they were
// called and how the call ended.
//
// Thread-safe (the AuditLog is); a record that cannot be written is logged, never fails the call.
#pragma once

#include <string>

#include <google/protobuf/message.h>

#include "common/api/route_table.h"
#include "master/auth/access_policy.h"
#include "master/auth/audit_log.h"

namespace sf::master {

// How a call came in: REST ("POST", its URL path) or gRPC ("GRPC", empty path: the record's path
// is /steadfast.v1.Api/<method>[/<target>]); its peer; how it ended (the HTTP status, or the
// gRPC code).
struct ApiCallOrigin {
  std::string method;
  std::string path;
  std::string peer;
  int status = 0;
};

// Records the call of `route` on `audit` when the route is audited. `request` and `reply` are the
// decoded messages (null when the call was refused before they existed: its target and a
// not-signed-in actor's name are then unknown); `who` is the caller as authenticated.
void RecordApiCall(AuditLog* audit, const api::ApiRoute& route, const google::protobuf::Message* request,
                   const google::protobuf::Message* reply, const Principal& who, const ApiCallOrigin& origin);

// The target a record names: the route's audit_target fields' values, joined by "/" (empty when
// a message is missing or a field unset).
std::string AuditTarget(const api::ApiRoute& route, const google::protobuf::Message* request,
                        const google::protobuf::Message* reply);

}  // namespace sf::master
