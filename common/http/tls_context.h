// The TLS settings every HTTP end of Steadfast uses (common/http/server.h, common/http/client.h),
// in one place: TLS 1.2 or newer, both ways.
//
// A client verifies the server's certificate chain against the CA certificates of `ca_file`
// (PEM; the system's trusted CAs when empty) and the host name of its URL (subject alternative
// names; SNI is sent for names, not addresses). ClientTlsFailure says, for a person, why a
// handshake failed: the certificate problem OpenSSL found, or the handshake's own error.
//
// Between the master's proxy and a task's service (master/auth/task_certificates.h) both ends
// prove an identity instead: a PeerIdentity is a CA (PEM text) and the URI the peer's leaf
// certificate must carry as a subject alternative name. A server given one requires a client
// certificate chained to that CA, fit for client use (OpenSSL's purpose check: extended key
// usage clientAuth), and naming that URI; a client given one verifies the server's chain
// against that CA and that its leaf names the URI, instead of the host name.
#pragma once

#include <boost/asio/ssl.hpp>

#include <memory>
#include <string>

#include "common/status.h"
#include "common/tls_files.h"

namespace sf::http {

struct PeerIdentity {
  std::string ca_pem;
  std::string uri;  // e.g. "urn:steadfast:master"
};

// The server side with `cert`'s chain and key; with `clients`, only clients that prove that
// identity complete a handshake. InvalidArgument when they cannot be used.
Result<std::unique_ptr<boost::asio::ssl::context>> ServerTlsContext(const ServerCertificate& cert,
                                                                    const PeerIdentity* clients = nullptr);

// The client side for a server that must prove `server`, presenting `own` (a chain and key) when
// it is not empty.
Result<std::unique_ptr<boost::asio::ssl::context>> ClientTlsContextFor(const PeerIdentity& server,
                                                                       const ServerCertificate& own);

// Whether `cert` carries `uri` as a URI subject alternative name.
bool CertificateHasUri(X509* cert, const std::string& uri);

// Sets up a client stream, before its handshake, to accept only a leaf naming `uri`; a chain
// that verifies but names another sets *mismatch.
template <class SslStream>
void VerifyIdentity(SslStream& stream, const std::string& uri, bool* mismatch) {
  stream.set_verify_callback([uri, mismatch](bool preverified, boost::asio::ssl::verify_context& verify) {
    if (!preverified) return false;
    if (X509_STORE_CTX_get_error_depth(verify.native_handle()) > 0) return true;
    const bool ok = CertificateHasUri(X509_STORE_CTX_get_current_cert(verify.native_handle()), uri);
    if (!ok) *mismatch = true;
    return ok;
  });
}

// The client side, verifying peers against `ca_file` (empty: the system's CAs). `what` names the
// file in errors ("CA file", "webhook CA file").
Result<std::unique_ptr<boost::asio::ssl::context>> ClientTlsContext(const std::string& ca_file,
                                                                    const std::string& what);

// Sets up `ssl` (a client stream's native handle, before its handshake) for `host`: SNI for a
// name, and host-name verification whose failure sets *host_mismatch. False when SNI cannot be
// set.
template <class SslStream>
bool VerifyHost(SslStream& stream, const std::string& host, bool* host_mismatch);

// Why a client's handshake failed: "certificate verify failed: <OpenSSL's reason>" (or "...:
// <whose> is not for HOST" on a host mismatch), else empty (the handshake's own error is the
// reason).
std::string ClientTlsFailure(SSL* ssl, bool host_mismatch, const std::string& host,
                             const std::string& whose = "the certificate");

bool IsIpAddress(const std::string& host);

template <class SslStream>
bool VerifyHost(SslStream& stream, const std::string& host, bool* host_mismatch) {
  if (!IsIpAddress(host) && !SSL_set_tlsext_host_name(stream.native_handle(), host.c_str())) return false;
  stream.set_verify_callback([host, host_mismatch](bool preverified, boost::asio::ssl::verify_context& verify) {
    const bool ok = boost::asio::ssl::host_name_verification(host)(preverified, verify);
    if (preverified && !ok) *host_mismatch = true;
    return ok;
  });
  return true;
}

}  // namespace sf::http
