// API fuzzing against a real master and PostgreSQL: requests generated from the master's own
// OpenAPI document (paths, methods, path and query parameters, request-body schemas), each one
// mutated to be wrong (bad types, missing and extra fields, boundary and huge numbers, bad ids,
// invalid UTF-8, NULs, oversized and deeply nested bodies, bad content types, unknown methods,
// long URLs and headers) plus path traversal on the dashboard's static routes. Checks, for every
// response: no 5xx (the master runs far below its connection cap, so not even its 503), a JSON
// error with a message for a 4xx on /api, no file from outside the web UI directory; and at the
// end: the master is alive, /health answers, and no rows were stored except by the few
// requests that were answered 2xx (nor removed, except by a 2xx DELETE of an experiment the
// fuzz had killed).
//
// Seeded: the seed is printed; SF_FUZZ_SEED=<n> replays a run, SF_FUZZ_REQUESTS=<n> changes how
// many generated requests are sent (default 20000), SF_FUZZ_VERBOSE=<n> prints every request (its
// first n bytes) and its response. Request i depends only on the seed and i.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <thread>

#include "tests/e2e/cluster_fixture.h"

namespace sf::testing {
namespace {
namespace fs = std::filesystem;
using namespace std::string_literals;

// A secret that sits next to (not inside) the web UI directory, and the start of /etc/passwd.
constexpr char kSecret[] = "root:x:0:0:SECRET-OUTSIDE-WEBUI";

struct RawResponse {
  int status = 0;  // 0: no response (connection closed or timed out before a status line)
  std::string content_type;
  std::string body;
};

// Whether `s` is well-formed UTF-8, as JSON text must be (RFC 8259, section 8.1).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      return false;
    }
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) {
        return false;
      }
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += n;
  }
  return true;
}

// Whether `in` holds a whole response: its head and Content-Length bytes of body.
bool ResponseComplete(const std::string& in) {
  size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    return false;
  }
  std::string head = in.substr(0, head_end);
  for (char& c : head) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  size_t cl = head.find("\r\ncontent-length:");
  if (cl == std::string::npos) {
    return false;  // read to the end of the stream
  }
  return in.size() - head_end - 4 >= std::strtoull(head.c_str() + cl + 17, nullptr, 10);
}

// Sends `raw` bytes as one request on a fresh loopback connection and reads the response until
// the server closes the connection (requests say "Connection: close") or `timeout` passes.
RawResponse Exchange(int port, const std::string& raw, std::chrono::milliseconds timeout) {
  RawResponse out;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) {
    return out;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return out;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    return static_cast<int>(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
               .count()));
  };
  // Write and read interleaved: the server may answer (413, 400) before taking the whole body.
  std::string in;
  size_t sent = 0;
  bool write_open = true;
  while (left_ms() > 0) {
    pollfd p{fd,
             static_cast<decltype(pollfd::events)>(POLLIN |
                                                   (write_open && sent < raw.size() ? POLLOUT : 0)),
             0};
    if (::poll(&p, 1, left_ms()) <= 0) {
      break;
    }
    if (p.revents & POLLIN || p.revents & (POLLHUP | POLLERR)) {
      char buf[65536];
      ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        break;
      }
      in.append(buf, static_cast<size_t>(n));
      if (ResponseComplete(in)) {
        break;  // a kept-alive connection stays open after it
      }
      continue;
    }
    if (p.revents & POLLOUT) {
      ssize_t n =
          ::send(fd, raw.data() + sent, std::min<size_t>(raw.size() - sent, 1 << 20), MSG_NOSIGNAL);
      if (n <= 0) {
        write_open = false;
      } else {
        sent += static_cast<size_t>(n);
      }
    }
  }
  ::close(fd);
  if (in.rfind("HTTP/1.", 0) != 0 || in.size() < 12) {
    return out;
  }
  out.status = std::atoi(in.substr(9, 3).c_str());
  size_t head_end = in.find("\r\n\r\n");
  std::string head = in.substr(0, head_end);
  if (head_end != std::string::npos) {
    out.body = in.substr(head_end + 4);
  }
  std::string lower = head;
  for (char& c : lower) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  size_t ct = lower.find("\r\ncontent-type:");
  if (ct != std::string::npos) {
    size_t start = ct + 15, end = head.find("\r\n", start);
    out.content_type = head.substr(start, end - start);
    while (!out.content_type.empty() && out.content_type[0] == ' ') {
      out.content_type.erase(0, 1);
    }
  }
  return out;
}

// One operation of the OpenAPI document.
struct Operation {
  std::string path;    // "/api/v1/experiments/{id}"
  std::string method;  // "GET"
  std::vector<std::string> path_params;
  std::vector<std::pair<std::string, std::string>> query_params;  // name, schema type
  std::vector<std::pair<std::string, std::string>>
      body_fields;  // name, schema type ("" if no body)
  bool has_body = false;
};

std::vector<Operation> ReadOperations(const Value& doc) {
  std::vector<Operation> ops;
  const Value* schemas = doc.Find("components") ? doc.Find("components")->Find("schemas") : nullptr;
  for (const auto& [path, item] : doc.Find("paths")->as_map()) {
    for (const auto& [method, op] : item.as_map()) {
      Operation o;
      o.path = path;
      for (char c : method) {
        o.method += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      }
      if (const Value* params = op.Find("parameters")) {
        for (const Value& p : params->as_list()) {
          const std::string name = p.Find("name")->as_string();
          const std::string type = p.Find("schema")->Find("type")->as_string();
          if (p.Find("in")->as_string() == "path") {
            o.path_params.push_back(name);
          }
          if (p.Find("in")->as_string() == "query") {
            o.query_params.emplace_back(name, type);
          }
        }
      }
      if (const Value* body = op.Find("requestBody")) {
        o.has_body = true;
        const Value* schema = body->Find("content")->Find("application/json")->Find("schema");
        std::string ref = schema->Find("$ref") ? schema->Find("$ref")->as_string() : "";
        const Value* resolved = schemas ? schemas->Find(ref.substr(ref.rfind('/') + 1)) : nullptr;
        if (resolved && resolved->Find("properties")) {
          for (const auto& [field, s] : resolved->Find("properties")->as_map()) {
            o.body_fields.emplace_back(field,
                                       s.Find("type") ? s.Find("type")->as_string() : "object");
          }
        }
      }
      ops.push_back(std::move(o));
    }
  }
  return ops;
}

// A request to send: the raw bytes and what the checks need to know about it.
struct FuzzRequest {
  std::string kind;    // the mutation, for failure messages
  std::string method;  // as sent
  std::string target;  // as sent
  std::string raw;
  bool creates = false;  // a POST /api/v1/experiments: a 2xx may store one experiment
};

std::string Escape(const std::string& s, size_t max = 160) {
  std::string out;
  for (unsigned char c : s.substr(0, max)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > max) {
    out += "...(" + std::to_string(s.size()) + " bytes)";
  }
  return out;
}

// The admin's token (the fixture logs in): every built request carries it, so the fuzzing
// reaches the handlers behind authentication, unless it brings an Authorization of its own.
std::string g_bearer;

std::string Build(const std::string& method, const std::string& target, const std::string& body,
                  const std::string& content_type = "application/json",
                  const std::vector<std::string>& extra_headers = {}) {
  std::string raw = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  bool own_authorization = false;
  for (const std::string& h : extra_headers) own_authorization |= h.rfind("Authorization:", 0) == 0;
  if (!g_bearer.empty() && !own_authorization) raw += "Authorization: Bearer " + g_bearer + "\r\n";
  if (!content_type.empty()) {
    raw += "Content-Type: " + content_type + "\r\n";
  }
  for (const std::string& h : extra_headers) {
    raw += h + "\r\n";
  }
  if (!body.empty() || method == "POST") {
    raw += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  return raw + "\r\n" + body;
}

// Values that are wrong somewhere: as query strings (already percent-encoded where needed).
const std::vector<std::string> kBadNumbers = {"0",
                                              "-1",
                                              "1",
                                              "2147483647",
                                              "2147483648",
                                              "-2147483649",
                                              "4294967296",
                                              "9223372036854775807",
                                              "9223372036854775808",
                                              "-9223372036854775808",
                                              "-9223372036854775809",
                                              "99999999999999999999999999",
                                              "1e400",
                                              "-1e400",
                                              "1e-400",
                                              "NaN",
                                              "nan",
                                              "Infinity",
                                              "-Infinity",
                                              "1.5",
                                              "0x10",
                                              "+5",
                                              "%2b5",
                                              " 1",
                                              "%201",
                                              "1%20",
                                              "abc",
                                              "",
                                              "%00",
                                              "1%00",
                                              "%ff",
                                              "%c3%28",
                                              "true",
                                              "null",
                                              "[]",
                                              "%7b%7d",
                                              "--1",
                                              "1-",
                                              std::string(400, '9')};
const std::vector<std::string> kBadStrings = {"",
                                              "%00",
                                              "a%00b",
                                              "%ff%fe",
                                              "%c3%28",
                                              "%ed%a0%80",
                                              "%f4%90%80%80",
                                              "%e2%82",
                                              "'%20OR%201=1--",
                                              "%25",
                                              "%",
                                              "%zz",
                                              "%2e%2e%2f%2e%2e%2fetc%2fpasswd",
                                              "%5c",
                                              "%22",
                                              "%0d%0aX-Injected:%201",
                                              std::string(4000, 'x'),
                                              "EXPERIMENT_STATE_ACTIVE,EXPERIMENT_STATE_BOGUS",
                                              "config,secret",
                                              ",,,",
                                              "%e2%80%ae",
                                              "*",
                                              "%2a%25%5f"};
const std::vector<std::string> kBadBools = {"yes",   "no",  "2",   "-1",  "TRUE",
                                            "False", "%00", "%ff", "tru", "1e400"};
const std::vector<std::string> kBadIds = {"abc",
                                          "-1",
                                          "0",
                                          "00",
                                          "9223372036854775807",
                                          "9223372036854775808",
                                          "18446744073709551616",
                                          "99999999999999999999999999999",
                                          "1e400",
                                          "NaN",
                                          "%00",
                                          "1%00",
                                          "%ff",
                                          "%c3%28",
                                          "1%2f2",
                                          "..",
                                          "%2e%2e",
                                          "1.5",
                                          "0x10",
                                          "%201",
                                          "+1",
                                          "%2b1",
                                          std::string(5000, '1'),
                                          "1;2",
                                          "{id}",
                                          "%7bid%7d",
                                          "-0",
                                          "1,2"};
const std::vector<std::string> kMethods = {"PUT",     "DELETE", "PATCH", "OPTIONS", "TRACE",
                                           "CONNECT", "HEAD",   "FOO",   "get",     "PROPFIND",
                                           "MKCOL",   "LINK",   "PURGE", "G%T"};
// JSON values of every type, including ones a protobuf field cannot hold.
const std::vector<std::string> kJsonValues = {"0",
                                              "-1",
                                              "1",
                                              "9223372036854775807",
                                              "9223372036854775808",
                                              "-9223372036854775809",
                                              "1e400",
                                              "-1e400",
                                              "1e-400",
                                              "1.5",
                                              "\"NaN\"",
                                              "\"Infinity\"",
                                              "\"-Infinity\"",
                                              "NaN",
                                              "Infinity",
                                              "true",
                                              "false",
                                              "null",
                                              "\"\"",
                                              "\"x\"",
                                              "[]",
                                              "[1,2]",
                                              "{}",
                                              "{\"a\":1}",
                                              "\"\\u0000\"",
                                              "\"a\\u0000b\"",
                                              "\"\\ud800\"",
                                              "\"\\udc00x\"",
                                              "\"\\uZZZZ\"",
                                              "\"\xff\xfe\"",
                                              "\"\xc3\x28\"",
                                              "\"\xed\xa0\x80\"",
                                              "\"1\"",
                                              "\"true\"",
                                              "[[[[[[[[[[]]]]]]]]]]",
                                              "18446744073709551616",
                                              "-0",
                                              "0.0",
                                              "1E2",
                                              "01",
                                              ".5",
                                              "+1"};

// Targets that try to leave the web UI directory (`sibling`: a directory next to it whose name
// starts with the UI directory's), or that are not paths at all.
std::vector<std::string> TraversalTargets(const std::string& sibling) {
  return {"/../../etc/passwd",
          "/../../../../../../etc/passwd",
          "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
          "/%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd",
          "/..%2f..%2f..%2f..%2fetc%2fpasswd",
          "/assets/../../../../etc/passwd",
          "/assets/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
          "/%252e%252e/%252e%252e/etc/passwd",
          "/....//....//....//etc/passwd",
          "//etc/passwd",
          "/%2fetc%2fpasswd",
          "/etc/passwd%00.js",
          "/index.html%00",
          "/%00",
          "/assets/%00/../../../../etc/passwd",
          "/..\\..\\..\\etc\\passwd",
          "/%5c..%5c..%5cetc%5cpasswd",
          "/.%2e/.%2e/.%2e/etc/passwd",
          "/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd",
          "/../" + sibling + "/secret.txt",
          "/%2e%2e/" + sibling + "/secret.txt",
          "/assets/../../" + sibling + "/secret.txt",
          "/proc/self/environ",
          "/../../proc/self/environ",
          "/%ff",
          "/%c3%28",
          "/" + std::string(3000, 'a'),
          "/assets/" + std::string(300, '/') + "etc/passwd",
          "http://127.0.0.1/../../etc/passwd",
          "*",
          "?x=1",
          "/?x=%00",
          "/.",
          "/..",
          "/assets/.",
          "/assets/..",
          "/api/../../etc/passwd",
          "/api/v1/../../../etc/passwd",
          "/metrics/../../etc/passwd"};
}

class Generator {
 public:
  Generator(std::vector<Operation> ops, std::string valid_yaml, std::string webui_sibling)
      : ops_(std::move(ops)), yaml_(std::move(valid_yaml)), sibling_(std::move(webui_sibling)) {}

  // Request `index` of the run with `seed`.
  FuzzRequest Make(uint64_t seed, uint64_t index) const {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + index);
    auto pick = [&](const auto& v) -> const auto& { return v[rng() % v.size()]; };
    const Operation& op = pick(ops_);
    // Categories, weighted: most requests mutate parameters and bodies.
    switch (rng() % 20) {
      case 0:
      case 1:
      case 2:
      case 3:
        return BadPathParam(op, rng, pick);
      case 4:
      case 5:
      case 6:
      case 7:
        return BadQuery(op, rng, pick);
      case 8:
      case 9:
      case 10:
      case 11:
      case 12:
        return BadBody(rng, pick);
      case 13:
        return WrongMethod(op, rng, pick);
      case 14:
        return BadContentType(rng, pick);
      case 15:
        return Traversal(rng, pick);
      case 16:
        return BadHeaders(op, rng, pick);
      case 17:
        return LongUrl(op, rng);
      case 18:
        return BodyOnBodylessRoute(op, rng, pick);
      default:
        return BadBody(rng, pick);
    }
  }

  // A valid create body that stores nothing (validateOnly) and its JSON fields.
  Value::Map ValidBody() const {
    return Value::Map{{"configYaml", yaml_}, {"activate", false}, {"validateOnly", true}};
  }

  // Ids that exist (an experiment's, a trial's with metrics and logs), so that half the
  // requests with a valid id reach the database with the rest of their mutations.
  void SetExistingIds(std::vector<int64_t> ids) { existing_ids_ = std::move(ids); }

  // The operation's path with its parameters filled in validly: an existing id or, as often,
  // one that does not exist.
  std::string Concrete(const Operation& op, std::mt19937_64& rng) const {
    std::string p = op.path;
    for (const std::string& name : op.path_params) {
      int64_t id = !existing_ids_.empty() && rng() % 2 ? existing_ids_[rng() % existing_ids_.size()]
                                                       : static_cast<int64_t>(1 + rng() % 1000000);
      p.replace(p.find("{" + name + "}"), name.size() + 2, std::to_string(id));
    }
    return p;
  }

  const std::vector<Operation>& ops() const { return ops_; }

 private:
  template <typename Pick>
  FuzzRequest BadPathParam(const Operation& op, std::mt19937_64& rng, Pick& pick) const {
    std::string p = op.path;
    if (op.path_params.empty()) {
      p += "/" + pick(kBadIds);  // an id where none belongs
    }
    for (const std::string& name : op.path_params) {
      p.replace(p.find("{" + name + "}"), name.size() + 2, pick(kBadIds));
    }
    std::string body = op.has_body ? Value(ValidBody()).ToJson() : "";
    return {"bad path parameter", op.method, p, Build(op.method, p, body), op.has_body};
  }

  template <typename Pick>
  FuzzRequest BadQuery(const Operation& op, std::mt19937_64& rng, Pick& pick) const {
    std::string q;
    int n = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) {
      std::string name, value;
      if (op.query_params.empty() || rng() % 5 == 0) {
        name = rng() % 2
                   ? "unknownParam"
                   : pick(std::vector<std::string>{"%ff", "%00", "a%5b%5d", "", "=", "limit"});
        value = pick(kBadStrings);
      } else {
        const auto& [pname, type] = pick(op.query_params);
        name = rng() % 4 == 0 ? ToSnake(pname) : pname;
        value = type == "integer"   ? pick(kBadNumbers)
                : type == "boolean" ? pick(kBadBools)
                                    : pick(kBadStrings);
      }
      q += (q.empty() ? "" : "&") + name + (rng() % 10 == 0 ? "" : "=" + value);
    }
    std::string target = Concrete(op, rng) + "?" + q;
    std::string body = op.has_body ? Value(ValidBody()).ToJson() : "";
    return {"bad query", op.method, target, Build(op.method, target, body), op.has_body};
  }

  template <typename Pick>
  FuzzRequest BadBody(std::mt19937_64& rng, Pick& pick) const {
    const std::string target = "/api/v1/experiments";
    Value::Map body = ValidBody();
    std::string text, kind;
    std::vector<std::string> fields;
    for (const auto& [k, v] : body) {
      fields.push_back(k);
    }
    switch (rng() % 16) {
      case 0: {  // a field of the wrong type or value
        const std::string& f = pick(fields);
        text = Value(body).ToJson();
        std::string key = "\"" + f + "\":";
        size_t at = text.find(key) + key.size();
        size_t end = f == "configYaml" ? text.find("\",", at) + 1 : text.find_first_of(",}", at);
        text = text.substr(0, at) + pick(kJsonValues) + text.substr(end);
        kind = "wrong type " + f;
        break;
      }
      case 1:  // missing fields (validateOnly stays, so a valid rest stores nothing)
        body.erase(rng() % 2 ? "configYaml" : "activate");
        if (rng() % 2) {
          body.erase("configYaml");
        }
        text = Value(body).ToJson();
        kind = "missing field";
        break;
      case 2:  // an extra field
        body[pick(std::vector<std::string>{"extra", "id", "owner", "config_yaml_", "__proto__", "",
                                           "\xff"})] = Value(1);
        text = Value(body).ToJson();
        kind = "extra field";
        break;
      case 3: {  // the YAML mutated: wrong types and huge numbers in the config
        std::string y = yaml_;
        const std::vector<std::pair<std::string, std::vector<std::string>>> edits = {
            {"d_model: 32",
             {"d_model: -1", "d_model: 0", "d_model: 9223372036854775808", "d_model: 1e400",
              "d_model: .nan", "d_model: abc", "d_model: [1]", "d_model: {a: 1}", "d_model: 33"}},
            {"batches: ",
             {"batches: -1", "batches: 0", "batches: 99999999999999999999", "batches: 1e400",
              "batches: .inf", "batches: x", "batches: [", "batches: null"}},
            {"heads: 2", {"heads: 3", "heads: -2", "heads: 2147483648", "heads: \"2\"", "heads:"}},
            {"lr: 0.002", {"lr: -1", "lr: 0", "lr: 1e400", "lr: .nan", "lr: NaN", "lr: \"0.1\""}},
            {"name: ",
             {"name: \"a\\0b\"", "name: \"\\xff\"", "name: [x]",
              "name: ", "name: \"" + std::string(70000, 'n') + "\""}}};
        const auto& [needle, replacements] = pick(edits);
        size_t at = y.find(needle);
        if (at != std::string::npos) {
          size_t eol = y.find('\n', at);
          y = y.substr(0, at) + pick(replacements) + y.substr(eol);
        }
        body["configYaml"] = y;
        if (rng() % 3 == 0) {
          body.erase("validateOnly");  // may be valid and stored: a 2xx is counted
        }
        text = Value(body).ToJson();
        kind = "bad config YAML";
        break;
      }
      case 4:  // not YAML at all, or YAML with odd bytes
        body["configYaml"] = pick(std::vector<std::string>{
            "", "{", "- [", ":", "\t", "name: \x01\x02", "a: &a [*a]", "!!binary AAAA",
            std::string(1000, '['), "a: " + std::string(2000, '{'), "%YAML 9.9\n---\n",
            "name: x\n\x00\x01"s, "? [a]\n: b", "\xef\xbb\xbfname: bom", "x: 1\nx: 2",
            "hyperparameters: !!python/object:os.system ls"});
        text = Value(body).ToJson();
        kind = "not YAML";
        break;
      case 5: {  // invalid UTF-8 / NUL inside the JSON strings
        text = Value(body).ToJson();
        size_t at = text.find("name: ");
        text.insert(at + 6, pick(std::vector<std::string>{"\xff", "\xc3\x28", "\xed\xa0\x80",
                                                          "\\u0000", "\x00"s, "\\ud800",
                                                          "\xf8\x88\x80\x80\x80", "\xe2\x82"}));
        kind = "invalid UTF-8 or NUL in a string";
        break;
      }
      case 6:  // deeply nested JSON
        text = pick(std::vector<std::string>{
            std::string(100000, '['), std::string(100000, '{'),
            "{\"configYaml\":" + std::string(50000, '[') + "}",
            std::string(5000, '[') + std::string(5000, ']'),
            "{\"extra\":" + std::string(200, '[') + std::string(200, ']') + "}"});
        kind = "deeply nested JSON";
        break;
      case 7:  // truncated or broken JSON
        text = Value(body).ToJson();
        text = text.substr(0, rng() % text.size());
        kind = "truncated JSON";
        break;
      case 8:  // not an object
        text = pick(kJsonValues);
        kind = "JSON that is not an object";
        break;
      case 9:  // duplicated keys, comments, trailing commas
        text = pick(std::vector<std::string>{
            R"({"validateOnly":true,"validateOnly":false,"configYaml":"x"})",
            R"({"configYaml":"a",})", R"({/*c*/"configYaml":"a"})", R"({'configYaml':'a'})",
            R"({configYaml:"a"})", "{\"a\"\x00:1}"s, R"({"configYaml":"a"}{"configYaml":"b"})",
            R"({"configYaml":"a"} trailing)", "\xef\xbb\xbf{}"});
        kind = "malformed JSON";
        break;
      case 10: {  // an oversized body (beyond max_body_bytes, 8 MiB) -- rarely: it is slow
        if (rng() % 25 != 0) {
          body["configYaml"] = yaml_ + "# " + std::string(100000 + rng() % 200000, 'p') + "\n";
          text = Value(body).ToJson();
          kind = "large body";
        } else {
          text = "{\"configYaml\":\"" + std::string((9u << 20), 'o') + "\"}";
          kind = "oversized body";
        }
        break;
      }
      case 11:  // a Content-Length that lies
        text = Value(body).ToJson();
        return {
            "lying Content-Length", "POST", target,
            "POST " + target +
                " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                "Content-Length: " +
                pick(std::vector<std::string>{"-1", "abc", "99999999999999999999",
                                              std::to_string(text.size() / 2), "1, 2", ""}) +
                "\r\n\r\n" + text,
            true};
      case 12:  // chunked bodies, some broken
        text = Value(body).ToJson();
        return {
            "chunked body", "POST", target,
            "POST " + target +
                " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
                "Transfer-Encoding: chunked\r\n\r\n" +
                pick(std::vector<std::string>{
                    "zz\r\n" + text + "\r\n0\r\n\r\n", "FFFFFFFFFFFFFFFFFF\r\nx\r\n",
                    "5\r\n{\"a\":\r\n0\r\n\r\n", "-1\r\n\r\n", "0\r\n\r\n"}),
            true};
      case 13:  // huge numbers in the boolean fields
        body["activate"] = Value(pick(std::vector<double>{1e308, -1.0, 0.5}));
        text = Value(body).ToJson();
        kind = "number for boolean";
        break;
      default:  // empty body
        text = rng() % 2 ? "" : " ";
        kind = "empty body";
        break;
    }
    return {kind, "POST", target, Build("POST", target, text), true};
  }

  static std::string ToSnake(const std::string& s) {
    std::string out;
    for (char c : s) {
      if (std::isupper(static_cast<unsigned char>(c))) {
        out += '_';
        out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else {
        out += c;
      }
    }
    return out;
  }

  template <typename Pick>
  FuzzRequest WrongMethod(const Operation& op, std::mt19937_64& rng, Pick& pick) const {
    std::string method = pick(kMethods);
    if (method == op.method) {
      method = "PUT";
    }
    std::string target = Concrete(op, rng);
    return {"wrong method", method, target, Build(method, target, rng() % 2 ? "{}" : ""), false};
  }

  template <typename Pick>
  FuzzRequest BadContentType(std::mt19937_64& rng, Pick& pick) const {
    std::string ct = pick(std::vector<std::string>{
        "", "text/plain", "application/xml", "multipart/form-data",
        "application/x-www-form-urlencoded", "application/json; charset=latin1", "\xff\xfe",
        "application/json\x01", std::string(3000, 'a')});
    std::string body = rng() % 2 ? Value(ValidBody()).ToJson()
                                 : pick(std::vector<std::string>{
                                       "a=1&b=2", "<x/>", "--b\r\n\r\n--b--", "\xff\xfe\x00"s});
    return {"bad content type", "POST", "/api/v1/experiments",
            Build("POST", "/api/v1/experiments", body, ct), true};
  }

  template <typename Pick>
  FuzzRequest Traversal(std::mt19937_64& rng, Pick& pick) const {
    std::vector<std::string> targets = TraversalTargets(sibling_);
    const std::string& target = pick(targets);
    std::string method = rng() % 4 == 0 ? "HEAD" : "GET";
    return {"path traversal", method, target, Build(method, target, "", ""), false};
  }

  template <typename Pick>
  FuzzRequest BadHeaders(const Operation& op, std::mt19937_64& rng, Pick& pick) const {
    std::string target = Concrete(op, rng);
    std::vector<std::string> headers;
    switch (rng() % 7) {
      case 0:
        headers = {"X-Long: " + std::string(60000 + rng() % 20000, 'h')};
        break;
      case 1:
        for (int i = 0; i < 2000; ++i) {
          headers.push_back("X-H" + std::to_string(i) + ": v");
        }
        break;
      case 2:
        headers = {"Authorization: " + pick(std::vector<std::string>{
                                           "Bearer \xff\xfe", std::string("Bearer a\x01") + "b",
                                           "Bearer " + std::string(10000, 'u'), "Bearer \xed\xa0\x80",
                                           "Digest x", "Bearer sfa_" + std::string(64, 'f')})};
        break;
      case 3:
        headers = {"Bad Header: x", "\xff: y"};
        break;
      case 4:
        headers = {"Content-Length: 5", "Content-Length: 7"};
        break;
      case 5:
        headers = {"Transfer-Encoding: gzip"};
        break;
      default:
        headers = {"Expect: 100-continue", "Connection: upgrade", "Upgrade: h2c"};
        break;
    }
    std::string body = op.has_body ? Value(ValidBody()).ToJson() : "";
    return {"bad headers", op.method, target,
            Build(op.method, target, body, "application/json", headers), op.has_body};
  }

  FuzzRequest LongUrl(const Operation& op, std::mt19937_64& rng) const {
    std::string target = Concrete(op, rng);
    size_t n = std::vector<size_t>{8000, 70000, 200000}[rng() % 3];
    target += rng() % 2 ? "?search=" + std::string(n, 'q') : "/" + std::string(n, 'p');
    std::string method = op.method;
    std::string body = op.has_body ? Value(ValidBody()).ToJson() : "";
    return {"long URL", method, target, Build(method, target, body), op.has_body};
  }

  template <typename Pick>
  FuzzRequest BodyOnBodylessRoute(const Operation& op, std::mt19937_64& rng, Pick& pick) const {
    std::string target = Concrete(op, rng);
    std::string body = pick(std::vector<std::string>{"{}", "[", std::string(20000, '['), "\xff",
                                                     "null", Value(ValidBody()).ToJson()});
    return {"body on a route without one", op.method, target, Build(op.method, target, body),
            op.has_body};
  }

  std::vector<Operation> ops_;
  std::string yaml_;
  std::string sibling_;
  std::vector<int64_t> existing_ids_;
};

// Requests sent once each: request lines that are not HTTP, every traversal target, and values
// the database cannot store as text (invalid UTF-8, NUL).
std::vector<FuzzRequest> FixedCases(const std::string& yaml, const std::string& sibling) {
  std::vector<FuzzRequest> out;
  for (
      const std::string& raw : std::vector<std::string>{
          "\r\n\r\n", "GET\r\n\r\n", "GET /health\r\n\r\n", "GET /health HTTP/9.9\r\n\r\n",
          "GET /health HTTP/1.1\r\n\r\n", "GET /health HTTP/1.0\r\n\r\n",
          "GET /health HTTP/2.0\r\n\r\n", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"s,
          "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
          "GET /api/v1/master HTTP/1.1\r\nHost: x\r\n" + std::string(70000, 'H') + "\r\n\r\n",
          "GET /api/v1/master HTTP/1.1\nHost: x\n\n", "GET  /api/v1/master  HTTP/1.1\r\n\r\n",
          "GET /api/v1/ma\x00ster HTTP/1.1\r\n\r\n"s,
          "GET /api/v1/\xff HTTP/1.1\r\nConnection: close\r\n\r\n",
          "POST /api/v1/experiments HTTP/1.1\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"s,
          std::string(100000, 'A')}) {
    out.push_back({"malformed HTTP", "?", "?", raw, false});
  }
  for (const std::string& target : TraversalTargets(sibling)) {
    out.push_back({"path traversal", "GET", target, Build("GET", target, "", ""), false});
  }
  // Creates that are valid but for credentials that are not: refused (401), nothing stored.
  for (const std::string& authorization :
       {"Bearer \xff\xfe"s, "Bearer "s + std::string(10000, 'a'), "Basic YWRtaW46YWRtaW4="s,
        "Bearer sfa_"s + std::string(64, '0'), "Bearer"s, "Bearer sfs_\x01"s}) {
    std::string body = Value(Value::Map{{"configYaml", yaml}, {"activate", false}}).ToJson();
    out.push_back({"bad Authorization", "POST", "/api/v1/experiments",
                   Build("POST", "/api/v1/experiments", body, "application/json",
                         {"Authorization: " + authorization}),
                   true});
  }
  for (const char* name : {"\"a\\0b\"", "\"\\xff\"", "\"\\ud800\"", "\"\\x01\""}) {
    std::string y = yaml;
    y.replace(y.find("name: fuzz"), 10, std::string("name: ") + name);
    std::string body = Value(Value::Map{{"configYaml", y}, {"activate", false}}).ToJson();
    out.push_back({"NUL or odd escape in the YAML", "POST", "/api/v1/experiments",
                   Build("POST", "/api/v1/experiments", body), true});
  }
  for (const char* q : {"name=%00", "name=%ff", "sortBy=%00", "states=%00", "fields=%ff"}) {
    std::string target = std::string("/api/v1/experiments?") + q;
    out.push_back({"bad query text", "GET", target, Build("GET", target, ""), false});
  }
  // Trial 1 exists (the test's one experiment) and has metrics and logs; an endBatches past
  // int32 once failed in PostgreSQL (its parameter was inferred as integer).
  for (const char* t :
       {"/api/v1/trials/1/logs?search=%00", "/api/v1/trials/1/logs?search=%c3%28",
        "/api/v1/cluster/utilization?pool=%00", "/api/v1/cluster/utilization?pool=%ff",
        "/api/v1/trials/1/metrics?kind=%ff", "/api/v1/trials/1/metrics?endBatches=4294967296",
        "/api/v1/trials/1/metrics?endBatches=-9223372036854775808&maxPoints=2147483647",
        "/api/v1/experiments/1/trials?limit=%ff"}) {
    out.push_back({"bad query text", "GET", t, Build("GET", t, ""), false});
  }
  return out;
}

// Each experiment's rows: {"experiments": 1, "trials": n, "metrics": n, "task_logs": n,
// "checkpoints": n}, by experiment id.
std::map<int64_t, std::map<std::string, int64_t>> RowsByExperiment(const std::string& db) {
  std::map<int64_t, std::map<std::string, int64_t>> out;
  pqxx::connection conn(db);
  pqxx::work tx(conn);
  for (const auto& row : tx.exec("SELECT id FROM experiments")) {
    auto& rows = out[row[0].as<int64_t>()];
    rows = {{"experiments", 1}, {"trials", 0}, {"metrics", 0}, {"task_logs", 0}, {"checkpoints", 0}};
  }
  for (const auto& row : tx.exec("SELECT experiment_id, count(*) FROM trials GROUP BY 1")) {
    out[row[0].as<int64_t>()]["trials"] = row[1].as<int64_t>();
  }
  for (const std::string t : {"metrics", "task_logs", "checkpoints"}) {
    for (const auto& row : tx.exec("SELECT t.experiment_id, count(*) FROM " + t +
                                   " x JOIN trials t ON t.id = x.trial_id GROUP BY 1")) {
      out[row[0].as<int64_t>()][t] = row[1].as<int64_t>();
    }
  }
  return out;
}

TEST(ApiFuzz, GeneratedBadRequestsGetNo5xxStoreNothingAndLeaveTheMasterUp) {
  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("SF_FUZZ_SEED")) {
    seed = std::strtoull(s, nullptr, 10);
  }
  int64_t count = 20000;
  if (const char* s = std::getenv("SF_FUZZ_REQUESTS")) {
    count = std::strtoll(s, nullptr, 10);
  }
  std::cout << "api fuzz: seed " << seed << " (replay with SF_FUZZ_SEED=" << seed << "), " << count
            << " requests\n";

  // A web UI directory of our own, with a secret beside it whose directory name starts with
  // the UI's (a prefix check alone would let "/../ui-private/secret.txt" out).
  TempDir web;
  fs::create_directories(web.path() + "/ui/assets");
  fs::create_directories(web.path() + "/ui-private");
  web.WriteFile("ui/index.html", "<!doctype html><title>sf</title>");
  web.WriteFile("ui/assets/app.js", "console.log(1)");
  web.WriteFile("ui-private/secret.txt", kSecret);
  ClusterLayout layout;
  layout.master_flags = {"--webui-dir", web.path() + "/ui"};
  Cluster cluster(0, 1, layout);
  ASSERT_FALSE(cluster.db().empty()) << "no PostgreSQL";
  g_bearer = cluster.admin_token();
  const int port = std::stoi(cluster.url().substr(cluster.url().rfind(':') + 1));
  const pid_t master = cluster.master_pid();

  // The OpenAPI document, read with the project's own JSON.
  RawResponse doc_response =
      Exchange(port, Build("GET", "/api/v1/openapi.json", "", ""), std::chrono::seconds(10));
  ASSERT_EQ(doc_response.status, 200);
  auto doc = Value::FromJson(doc_response.body);
  ASSERT_TRUE(doc.ok()) << doc.status().message();
  std::vector<Operation> ops = ReadOperations(*doc);
  ASSERT_GE(ops.size(), 10u);
  int with_body = 0;
  for (const Operation& op : ops) {
    with_body += op.has_body && !op.body_fields.empty();
  }
  ASSERT_GE(with_body, 1) << "no operation with a request body schema";

  // The valid request the body mutations start from is accepted (and, validateOnly, stores
  // nothing); an existing experiment gives the id-taking routes something to find.
  const std::string yaml = TinyExperiment(1, 10, 10, "fuzz");
  Generator gen(ops, yaml, "ui-private");
  RawResponse valid =
      Exchange(port, Build("POST", "/api/v1/experiments", Value(gen.ValidBody()).ToJson()),
               std::chrono::seconds(20));
  ASSERT_EQ(valid.status, 200) << valid.body;
  int64_t existing = cluster.Submit(yaml);
  ASSERT_GT(existing, 0);
  std::vector<int64_t> ids = {existing};
  Value trials = cluster.Trials(existing);
  if (!trials.as_list().empty()) {
    // Rows for the metric and log reads to page, filter and downsample.
    int64_t trial = Id(trials.as_list()[0]);
    ids.push_back(trial);
    pqxx::connection conn(cluster.db());
    pqxx::work tx(conn);
    const std::string t = std::to_string(trial);
    tx.exec("INSERT INTO metrics (trial_id, kind, batches, vals) SELECT " + t +
            ", k, b * 10, jsonb_build_object('loss', 1.0 / b) FROM generate_series(1, 50) b, "
            "unnest(ARRAY['training', 'validation']) k");
    tx.exec("INSERT INTO task_logs (trial_id, stream, message) SELECT " + t +
            ", 'stdout', 'step ' || i || ' loss 0.5 \u00e9' FROM generate_series(1, 50) i");
    tx.commit();
  }
  gen.SetExistingIds(ids);
  std::cout << "api fuzz: existing ids";
  for (int64_t id : ids) {
    std::cout << " " << id;
  }
  std::cout << "\n";

  std::map<int64_t, std::map<std::string, int64_t>> before = RowsByExperiment(cluster.db());

  std::vector<FuzzRequest> fixed = FixedCases(yaml, "ui-private");
  const int64_t total = count + static_cast<int64_t>(fixed.size());
  std::atomic<int64_t> next{0}, created{0}, answered_2xx{0}, failures{0};
  std::mutex mu;
  std::vector<std::string> failure_log;
  std::map<std::string, int64_t> kinds, kind_ms, created_by;
  // Experiments a DELETE /api/v1/experiments/{id} answered 2xx removed (the fuzz may have killed
  // one first, so deleting it is allowed), and whether a bulk delete was answered 2xx.
  std::set<int64_t> deleted;
  bool bulk_deleted = false;
  std::map<int, int64_t> statuses;
  auto fail = [&](int64_t i, const FuzzRequest& r, const RawResponse& res, const std::string& why) {
    failures++;
    std::lock_guard<std::mutex> lock(mu);
    if (failure_log.size() < 25) {
      failure_log.push_back("#" + std::to_string(i) + " [" + r.kind + "] " + why + ": " +
                            Escape(r.raw, 300) + " -> " + std::to_string(res.status) + " " +
                            Escape(res.body, 300));
    }
  };
  auto worker = [&] {
    std::map<std::string, int64_t> my_kinds;
    std::map<int, int64_t> my_statuses;
    std::map<std::string, int64_t> my_ms;
    for (int64_t i; (i = next++) < total;) {
      FuzzRequest r = i < count ? gen.Make(seed, static_cast<uint64_t>(i))
                                : fixed[static_cast<size_t>(i - count)];
      auto sent_at = std::chrono::steady_clock::now();
      RawResponse res = Exchange(port, r.raw, std::chrono::seconds(30));
      my_kinds[r.kind]++;
      if (std::getenv("SF_FUZZ_VERBOSE")) {
        std::lock_guard<std::mutex> lock(mu);
        std::cout << "#" << i << " [" << r.kind << "] "
                  << Escape(r.raw, std::atoi(std::getenv("SF_FUZZ_VERBOSE"))) << " -> "
                  << res.status << " " << Escape(res.body, 200) << "\n";
      }
      my_ms[r.kind] += std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - sent_at)
                           .count();
      my_statuses[res.status]++;
      if (res.status == 0) {
        fail(i, r, res, "no response");
        continue;
      }
      if (res.status >= 500) {
        fail(i, r, res, "5xx");
      }
      if (res.body.find("root:") != std::string::npos ||
          res.body.find("SECRET-OUTSIDE") != std::string::npos ||
          res.body.find("SF_MASTER") != std::string::npos) {
        fail(i, r, res, "a file from outside the web UI directory");
      }
      if (res.status >= 400 && res.status < 500 && r.method != "HEAD" &&
          r.target.rfind("/api/", 0) == 0) {
        auto v = Value::FromJson(res.body);
        if (res.content_type != "application/json" || !IsUtf8(res.body) || !v.ok() ||
            !v->is_map() || !v->Find("message") || !v->Find("message")->is_string() ||
            v->Find("message")->as_string().empty()) {
          fail(i, r, res, "a 4xx on /api without a JSON message");
        }
      }
      if (res.status >= 200 && res.status < 300) {
        answered_2xx++;
        const std::string path = r.target.substr(0, r.target.find('?'));
        const std::string prefix = "/api/v1/experiments/";
        if (r.method == "DELETE" && path.rfind(prefix, 0) == 0 && path.size() > prefix.size() &&
            path.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
          std::lock_guard<std::mutex> lock(mu);
          deleted.insert(std::stoll(path.substr(prefix.size())));
        }
        if (path == prefix + "delete") {
          std::lock_guard<std::mutex> lock(mu);
          bulk_deleted = true;
        }
        if (r.creates) {
          auto v = Value::FromJson(res.body);
          const Value* e = v.ok() ? v->Find("experiment") : nullptr;
          if (e && e->Find("id") && Id(*e) > 0) {
            created++;
            std::lock_guard<std::mutex> lock(mu);
            created_by[r.kind]++;
          }
        }
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [k, n] : my_kinds) {
      kinds[k] += n;
    }
    for (auto& [k, n] : my_ms) {
      kind_ms[k] += n;
    }
    for (auto& [k, n] : my_statuses) {
      statuses[k] += n;
    }
  };
  // Four clients at a time: far below the connection cap (512), so no 503 is expected.
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back(worker);
  }
  for (auto& t : threads) {
    t.join();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::cout << "api fuzz: " << total << " requests in " << seconds << " s; statuses:";
  for (auto& [s, n] : statuses) {
    std::cout << " " << s << "=" << n;
  }
  std::cout << "\napi fuzz: kinds:";
  for (auto& [k, n] : kinds) {
    std::cout << " [" << k << "]=" << n << " (" << kind_ms[k] << " ms)";
  }
  std::cout << "\napi fuzz: " << answered_2xx << " answered 2xx, " << created
            << " experiments created by:";
  for (auto& [k, n] : created_by) {
    std::cout << " [" << k << "]=" << n;
  }
  std::cout << "\n";
  for (const std::string& f : failure_log) {
    ADD_FAILURE() << f;
  }
  EXPECT_EQ(failures, 0) << "seed " << seed;
  EXPECT_GE(total, 10000);

  // The master is alive and healthy.
  EXPECT_EQ(::kill(master, 0), 0) << "the master died";
  EXPECT_EQ(cluster.master_pid(), master);
  EXPECT_EQ(Exchange(port, Build("GET", "/health", "", ""), std::chrono::seconds(10)).status, 200);

  // Nothing stored except the experiments that 2xx answers created (and their trials; no agent
  // runs, so no metrics, logs or checkpoints), and nothing removed except the experiments that
  // 2xx answers deleted (with all their rows).
  std::map<int64_t, std::map<std::string, int64_t>> after = RowsByExperiment(cluster.db());
  std::cout << "api fuzz: " << deleted.size() << " experiments deleted by DELETE\n";
  for (const auto& [id, rows] : before) {
    if (deleted.count(id)) {
      EXPECT_EQ(after.count(id), 0u) << "experiment " << id << " was answered deleted, seed " << seed;
    } else if (!bulk_deleted) {
      EXPECT_EQ(after[id], rows) << "experiment " << id << ", seed " << seed;
    }
  }
  int64_t new_experiments = 0;
  for (const auto& [id, rows] : after) {
    if (before.count(id)) continue;
    ++new_experiments;
    for (const char* t : {"metrics", "task_logs", "checkpoints"}) {
      EXPECT_EQ(rows.at(t), 0) << t << " of experiment " << id << ", seed " << seed;
    }
  }
  int64_t created_then_deleted = 0;
  for (int64_t id : deleted) created_then_deleted += before.count(id) == 0;
  if (!bulk_deleted) {
    EXPECT_EQ(new_experiments + created_then_deleted, created) << "seed " << seed;
  }
}

}  // namespace
}  // namespace sf::testing
