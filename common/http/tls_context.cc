#include "common/http/tls_context.h"

#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

namespace sf::http {
namespace asio = boost::asio;
namespace ssl = asio::ssl;

namespace {

void TlsTwelveOrNewer(ssl::context& context) {
  context.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(context.native_handle(), TLS1_2_VERSION);
}

}  // namespace

bool IsIpAddress(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

Result<std::unique_ptr<ssl::context>> ServerTlsContext(const ServerCertificate& cert, const PeerIdentity* clients) {
  try {
    auto context = std::make_unique<ssl::context>(ssl::context::tls_server);
    TlsTwelveOrNewer(*context);
    context->use_certificate_chain(asio::buffer(cert.cert_chain_pem));
    context->use_private_key(asio::buffer(cert.private_key_pem), ssl::context::pem);
    if (clients) {
      context->add_certificate_authority(asio::buffer(clients->ca_pem));
      context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
      const std::string uri = clients->uri;
      context->set_verify_callback([uri](bool preverified, ssl::verify_context& verify) {
        if (!preverified) return false;
        if (X509_STORE_CTX_get_error_depth(verify.native_handle()) > 0) return true;
        return CertificateHasUri(X509_STORE_CTX_get_current_cert(verify.native_handle()), uri);
      });
    }
    return context;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("TLS: cannot use the certificate and key: ") + e.what());
  }
}

Result<std::unique_ptr<ssl::context>> ClientTlsContextFor(const PeerIdentity& server, const ServerCertificate& own) {
  try {
    auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
    TlsTwelveOrNewer(*context);
    context->add_certificate_authority(asio::buffer(server.ca_pem));
    if (!own.cert_chain_pem.empty()) {
      context->use_certificate_chain(asio::buffer(own.cert_chain_pem));
      context->use_private_key(asio::buffer(own.private_key_pem), ssl::context::pem);
    }
    context->set_verify_mode(ssl::verify_peer);
    return context;
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("TLS: cannot use the CA or the client certificate: ") + e.what());
  }
}

bool CertificateHasUri(X509* cert, const std::string& uri) {
  if (!cert) return false;
  auto* names = static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (!names) return false;
  bool found = false;
  for (int i = 0; i < sk_GENERAL_NAME_num(names) && !found; ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type != GEN_URI) continue;
    const ASN1_IA5STRING* value = name->d.uniformResourceIdentifier;
    found = static_cast<size_t>(ASN1_STRING_length(value)) == uri.size() &&
            uri.compare(0, uri.size(), reinterpret_cast<const char*>(ASN1_STRING_get0_data(value)), uri.size()) == 0;
  }
  GENERAL_NAMES_free(names);
  return found;
}

Result<std::unique_ptr<ssl::context>> ClientTlsContext(const std::string& ca_file, const std::string& what) {
  auto context = std::make_unique<ssl::context>(ssl::context::tls_client);
  TlsTwelveOrNewer(*context);
  boost::system::error_code ec;
  if (ca_file.empty()) {
    context->set_default_verify_paths(ec);
    if (ec) return Unavailable("cannot load the system's CA certificates: " + ec.message());
  } else {
    SF_ASSIGN_OR_RETURN(std::string ca, LoadCaCertificates(ca_file, what));
    context->add_certificate_authority(asio::buffer(ca), ec);
    if (ec) return InvalidArgument(what + " " + ca_file + ": " + ec.message());
  }
  context->set_verify_mode(ssl::verify_peer);
  return context;
}

std::string ClientTlsFailure(SSL* ssl, bool host_mismatch, const std::string& host, const std::string& whose) {
  if (host_mismatch) return "certificate verify failed: " + whose + " is not for " + host;
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) return std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify);
  return "";
}

}  // namespace sf::http
