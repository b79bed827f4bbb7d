#include "ringcast/remote/security.hpp"

#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <zmq.h>

#include "ringcast/error.hpp"
#include "zmq_util.hpp"

namespace ringcast::remote {

bool curve_available() noexcept { return zmq_has("curve") != 0; }

CurveKeypair curve_keypair() {
    if (!curve_available())
        throw Error(ErrorCode::invalid_argument, "CURVE requested, but this libzmq was built without it (no libsodium)");
    std::array<char, 41> pub{}, sec{};
    if (zmq_curve_keypair(pub.data(), sec.data()) != 0) throw_system_error("zmq_curve_keypair", zmq_errno());
    return {pub.data(), sec.data()};
}

std::string curve_public_key(std::string_view secret_key) {
    if (!curve_available())
        throw Error(ErrorCode::invalid_argument, "CURVE requested, but this libzmq was built without it (no libsodium)");
    if (secret_key.size() != 40)
        throw Error(ErrorCode::invalid_argument, "a CURVE secret key is 40 characters of Z85, got " +
                                                     std::to_string(secret_key.size()) + " characters");
    const std::string sec(secret_key);
    std::array<char, 41> pub{};
    if (zmq_curve_public(pub.data(), sec.c_str()) != 0)
        throw Error(ErrorCode::invalid_argument, "not a Z85 CURVE secret key (zmq_curve_public refused it)");
    return pub.data();
}

std::string bind_endpoint(std::string_view ip, std::uint16_t port, bool& ipv6) {
    std::string addr(ip);
    if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
    std::array<unsigned char, 16> buf{};
    const std::string port_text = port == 0 ? "*" : std::to_string(port);  // "*": ZeroMQ picks an ephemeral port
    if (::inet_pton(AF_INET, addr.c_str(), buf.data()) == 1) {
        ipv6 = false;
        return "tcp://" + addr + ":" + port_text;
    }
    if (::inet_pton(AF_INET6, addr.c_str(), buf.data()) == 1) {
        ipv6 = true;
        return "tcp://[" + addr + "]:" + port_text;
    }
    throw Error(ErrorCode::invalid_argument,
                "remote listener: '" + std::string(ip) +
                    "' is not a literal IPv4/IPv6 address; give the address of the interface to listen on "
                    "(hostnames and '*' are refused so that nothing listens where nobody asked; '0.0.0.0' or '::' "
                    "means every interface)");
}

}  // namespace ringcast::remote

namespace ringcast::remote::detail {

void throw_zmq(const char* what, const zmq::error_t& e) {
    throw Error(ErrorCode::system, std::string(what) + ": " + e.what() + " (zmq errno " + std::to_string(e.num()) + ")");
}

namespace {
void require_key(const std::string& key, const char* which) {
    if (key.size() != 40)
        throw Error(ErrorCode::invalid_argument, std::string("CURVE ") + which + " must be 40 characters of Z85, got " +
                                                     std::to_string(key.size()));
    std::array<std::uint8_t, 32> raw{};
    if (zmq_z85_decode(raw.data(), key.c_str()) == nullptr)
        throw Error(ErrorCode::invalid_argument, std::string("CURVE ") + which + " is not valid Z85");
}
}  // namespace

std::string bind_listener(zmq::socket_t& socket, const ListenOptions& listen) {
    bool ipv6 = false;
    const std::string ep = bind_endpoint(listen.ip, listen.port, ipv6);
    try {
        if (ipv6) socket.set(zmq::sockopt::ipv6, 1);
        if (!listen.curve_secret_key.empty()) {
            require_key(listen.curve_secret_key, "secret key");
            if (!curve_available())
                throw Error(ErrorCode::invalid_argument, "CURVE requested, but this libzmq was built without it");
            socket.set(zmq::sockopt::curve_server, 1);
            socket.set(zmq::sockopt::curve_secretkey, listen.curve_secret_key);
            for (const auto& k : listen.curve_allowed_clients) require_key(k, "allowed client key");
        } else if (!listen.curve_allowed_clients.empty()) {
            throw Error(ErrorCode::invalid_argument, "curve_allowed_clients given without curve_secret_key");
        }
        socket.bind(ep);
        return socket.get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
        throw Error(e.num() == EADDRINUSE ? ErrorCode::already_exists
                    : e.num() == EACCES   ? ErrorCode::permission_denied
                                          : ErrorCode::system,
                    "remote listener: cannot bind " + ep + ": " + e.what());
    }
}

void configure_connector(zmq::socket_t& socket, std::string_view endpoint, const ConnectSecurity& security) {
    if (endpoint.rfind("tcp://", 0) != 0 && endpoint.rfind("ipc://", 0) != 0)
        throw Error(ErrorCode::invalid_argument,
                    "remote endpoint '" + std::string(endpoint) + "' is not tcp://ADDRESS:PORT (as the publisher's endpoint() reports)");
    // ZeroMQ takes a port it cannot use (99999, "x") and connects to nothing: the peer looked gone only
    // after the liveness interval ("host gone"). The form is judged here; whether the host answers is not.
    if (endpoint.rfind("tcp://", 0) == 0) {
        const std::string_view rest = endpoint.substr(6);
        const std::size_t colon = rest.rfind(':');
        const std::string_view host = colon == std::string_view::npos ? std::string_view{} : rest.substr(0, colon);
        const std::string_view port = colon == std::string_view::npos ? std::string_view{} : rest.substr(colon + 1);
        unsigned long value = 0;
        bool digits = !port.empty() && port.size() <= 5;
        for (const char c : port) {
            digits = digits && c >= '0' && c <= '9';
            value = value * 10 + static_cast<unsigned long>(c - '0');
        }
        if (host.empty() || host == "[]" || !digits || value < 1 || value > 65535)
            throw Error(ErrorCode::invalid_argument,
                        "remote endpoint '" + std::string(endpoint) +
                            "' is not tcp://ADDRESS:PORT with a port of 1..65535 (as the publisher's endpoint() reports)");
    }
    if (endpoint.find('[') != std::string_view::npos) socket.set(zmq::sockopt::ipv6, 1);
    if (security.curve_server_key.empty()) return;
    require_key(security.curve_server_key, "server key");
    CurveKeypair own{security.curve_public_key, security.curve_secret_key};
    if (own.public_key.empty() != own.secret_key.empty())
        throw Error(ErrorCode::invalid_argument, "CURVE: give both the public and the secret key of this peer, or neither");
    if (own.public_key.empty()) own = curve_keypair();
    require_key(own.public_key, "public key");
    require_key(own.secret_key, "secret key");
    socket.set(zmq::sockopt::curve_serverkey, security.curve_server_key);
    socket.set(zmq::sockopt::curve_publickey, own.public_key);
    socket.set(zmq::sockopt::curve_secretkey, own.secret_key);
}

void set_keepalive(zmq::socket_t& socket, std::chrono::nanoseconds timeout, bool user_timeout) {
    const long total = std::max<long>(3, static_cast<long>(std::chrono::ceil<std::chrono::seconds>(timeout).count()));
    socket.set(zmq::sockopt::tcp_keepalive, 1);
    socket.set(zmq::sockopt::tcp_keepalive_idle, static_cast<int>(std::max<long>(1, total / 2)));
    socket.set(zmq::sockopt::tcp_keepalive_intvl, static_cast<int>(std::max<long>(1, total / 6)));
    socket.set(zmq::sockopt::tcp_keepalive_cnt, 3);
    // Keepalive probes are only sent on an idle connection; one that carries heartbeats or data
    // to a vanished host has unacknowledged bytes instead, and the kernel retransmits for ~15
    // minutes (tcp_retries2) before giving up. TCP_USER_TIMEOUT (ZMQ_TCP_MAXRT on Linux) drops it
    // once data stayed unacknowledged for `total` — but also a peer stopped behind a zero window
    // (measured on Linux 6.18: a SIGSTOPped remote reader was dropped), so only where that is
    // right: the reply bridge (it sends a worker frames only while the worker calls in and reads
    // them — reply.cpp, heartbeats() — so a zero window there is a worker host gone, not an idle
    // worker), not the publisher (`block` must hold a stopped reader).
    if (user_timeout) socket.set(zmq::sockopt::tcp_maxrt, static_cast<int>(total * 1000));
}

SendResult route(zmq::socket_t& router, std::string_view routing_id, const wire::Header& h, zmq::message_t* body) {
    try {
        zmq::message_t id(routing_id.data(), routing_id.size());
        // ROUTER_MANDATORY: the routing-id frame fails (nothing is sent) with EAGAIN when this peer's
        // queue is at its high-water mark, EHOSTUNREACH when no such peer is connected. Once it
        // passed, the rest of the message is queued whole (ZeroMQ counts whole messages).
        if (!router.send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return SendResult::full;
        zmq::message_t head = header_frame(h);
        if (body == nullptr) {
            (void)router.send(head, zmq::send_flags::dontwait);
            return SendResult::sent;
        }
        (void)router.send(head, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        zmq::message_t shared;
        shared.copy(*body);  // reference-counted: every reader's copy points at the same bytes
        (void)router.send(shared, zmq::send_flags::dontwait);
        return SendResult::sent;
    } catch (const zmq::error_t& e) {
        if (e.num() == EHOSTUNREACH) return SendResult::unreachable;
        throw_zmq("zmq_send (ROUTER)", e);
    }
}

bool receive(zmq::socket_t& socket, bool from_router, Received& out) {
    out = Received{};
    std::vector<zmq::message_t> parts;
    try {
        zmq::message_t part;
        if (!socket.recv(part, zmq::recv_flags::dontwait)) return false;
        // A multipart message arrives whole: the remaining parts are already here.
        bool more = part.more();
        parts.push_back(std::move(part));
        while (more) {
            zmq::message_t next;
            (void)socket.recv(next, zmq::recv_flags::none);
            more = next.more();
            parts.push_back(std::move(next));
        }
    } catch (const zmq::error_t& e) {
        throw_zmq("zmq_recv", e);
    }
    std::size_t i = 0;
    if (from_router) {
        if (parts.size() < 2) return true;
        out.routing_id = parts[0].to_string();
        i = 1;
        try {
            out.fd = parts[1].get(ZMQ_SRCFD);
        } catch (const zmq::error_t&) {
            out.fd = -1;  // (not a TCP connection)
        }
    }
    if (parts.size() - i < 1 || parts.size() - i > 2) return true;
    const auto h = wire::parse({static_cast<const std::byte*>(parts[i].data()), parts[i].size()});
    if (!h) return true;
    out.header = *h;
    if (parts.size() - i == 2) out.body = std::move(parts[i + 1]);
    out.valid = true;
    return true;
}

void answer_zap(zmq::socket_t& zap, const std::vector<std::string>& allowed_z85) {
    for (;;) {
        std::vector<zmq::message_t> req;
        zmq::message_t part;
        if (!zap.recv(part, zmq::recv_flags::dontwait)) return;
        bool more = part.more();
        req.push_back(std::move(part));
        while (more) {
            zmq::message_t next;
            (void)zap.recv(next, zmq::recv_flags::none);
            more = next.more();
            req.push_back(std::move(next));
        }
        // ZAP 1.0 request: version, request id, domain, address, identity, mechanism, credentials...
        bool ok = false;
        if (req.size() >= 7 && req[5].to_string() == "CURVE" && req[6].size() == 32) {
            std::array<char, 41> z85{};
            if (zmq_z85_encode(z85.data(), static_cast<const std::uint8_t*>(req[6].data()), 32) != nullptr)
                for (const auto& k : allowed_z85) ok = ok || k == z85.data();
        }
        const std::string request_id = req.size() >= 2 ? req[1].to_string() : std::string();
        const char* status = ok ? "200" : "400";
        const char* text = ok ? "OK" : "client key not allowed";
        zap.send(zmq::buffer(std::string_view("1.0")), zmq::send_flags::sndmore);
        zap.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
        zap.send(zmq::buffer(std::string_view(status)), zmq::send_flags::sndmore);
        zap.send(zmq::buffer(std::string_view(text)), zmq::send_flags::sndmore);
        zap.send(zmq::buffer(std::string_view("")), zmq::send_flags::sndmore);
        zap.send(zmq::buffer(std::string_view("")), zmq::send_flags::none);
    }
}

long poll_ms(std::optional<Clock::time_point> deadline) {
    if (!deadline) return -1;
    const auto left = *deadline - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    return static_cast<long>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

void poll(std::vector<zmq::pollitem_t>& items, long ms, const char* what) {
    try {
        (void)zmq::poll(items, std::chrono::milliseconds(ms));
    } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw_zmq(what, e);
    }
}

}  // namespace ringcast::remote::detail
