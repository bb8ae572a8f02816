// Errors as values.
//
// A Status is either OK or carries a code and a message that names the cause ("file
// /x/train.de: line 12: invalid UTF-8"). Result<T> holds either a T or a non-OK Status.
// Expected failures (bad input, missing files, lost peers) travel as these values;
// exceptions are kept for the truly exceptional and never cross a thread or RPC boundary.
//
// Both types are cheap to move, safe to copy, and not thread-safe for concurrent mutation
// (like any value type).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace sf {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // bad input: config, request, data file
  kNotFound,           // a named thing does not exist
  kAlreadyExists,
  kFailedPrecondition, // illegal state transition, incompatible checkpoint
  kDataLoss,           // corrupt file, checksum mismatch
  kUnavailable,        // peer or service not reachable (retry may help)
  kInternal,           // a bug or an unexpected system error
  kOutOfRange,
  kResourceExhausted,
  kCancelled,
  kUnauthenticated,    // no credentials, or credentials that are not valid (HTTP 401)
  kPermissionDenied,   // valid credentials that do not allow the action (HTTP 403)
};

// Returns a stable lower-case name for a code ("invalid_argument").
const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "invalid_argument: <message>", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>" (OK stays OK).
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status ResourceExhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }

// Either a value or a non-OK Status. Accessing value() of an error is a programming error
// (asserted in debug builds).
template <typename T>
class Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {  // NOLINT: implicit by design
    assert(!std::get<Status>(data_).ok() && "Result built from an OK status");
  }

  bool ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return ok(); }

  // The error; OK when this holds a value.
  Status status() const { return ok() ? Status() : std::get<Status>(data_); }

  T& value() & { assert(ok()); return std::get<T>(data_); }
  const T& value() const& { assert(ok()); return std::get<T>(data_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace sf

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define SF_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::sf::Status sf_status_ = (expr);       \
    if (!sf_status_.ok()) return sf_status_; \
  } while (0)

#define SF_CONCAT_INNER_(a, b) a##b
#define SF_CONCAT_(a, b) SF_CONCAT_INNER_(a, b)
// SF_ASSIGN_OR_RETURN(auto x, MakeX()); returns the error when MakeX() fails.
#define SF_ASSIGN_OR_RETURN(lhs, expr)                                 \
  auto SF_CONCAT_(sf_result_, __LINE__) = (expr);                      \
  if (!SF_CONCAT_(sf_result_, __LINE__).ok())                          \
    return SF_CONCAT_(sf_result_, __LINE__).status();                  \
  lhs = std::move(SF_CONCAT_(sf_result_, __LINE__)).value()
