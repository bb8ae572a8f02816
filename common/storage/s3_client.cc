#include "common/storage/s3_client.h"

#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "common/env.h"
#include "common/sha256.h"

namespace sf::storage {
namespace {

void InitLibraries() {
  static std::once_flag once;
  std::call_once(once, [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    xmlInitParser();
  });
}

// SigV4's encoding: everything but the unreserved characters; '/' kept in keys.
std::string Encode(std::string_view s, bool keep_slash) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// ---- XML answers (libxml2)

struct XmlDoc {
  xmlDocPtr doc = nullptr;
  explicit XmlDoc(const std::string& body) {
    if (!body.empty()) {
      doc = xmlReadMemory(body.data(), static_cast<int>(body.size()), "s3.xml", nullptr,
                          XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    }
  }
  ~XmlDoc() {
    if (doc) xmlFreeDoc(doc);
  }
  XmlDoc(const XmlDoc&) = delete;
  XmlDoc& operator=(const XmlDoc&) = delete;
  xmlNodePtr root() const { return doc ? xmlDocGetRootElement(doc) : nullptr; }
};

bool Named(xmlNodePtr n, const char* name) {
  return n && n->type == XML_ELEMENT_NODE &&
         xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
}

std::string Text(xmlNodePtr n) {
  if (!n) return "";
  xmlChar* t = xmlNodeGetContent(n);
  std::string out = t ? reinterpret_cast<const char*>(t) : "";
  xmlFree(t);
  return out;
}

// The first child element of `parent` called `name`.
xmlNodePtr Child(xmlNodePtr parent, const char* name) {
  for (xmlNodePtr c = parent ? parent->children : nullptr; c; c = c->next) {
    if (Named(c, name)) return c;
  }
  return nullptr;
}

// ---- One HTTP exchange

struct Response {
  long status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string transport_error;                 // libcurl's, when no answer came
};

struct Request {
  std::string method = "GET";
  std::string key;    // "" for the bucket itself
  std::string query;  // already encoded, parameters in name order (SigV4's canonical form)
  std::string_view body;
  std::FILE* sink = nullptr;  // the body goes here instead of Response::body
};

size_t CollectBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

size_t WriteToFile(char* data, size_t size, size_t n, void* file) {
  return std::fwrite(data, 1, size * n, static_cast<std::FILE*>(file));
}

size_t CollectHeader(char* data, size_t size, size_t n, void* out) {
  std::string line(data, size * n);
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value.erase(value.find_last_not_of(" \t\r\n") + 1);
    (*static_cast<std::map<std::string, std::string>*>(out))[name] = value;
  }
  return size * n;
}

struct CurlDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

Response PerformOnce(const S3Config& c, const Request& r, const std::string& payload_sha256) {
  Response out;
  std::unique_ptr<CURL, CurlDeleter> h(curl_easy_init());
  if (!h) {
    out.transport_error = "libcurl could not make a handle";
    return out;
  }
  std::string url = c.endpoint_url + "/" + c.bucket;
  if (!r.key.empty()) url += "/" + Encode(r.key, /*keep_slash=*/true);
  if (!r.query.empty()) url += "?" + r.query;
  const std::string sigv4 = "aws:amz:" + c.region + ":s3";
  const std::string userpwd = c.access_key + ":" + c.secret_key;
  std::unique_ptr<curl_slist, SlistDeleter> headers;
  auto add = [&](const std::string& line) {
    headers.reset(curl_slist_append(headers.release(), line.c_str()));
  };
  add("x-amz-content-sha256: " + payload_sha256);  // signed with the rest
  CURL* e = h.get();
  curl_easy_setopt(e, CURLOPT_URL, url.c_str());
  curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(e, CURLOPT_USERPWD, userpwd.c_str());
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT, static_cast<long>(c.connect_timeout.count()));
  curl_easy_setopt(e, CURLOPT_TIMEOUT, static_cast<long>(c.request_timeout.count()));
  if (r.method == "HEAD") {
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  } else if (r.method == "PUT" || r.method == "POST") {
    add("Content-Type: application/octet-stream");
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r.body.data());
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  } else if (r.method != "GET") {
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r.method.c_str());
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, CollectHeader);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &out.headers);
  if (r.sink) {
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, WriteToFile);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r.sink);
  } else {
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, CollectBody);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &out.body);
  }
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, error);
  const CURLcode code = curl_easy_perform(e);
  if (code != CURLE_OK) {
    out.transport_error = error[0] ? error : curl_easy_strerror(code);
    return out;
  }
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out.status);
  return out;
}

// Retries what a retry may cure: no answer, or a 5xx. A download to a file starts over.
Response Perform(const S3Config& c, const Request& r) {
  Response out;
  const std::string payload_sha256 = Sha256Hex(r.body);  // once: a part may be 16 MiB
  for (int attempt = 1; attempt <= std::max(1, c.attempts); ++attempt) {
    if (r.sink) {
      std::fflush(r.sink);
      if (std::fseek(r.sink, 0, SEEK_SET) != 0) break;
    }
    out = PerformOnce(c, r, payload_sha256);
    if (out.transport_error.empty() && out.status < 500) return out;
    if (attempt < c.attempts) std::this_thread::sleep_for(std::chrono::milliseconds(200 * attempt));
  }
  return out;
}

// What went wrong, as one line: "<what> s3://bucket/key: <server's code>: <message> (HTTP n)".
Status Failure(const S3Config& c, const std::string& what, const std::string& key,
               const Response& r) {
  const std::string where = "s3://" + c.bucket + (key.empty() ? "" : "/" + key);
  if (!r.transport_error.empty()) {
    return Unavailable(what + " " + where + ": the endpoint " + c.endpoint_url +
                       " did not answer (" + r.transport_error + ")");
  }
  std::string code, message;
  XmlDoc doc(r.body);
  if (xmlNodePtr root = doc.root(); Named(root, "Error")) {
    code = Text(Child(root, "Code"));
    message = Text(Child(root, "Message"));
  }
  if (code.empty()) {  // a HEAD has no body: say what its status means
    code = r.status == 404   ? (key.empty() ? "NoSuchBucket" : "NoSuchKey")
           : r.status == 403 ? "AccessDenied"
                             : "HTTP " + std::to_string(r.status);
  }
  std::string line = what + " " + where + " at " + c.endpoint_url + ": " + code;
  if (!message.empty()) line += ": " + message;
  line += " (HTTP " + std::to_string(r.status) + ")";
  if (code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch") {
    line += "; check the access key and secret key";
  }
  if (r.status == 404) return NotFound(line);
  if (r.status == 401 || r.status == 403) return PermissionDenied(line);
  if (r.status >= 500) return Unavailable(line);
  return InvalidArgument(line);
}

bool Ok(const Response& r) {
  return r.transport_error.empty() && r.status >= 200 && r.status < 300;
}

// An S3 bucket name: 3-63 of lower-case letters, digits, '.', '-', starting and ending with a
// letter or digit.
bool ValidBucket(const std::string& b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char ch : b) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-'))
      return false;
  }
  auto edge = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  return edge(b.front()) && edge(b.back());
}

Result<std::string> ReadRange(const std::string& path, int64_t offset, int64_t length) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open " + path);
  std::string data(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  if (in.gcount() != length)
    return DataLoss("short read of " + path + " at byte " + std::to_string(offset));
  return data;
}

}  // namespace

Result<S3Client> S3Client::Create(S3Config config) {
  InitLibraries();
  if (config.endpoint_url.rfind("http://", 0) != 0 &&
      config.endpoint_url.rfind("https://", 0) != 0) {
    return InvalidArgument("endpoint_url: \"" + config.endpoint_url +
                           "\" must start with http:// or https://");
  }
  while (!config.endpoint_url.empty() && config.endpoint_url.back() == '/')
    config.endpoint_url.pop_back();
  if (!ValidBucket(config.bucket)) {
    return InvalidArgument(
        "bucket: \"" + config.bucket +
        "\" is not an S3 bucket name (3-63 lower-case letters, digits, '.' and '-', "
        "starting and ending with a letter or digit)");
  }
  if (config.region.empty()) config.region = Env("AWS_DEFAULT_REGION");
  if (config.region.empty()) config.region = "us-east-1";
  if (config.access_key.empty() != config.secret_key.empty()) {
    return InvalidArgument(
        "access_key and secret_key: give both or neither (then AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY are read from the environment)");
  }
  if (config.access_key.empty()) {
    config.access_key = Env("AWS_ACCESS_KEY_ID");
    config.secret_key = Env("AWS_SECRET_ACCESS_KEY");
    if (config.access_key.empty() || config.secret_key.empty()) {
      return InvalidArgument(
          "access_key: none in the config and " +
          std::string(config.access_key.empty() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY") +
          " is not set in the environment");
    }
  }
  if (config.part_bytes < (5 << 20))
    return InvalidArgument("part_bytes: S3's smallest part is 5 MiB");
  if (config.parallel_parts < 1) config.parallel_parts = 1;
  return S3Client(std::move(config));
}

std::string S3Client::Url(const std::string& key) const {
  return "s3://" + config_.bucket + "/" + key;
}

Status S3Client::CheckBucket() const {
  Request r;
  r.method = "HEAD";
  Response a = Perform(config_, r);
  return Ok(a) ? Status::Ok() : Failure(config_, "checking bucket", "", a);
}

Status S3Client::CreateBucket() const {
  Request r;
  r.method = "PUT";
  Response a = Perform(config_, r);
  if (Ok(a)) return Status::Ok();
  XmlDoc doc(a.body);
  if (Named(doc.root(), "Error") && Text(Child(doc.root(), "Code")) == "BucketAlreadyOwnedByYou")
    return Status::Ok();
  return Failure(config_, "creating bucket", "", a);
}

Status S3Client::Put(const std::string& key, std::string_view data) const {
  Request r;
  r.method = "PUT";
  r.key = key;
  r.body = data;
  Response a = Perform(config_, r);
  return Ok(a) ? Status::Ok() : Failure(config_, "uploading", key, a);
}

Status S3Client::Upload(const std::string& key, const std::string& path) const {
  std::error_code ec;
  const auto file_size = std::filesystem::file_size(path, ec);
  if (ec) return NotFound("uploading " + Url(key) + ": cannot open " + path + " (" + ec.message() + ")");
  const int64_t size = static_cast<int64_t>(file_size);
  if (size <= config_.part_bytes) {
    SF_ASSIGN_OR_RETURN(std::string data, ReadRange(path, 0, size));
    return Put(key, data);
  }
  // Multipart: start, parts in parallel, complete (or abort, so nothing half-written remains).
  Request start;
  start.method = "POST";
  start.key = key;
  start.query = "uploads=";
  Response started = Perform(config_, start);
  if (!Ok(started)) return Failure(config_, "starting the multipart upload of", key, started);
  XmlDoc started_doc(started.body);
  const std::string upload_id = Text(Child(started_doc.root(), "UploadId"));
  if (upload_id.empty())
    return Internal("uploading " + Url(key) + ": the server named no upload id");
  const int parts = static_cast<int>((size + config_.part_bytes - 1) / config_.part_bytes);
  std::vector<std::string> etags(parts);
  std::atomic<int> next{0};
  std::mutex failed_mu;
  Status failed = Status::Ok();
  auto worker = [&] {
    for (int i = next++; i < parts; i = next++) {
      {
        std::lock_guard<std::mutex> lock(failed_mu);
        if (!failed.ok()) return;
      }
      const int64_t offset = static_cast<int64_t>(i) * config_.part_bytes;
      auto data = ReadRange(path, offset, std::min(config_.part_bytes, size - offset));
      Status st = data.status();
      if (st.ok()) {
        Request part;
        part.method = "PUT";
        part.key = key;
        part.query =
            "partNumber=" + std::to_string(i + 1) + "&uploadId=" + Encode(upload_id, false);
        part.body = *data;
        Response a = Perform(config_, part);
        if (Ok(a) && !a.headers["etag"].empty()) {
          etags[i] = a.headers["etag"];
          continue;
        }
        st = Ok(a) ? Internal("uploading part " + std::to_string(i + 1) + " of " + Url(key) +
                              ": no ETag came back")
                   : Failure(config_, "uploading part " + std::to_string(i + 1) + " of", key, a);
      }
      std::lock_guard<std::mutex> lock(failed_mu);
      if (failed.ok()) failed = st;
      return;
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::min(config_.parallel_parts, parts); ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  Request finish;
  finish.key = key;
  finish.query = "uploadId=" + Encode(upload_id, false);
  if (failed.ok()) {
    std::string xml = "<CompleteMultipartUpload>";
    for (int i = 0; i < parts; ++i) {
      xml += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" + etags[i] +
             "</ETag></Part>";
    }
    xml += "</CompleteMultipartUpload>";
    finish.method = "POST";
    finish.body = xml;
    Response done = Perform(config_, finish);
    // A 200 may still carry an <Error> (S3 answers before it has assembled the parts).
    XmlDoc done_doc(done.body);
    if (Ok(done) && !Named(done_doc.root(), "Error")) return Status::Ok();
    failed = Failure(config_, "completing the multipart upload of", key, done);
  }
  Request abort = finish;
  abort.method = "DELETE";
  abort.body = {};
  (void)Perform(config_, abort);
  return failed;
}

Result<std::string> S3Client::Get(const std::string& key) const {
  Request r;
  r.key = key;
  Response a = Perform(config_, r);
  if (!Ok(a)) return Failure(config_, "downloading", key, a);
  return std::move(a.body);
}

Status S3Client::Download(const std::string& key, const std::string& path) const {
  const std::string partial = path + ".partial";
  std::FILE* f = std::fopen(partial.c_str(), "wb");
  if (!f) return Internal("downloading " + Url(key) + ": cannot write " + partial);
  Request r;
  r.key = key;
  r.sink = f;
  Response a = Perform(config_, r);
  const bool closed = std::fclose(f) == 0;
  if (!Ok(a) || !closed) {
    std::remove(partial.c_str());
    if (!closed) return Internal("downloading " + Url(key) + ": cannot write " + partial);
    return Failure(config_, "downloading", key,
                   a);  // a 4xx's XML went to the file: the code is from the status
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    std::remove(partial.c_str());
    return Internal("downloading " + Url(key) + ": cannot rename " + partial + " to " + path);
  }
  return Status::Ok();
}

Result<std::vector<S3Object>> S3Client::List(const std::string& prefix) const {
  std::vector<S3Object> out;
  std::string token;
  while (true) {
    Request r;
    r.query = (token.empty() ? "" : "continuation-token=" + Encode(token, false) + "&") +
              "list-type=2&max-keys=" + std::to_string(config_.list_page_keys) +
              "&prefix=" + Encode(prefix, false);
    Response a = Perform(config_, r);
    if (!Ok(a))
      return Failure(
          config_,
          "listing " + (prefix.empty() ? std::string("all keys of") : "\"" + prefix + "\" in"), "",
          a);
    XmlDoc doc(a.body);
    xmlNodePtr root = doc.root();
    if (!Named(root, "ListBucketResult")) {
      return Internal("listing s3://" + config_.bucket + ": the answer is not a ListBucketResult");
    }
    for (xmlNodePtr c = root->children; c; c = c->next) {
      if (!Named(c, "Contents")) continue;
      S3Object o;
      o.key = Text(Child(c, "Key"));
      o.size = std::strtoll(Text(Child(c, "Size")).c_str(), nullptr, 10);
      o.etag = Text(Child(c, "ETag"));
      out.push_back(std::move(o));
    }
    if (Text(Child(root, "IsTruncated")) != "true") break;
    token = Text(Child(root, "NextContinuationToken"));
    if (token.empty())
      return Internal("listing s3://" + config_.bucket +
                      ": truncated without a continuation token");
  }
  return out;
}

Status S3Client::Delete(const std::string& key) const {
  Request r;
  r.method = "DELETE";
  r.key = key;
  Response a = Perform(config_, r);
  if (Ok(a) || a.status == 404) return Status::Ok();
  return Failure(config_, "deleting", key, a);
}

Result<std::pair<std::string, std::string>> ParseS3Url(const std::string& url) {
  if (url.rfind("s3://", 0) != 0) return InvalidArgument("\"" + url + "\" is not an s3:// URL");
  const std::string rest = url.substr(5);
  const size_t slash = rest.find('/');
  std::string bucket = rest.substr(0, slash);
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (!ValidBucket(bucket))
    return InvalidArgument("\"" + url + "\": \"" + bucket + "\" is not an S3 bucket name");
  return std::make_pair(std::move(bucket), std::move(prefix));
}

}  // namespace sf::storage
