// ringcast/remote/security.hpp — where a remote listener binds, and libzmq's CURVE for untrusted networks.
//
// A listener binds exactly the address it is given: a literal IPv4 or IPv6 address (hostnames and
// ZeroMQ's "*" are refused, so nothing listens on an interface nobody named). "0.0.0.0" / "::" (every
// interface) work only because the caller wrote them. Port 0 picks an ephemeral port; endpoint()
// reports the one the kernel chose.
//
// CURVE (libzmq's CurveZMQ: Curve25519 key exchange, every frame encrypted and authenticated):
//   * server_secret_key on the listener, server_public_key on every connecting peer: the peer talks
//     only to the holder of that secret, and nobody on the path reads or alters the frames;
//   * allowed_client_keys on the listener (non-empty): a peer whose public key is not listed is
//     refused during the handshake (a ZAP handler inside the listener's thread).
// Keys are Z85 text (40 characters), made by curve_keypair().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ringcast::remote {

struct CurveKeypair {
    std::string public_key;  // Z85, 40 characters
    std::string secret_key;  // Z85, 40 characters: keep it private
};

// A fresh keypair. Throws Error(invalid_argument) if this libzmq was built without CURVE.
[[nodiscard]] CurveKeypair curve_keypair();
// The public key of a Z85 secret key. Throws Error(invalid_argument) for a malformed key.
[[nodiscard]] std::string curve_public_key(std::string_view secret_key);
// Whether this libzmq supports CURVE (built with libsodium).
[[nodiscard]] bool curve_available() noexcept;

// The listener side (RemotePublisher, RemoteReplyBridge).
struct ListenOptions {
    // The local address to listen on: a literal IPv4 or IPv6 address (required).
    std::string ip;
    std::uint16_t port = 0;  // 0: an ephemeral port, reported by endpoint()
    // Non-empty: CURVE server with this Z85 secret key (peers need its public key).
    std::string curve_secret_key;
    // With CURVE: the Z85 public keys of the peers allowed in; empty: any peer that knows the
    // server's public key (encryption and server authentication, no client authentication).
    std::vector<std::string> curve_allowed_clients;
};

// The connecting side (RemoteReader, RemoteGatherWorker).
struct ConnectSecurity {
    std::string curve_server_key;  // the listener's Z85 public key; empty: plain TCP
    std::string curve_public_key;  // this peer's keypair; empty: a fresh one is made
    std::string curve_secret_key;
};

// "tcp://<ip>:<port or *>" for a literal address; Throws Error(invalid_argument) naming the problem.
// `ipv6` is set for an IPv6 address (the socket needs ZMQ_IPV6).
[[nodiscard]] std::string bind_endpoint(std::string_view ip, std::uint16_t port, bool& ipv6);

}  // namespace ringcast::remote
