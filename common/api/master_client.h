// A blocking client for the master's REST API, over plain HTTP or HTTPS (common/http/client.h
// underneath): `sf` and sf-serve call the master with it.
//
// One request per call on a fresh connection; responses are returned whole, or streamed event
// by event for server-sent events. An https:// master's certificate is verified, chain and host
// name, against the CA certificates in `ca_file` (or the system's trusted CAs when none is
// given), for requests and streams alike. Every request carries the caller's bearer token (see
// set_token) and X-SF-User ($USER, else the account name). Errors name the URL and the cause
// ("cannot reach the master at http://127.0.0.1:8080: connect: Connection refused", "cannot
// reach the master at https://127.0.0.1:8080: certificate verify failed: self-signed
// certificate in certificate chain (...)"). Not thread-safe; use one per thread.
#pragma once

#include <functional>
#include <string>

#include "common/http/client.h"
#include "common/status.h"

namespace sf::api {

struct HttpResponse {
  int status = 0;
  std::string body;
};

class MasterClient {
 public:
  // `base_url` like "http://127.0.0.1:8080" or "https://master.example:8080". `ca_file`: PEM
  // CA certificate(s) to verify an https:// master by (empty: the system's); it is read at
  // each request. Bad input (another scheme, no host) is InvalidArgument.
  static Result<MasterClient> Create(const std::string& base_url, const std::string& ca_file = "");

  Result<HttpResponse> Get(const std::string& path);
  Result<HttpResponse> Post(const std::string& path, const std::string& json_body);
  Result<HttpResponse> Put(const std::string& path, const std::string& json_body);
  Result<HttpResponse> Delete(const std::string& path);
  // Reads a text/event-stream; calls on_data with each event's data until the stream ends or
  // on_data returns false. Another status than 200 is Unavailable("HTTP <status>: <body>").
  Status Stream(const std::string& path, const std::function<bool(const std::string& event,
                                                                  const std::string& data)>& on_data);
  const std::string& base_url() const { return client_.url().base; }
  // The bearer token every request carries (Authorization: Bearer); Create sets it from
  // $SF_TOKEN or the saved `sf login` session (common/api/session_store.h). Empty: none.
  void set_token(std::string token) { token_ = std::move(token); }
  const std::string& token() const { return token_; }
  // The master's address, and the CA an https:// master is verified by ("": the system's).
  const http::Url& url() const { return client_.url(); }
  const std::string& ca_file() const { return client_.options().ca_file; }

 private:
  explicit MasterClient(http::Client client) : client_(std::move(client)) {}
  Result<HttpResponse> Request(const std::string& method, const std::string& path, const std::string& body);
  // "cannot reach the master at URL: <why>", with what to check for TLS failures.
  Status Unreachable(const Status& why) const;

  http::Client client_;
  std::string token_;
};

}  // namespace sf::api
