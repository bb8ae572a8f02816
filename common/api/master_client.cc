#include "common/api/master_client.h"

#include <pwd.h>
#include <unistd.h>

#include <boost/beast/http.hpp>

#include <cstdlib>

#include "common/api/session_store.h"

namespace sf::api {
namespace bhttp = boost::beast::http;

namespace {

// Who calls: $USER, else the account name (cron and CI often have no USER).
const char* UserName() {
  const char* user = std::getenv("USER");
  if (!user || !*user) {
    struct passwd* pw = getpwuid(geteuid());
    user = pw ? pw->pw_name : nullptr;
  }
  return user;
}

}  // namespace

Result<MasterClient> MasterClient::Create(const std::string& base_url, const std::string& ca_file) {
  SF_ASSIGN_OR_RETURN(http::Url url, http::Url::Parse(base_url, "master URL"));
  http::ClientOptions options;
  options.ca_file = ca_file;
  options.whose_certificate = "the master's certificate";
  MasterClient c(http::Client(std::move(url), std::move(options)));
  c.token_ = TokenFor(c.base_url());
  return c;
}

Status MasterClient::Unreachable(const Status& why) const {
  const http::ClientOptions& o = client_.options();
  std::string hint;
  switch (client_.failure()) {
    case http::Failure::kHostName: hint = " (its subject alternative names must include the host of the URL)"; break;
    case http::Failure::kCertificate:
      hint = o.ca_file.empty() ? " (no CA file given, so the system's CAs were used: give the cluster's CA with "
                                 "--ca-file or $SF_CA_FILE)"
                               : " (is " + o.ca_file + " the CA that signed the master's certificate?)";
      break;
    case http::Failure::kTlsHandshake: hint = " (is it an https:// master?)"; break;
    case http::Failure::kClosedUnanswered:
      if (!client_.url().https) hint = " (if the master serves HTTPS, use an https:// URL)";
      break;
    default: break;
  }
  return Unavailable("cannot reach the master at " + base_url() + ": " + why.message() + hint);
}

Result<HttpResponse> MasterClient::Request(const std::string& method, const std::string& path,
                                           const std::string& body) {
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), path, 11};
  req.set(bhttp::field::user_agent, "sf-cli");
  if (const char* user = UserName()) req.set("X-SF-User", user);
  if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
  if (!body.empty()) {
    req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
  }
  Result<http::ClientResponse> answer = client_.Fetch(std::move(req));
  if (!answer.ok()) return Unreachable(answer.status());
  return HttpResponse{answer->status, std::move(answer->body)};
}

Result<HttpResponse> MasterClient::Get(const std::string& path) { return Request("GET", path, ""); }
Result<HttpResponse> MasterClient::Delete(const std::string& path) { return Request("DELETE", path, ""); }
Result<HttpResponse> MasterClient::Put(const std::string& path, const std::string& body) {
  return Request("PUT", path, body.empty() ? "{}" : body);
}
Result<HttpResponse> MasterClient::Post(const std::string& path, const std::string& body) {
  return Request("POST", path, body.empty() ? "{}" : body);
}

Status MasterClient::Stream(const std::string& path,
                            const std::function<bool(const std::string&, const std::string&)>& on_data) {
  bhttp::request<bhttp::string_body> req{bhttp::verb::get, path, 11};
  req.set(bhttp::field::accept, "text/event-stream");
  if (!token_.empty()) req.set(bhttp::field::authorization, "Bearer " + token_);
  // Events are cut at blank lines; a line split across reads waits in `pending` for its end.
  std::string pending, event, data;
  Result<http::ClientResponse> answer = client_.Stream(std::move(req), [&](const std::string& bytes) {
    pending += bytes;
    size_t start = 0;
    for (size_t end; (end = pending.find('\n', start)) != std::string::npos; start = end + 1) {
      std::string line = pending.substr(start, end - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) {
        if (!data.empty() || !event.empty()) {
          if (!on_data(event, data)) return false;
        }
        event.clear();
        data.clear();
      } else if (line.rfind("data: ", 0) == 0) {
        data += line.substr(6);
      } else if (line.rfind("event: ", 0) == 0) {
        event = line.substr(7);
      }
    }
    pending.erase(0, start);
    return true;
  });
  if (!answer.ok()) return Unreachable(answer.status());
  if (answer->status != 200) return Unavailable("HTTP " + std::to_string(answer->status) + ": " + answer->body);
  return Status::Ok();
}

}  // namespace sf::api
