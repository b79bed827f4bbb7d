// A remote reader rank (reader.hpp): a DEALER socket and the sequence check that makes loss visible.
#include "ringcast/remote/reader.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <optional>
#include <random>

#include "zmq_util.hpp"

namespace ringcast::remote {

using detail::Clock;

struct RemoteReader::State {
    ringcast::detail::MadeInProcess made_in;  // a fork()ed child's copy is let go (let_go_in_forked_child)
    RemoteReaderOptions options;
    std::string endpoint;
    std::uint32_t rank = 0;
    std::uint64_t nonce = 0;
    zmq::context_t context;
    zmq::socket_t socket;
    // cancel(): set the flag, then write the eventfd the waits poll beside the socket. A wait checks
    // the flag after arming its poll on the fd, so a cancel between the check and the poll is not
    // lost: the fd stays readable until clear_cancel() drains it.
    int cancel_fd = -1;
    std::atomic<bool> cancelled{false};

    bool welcomed = false;
    std::uint64_t expected = 0;    // seq of the next data message
    std::uint64_t received = 0;
    Clock::time_point last_heard;  // when the last frame was taken from the socket
    Clock::time_point last_hello{};
    bool closed = false;
    std::optional<Error> sticky;   // fell_behind / peer_dead: every later call throws it again
    bool has_pending = false;
    zmq::message_t pending;
    std::uint64_t pending_tag = 0;

    ~State() {
        if (cancel_fd >= 0) ::close(cancel_fd);
    }
    void send_control(wire::Kind kind);
    // Takes frames until a data message is pending, the queue is closed, or `deadline`. Returns the
    // status of the wait; throws the errors of reader.hpp.
    [[nodiscard]] Status pump(std::optional<Clock::time_point> deadline, bool until_welcome);
    void apply(detail::Received& r);
    // With CURVE a refused handshake looks like silence from here: libzmq drops the connection and
    // retries without telling the socket's user, so a reader with a key the publisher does not allow
    // (or a wrong server key) sees exactly what a dead host gives. Name that cause too.
    [[nodiscard]] std::string curve_hint() const {
        if (options.security.curve_server_key.empty()) return {};
        return "; or the CURVE handshake was refused: this reader's public key is not in the publisher's "
               "curve_allowed_clients, or the server key it was given is not the publisher's";
    }
    [[noreturn]] void fail(ErrorCode code, const std::string& what) {
        sticky.emplace(code, what);
        throw *sticky;
    }
};

void RemoteReader::State::send_control(wire::Kind kind) {
    const wire::Header h{.kind = kind, .tag = nonce, .value = rank};
    zmq::message_t m = detail::header_frame(h);
    try {
        (void)socket.send(m, zmq::send_flags::dontwait);  // queued until connected; dropped only if 1000 are queued
    } catch (const zmq::error_t& e) {
        detail::throw_zmq("remote reader: zmq_send", e);
    }
    if (kind == wire::Kind::hello) last_hello = Clock::now();
}

void RemoteReader::State::apply(detail::Received& r) {
    if (!r.valid)
        fail(ErrorCode::corrupt, "remote reader rank " + std::to_string(rank) + ": " + endpoint +
                                     " sent a frame that is not ringcast's remote protocol (version " +
                                     std::to_string(wire::kVersion) + ")");
    last_heard = Clock::now();
    const auto& h = r.header;
    const std::string where = "remote reader rank " + std::to_string(rank) + " of " + endpoint;
    switch (h.kind) {
        case wire::Kind::welcome:
            if (welcomed) return;
            welcomed = true;
            if ((h.flags & wire::kJoinedLate) != 0 || h.seq != expected)
                fail(ErrorCode::fell_behind, where + " joined after " + std::to_string(h.seq) +
                                                 " messages had been sent; it cannot receive them");
            return;
        case wire::Kind::data:
            if (!welcomed) return;  // a previous process's traffic for this rank
            if (h.seq != expected)
                fail(ErrorCode::fell_behind, where + " fell behind: expected message " + std::to_string(expected) +
                                                 ", got " + std::to_string(h.seq) +
                                                 " (the messages between were not delivered to it)");
            if (r.body.size() != h.value)
                fail(ErrorCode::corrupt, where + ": message " + std::to_string(h.seq) + " announced " +
                                             std::to_string(h.value) + " bytes, carried " + std::to_string(r.body.size()));
            ++expected;
            ++received;
            pending = std::move(r.body);
            pending_tag = h.tag;
            has_pending = true;
            return;
        case wire::Kind::heartbeat:
            if (!welcomed) return;
            if ((h.flags & wire::kCutOff) != 0)
                fail(ErrorCode::fell_behind, where + " fell behind: the publisher cut it off at message " +
                                                 std::to_string(h.seq) + " (its queue stayed at the high-water mark "
                                                 "longer than the publisher's slow_reader_timeout)");
            if (h.seq > expected)
                fail(ErrorCode::fell_behind, where + " fell behind: messages " + std::to_string(expected) + ".." +
                                                 std::to_string(h.seq - 1) + " were not delivered to it");
            return;
        case wire::Kind::close:
            if (!welcomed || closed) return;
            if (h.seq > expected)
                fail(ErrorCode::fell_behind, where + " fell behind: the queue closed after message " +
                                                 std::to_string(h.seq - 1) + ", it got up to " +
                                                 std::to_string(static_cast<std::int64_t>(expected) - 1));
            closed = true;
            return;
        case wire::Kind::writer_dead: {
            const std::string text = r.body.to_string();
            if ((h.flags & wire::kRefused) != 0) fail(detail::refusal_code(h), where + ": refused by the publisher: " + text);
            if (!welcomed) return;
            if (h.seq > expected)  // what it did get is delivered first; then the death
                fail(ErrorCode::fell_behind, where + " fell behind before its writer ended: messages " +
                                                 std::to_string(expected) + ".." + std::to_string(h.seq - 1) +
                                                 " were not delivered (" + text + ")");
            fail(ErrorCode::peer_dead, where + ": " + (text.empty() ? std::string("the writer died") : text));
        }
        default: return;  // hello / bye / reply are not for readers
    }
}

Status RemoteReader::State::pump(std::optional<Clock::time_point> deadline, bool until_welcome) {
    if (sticky) throw *sticky;
    const auto done = [&] { return until_welcome ? welcomed : (has_pending || closed); };
    std::vector<zmq::pollitem_t> items{{socket.handle(), 0, ZMQ_POLLIN, 0}, {nullptr, cancel_fd, ZMQ_POLLIN, 0}};
    for (;;) {
        detail::Received r;
        while (!done() && detail::receive(socket, false, r)) apply(r);
        if (done()) return Status::ok;
        if (cancelled.load(std::memory_order_acquire)) return Status::cancelled;
        const auto now = Clock::now();
        // Not welcomed yet: say hello again now and then (a connection ZeroMQ had to re-establish
        // loses what was queued on the old one).
        if (!welcomed && now - last_hello >= options.liveness_interval / 4) send_control(wire::Kind::hello);
        // Liveness, counted across calls: the publisher heartbeats every quiet line, so silence for
        // liveness_interval means it (or its host) is gone. Frames that arrived while this reader was
        // busy elsewhere were taken above and refreshed last_heard.
        if (now - last_heard >= options.liveness_interval)
            fail(ErrorCode::peer_dead,
                 "remote reader rank " + std::to_string(rank) + ": nothing from the publisher at " + endpoint +
                     " for " + std::to_string(std::chrono::duration<double>(now - last_heard).count()) +
                     " s (liveness interval " + std::to_string(std::chrono::duration<double>(options.liveness_interval).count()) +
                     " s): it or its host is gone" +
                     (welcomed ? ", or the connection to it dropped for a moment and the publisher gave this reader up "
                                 "(a dropped connection is not resumed; the publisher lists the rank in its "
                                 "stats' lost_ranks)"
                               : " (never answered this reader's hello)" + curve_hint()));
        if (deadline && now >= *deadline) return Status::timed_out;
        auto wake = last_heard + options.liveness_interval;
        if (!welcomed) wake = std::min(wake, last_hello + options.liveness_interval / 4);
        if (deadline) wake = std::min(wake, *deadline);
        detail::poll(items, detail::poll_ms(wake), "remote reader: zmq_poll");
    }
}


RemoteReader RemoteReader::connect(std::string_view endpoint, std::uint32_t rank, const RemoteReaderOptions& options) {
    if (options.high_water_mark < 1) throw Error(ErrorCode::invalid_argument, "remote reader: high_water_mark must be >= 1");
    if (options.liveness_interval <= std::chrono::nanoseconds::zero())
        throw Error(ErrorCode::invalid_argument, "remote reader: liveness_interval must be > 0");
    auto s = std::make_unique<State>();
    s->options = options;
    s->endpoint = std::string(endpoint);
    s->rank = rank;
    s->nonce = std::random_device{}() | (std::uint64_t{std::random_device{}()} << 32) | 1;
    s->cancel_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->cancel_fd < 0) throw_system_error("eventfd", errno);
    try {
        s->socket = zmq::socket_t(s->context, zmq::socket_type::dealer);
        // Its own routing id (per instance, wire.hpp): another instance of the same rank never takes its
        // connection over; the publisher refuses that one instead.
        s->socket.set(zmq::sockopt::routing_id, detail::peer_routing_id("rank", rank, s->nonce));
        s->socket.set(zmq::sockopt::rcvhwm, options.high_water_mark);
        s->socket.set(zmq::sockopt::linger, 500);  // bye may still leave after the object is gone
        detail::set_keepalive(s->socket, std::chrono::seconds(10));
        detail::configure_connector(s->socket, endpoint, options.security);
        s->socket.connect(s->endpoint);
    } catch (const zmq::error_t& e) {
        throw Error(ErrorCode::invalid_argument, "remote reader: cannot connect to '" + s->endpoint + "': " + e.what());
    }
    s->last_heard = Clock::now();
    s->send_control(wire::Kind::hello);
    return RemoteReader(std::move(s));
}

RemoteReader::RemoteReader(std::unique_ptr<State> state) noexcept : state_(std::move(state)) {}
RemoteReader::RemoteReader(RemoteReader&&) noexcept = default;
RemoteReader::~RemoteReader() {
    if (!state_ || detail::let_go_in_forked_child(state_)) return;
    try {
        state_->send_control(wire::Kind::bye);
    } catch (...) {
    }
}

Status RemoteReader::wait_ready(std::chrono::nanoseconds timeout) {
    detail::refuse_in_forked_child(state_, "RemoteReader::wait_ready");
    return state_->pump(detail::deadline_after(timeout), true);
}

Message RemoteReader::peek(std::chrono::nanoseconds timeout) {
    detail::refuse_in_forked_child(state_, "RemoteReader::peek");
    auto& s = *state_;
    if (s.has_pending)
        return Message{Status::ok, {static_cast<const std::byte*>(s.pending.data()), s.pending.size()}, s.pending_tag};
    const Status st = s.pump(detail::deadline_after(timeout), false);
    if (st != Status::ok) return Message{st, {}, 0};
    if (!s.has_pending) return Message{Status::closed, {}, 0};
    return Message{Status::ok, {static_cast<const std::byte*>(s.pending.data()), s.pending.size()}, s.pending_tag};
}

void RemoteReader::release() {
    detail::refuse_in_forked_child(state_, "RemoteReader::release");
    auto& s = *state_;
    if (!s.has_pending) throw Error(ErrorCode::protocol, "remote reader: release() without a peeked message");
    s.has_pending = false;
    s.pending = zmq::message_t();
}

Status RemoteReader::read(std::vector<std::byte>& into, std::chrono::nanoseconds timeout, std::uint64_t* tag) {
    const Message m = peek(timeout);  // (refuses a forked child's copy)
    if (m.status != Status::ok) return m.status;
    into.assign(m.bytes.begin(), m.bytes.end());
    if (tag) *tag = m.tag;
    release();
    return Status::ok;
}

void RemoteReader::cancel() noexcept {
    // A child's copy shares the parent's cancel_fd, not its flag: a poke would make the parent's wait
    // find the fd readable on every poll and spin (its own flag unset, it never drains it).
    if (state_->made_in.in_forked_child()) return;
    state_->cancelled.store(true, std::memory_order_release);
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(state_->cancel_fd, &one, sizeof one);
}

void RemoteReader::clear_cancel() noexcept {
    if (state_->made_in.in_forked_child()) return;  // (the parent's fd: as cancel())
    state_->cancelled.store(false, std::memory_order_release);
    std::uint64_t drained = 0;
    [[maybe_unused]] const auto n = ::read(state_->cancel_fd, &drained, sizeof drained);
}

std::uint32_t RemoteReader::rank() const noexcept { return state_->rank; }
const std::string& RemoteReader::endpoint() const noexcept { return state_->endpoint; }
std::uint64_t RemoteReader::received() const noexcept { return state_->received; }

}  // namespace ringcast::remote
