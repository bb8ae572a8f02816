// A small blocking HTTP/1.1 client for the master's REST API (Boost.Beast), over plain HTTP or
// HTTPS.
//
// One request per call on a fresh connection; responses are returned whole, or streamed line by
// line for server-sent events. An https:// master's certificate is verified, chain and host
// name, against the CA certificates in `ca_file` (or the system's trusted CAs when none is
// given), for requests and streams alike. Errors name the URL and the cause ("cannot reach the
// master at http://127.0.0.1:8080: Connection refused", "cannot reach the master at
// https://127.0.0.1:8080: certificate verify failed: self-signed certificate in certificate
// chain ..."). Not thread-safe; use one per thread.
#pragma once

#include <functional>
#include <string>

#include "common/status.h"

namespace sf::cli {

struct HttpResponse {
  int status = 0;
  std::string body;
};

class HttpClient {
 public:
  // `base_url` like "http://127.0.0.1:8080" or "https://master.example:8080". `ca_file`: PEM
  // CA certificate(s) to verify an https:// master by (empty: the system's); it is read at the
  // first request. Bad input (another scheme, no host) is InvalidArgument.
  static Result<HttpClient> Create(const std::string& base_url, const std::string& ca_file = "");

  Result<HttpResponse> Get(const std::string& path);
  Result<HttpResponse> Post(const std::string& path, const std::string& json_body);
  Result<HttpResponse> Put(const std::string& path, const std::string& json_body);
  Result<HttpResponse> Delete(const std::string& path);
  // Reads a text/event-stream; calls on_data with each event's data until the stream ends or
  // on_data returns false.
  Status Stream(const std::string& path, const std::function<bool(const std::string& event,
                                                                  const std::string& data)>& on_data);
  const std::string& base_url() const { return base_url_; }
  // The bearer token every request carries (Authorization: Bearer); Create sets it from
  // $SF_TOKEN or the saved `sf login` session (cli/session_store.h). Empty: none.
  void set_token(std::string token) { token_ = std::move(token); }

 private:
  Result<HttpResponse> Request(const std::string& method, const std::string& path, const std::string& body);
  std::string base_url_, host_, port_, token_;
  bool https_ = false;
  std::string ca_file_;
};

}  // namespace sf::cli
