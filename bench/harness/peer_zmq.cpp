// Peer: ZeroMQ ipc:// PAIR sockets, one per reader (a broadcast is one send per reader). Contexts are
// made after fork (a ZeroMQ context does not survive one), and sockets are closed before _exit.
#include <cstdio>

#include <unistd.h>

#include <zmq.hpp>

#include "common.hpp"

namespace rcbench {

std::string unique_name(const char* what);

namespace {

constexpr int kTimeoutMs = int(kStepTimeoutNs / 1'000'000);

void setup(zmq::socket_t& s, std::size_t max) {
    s.set(zmq::sockopt::linger, 1000);
    s.set(zmq::sockopt::rcvtimeo, kTimeoutMs);
    s.set(zmq::sockopt::sndtimeo, kTimeoutMs);
    s.set(zmq::sockopt::reconnect_ivl, 5);  // a reader may connect before the writer has bound
    const int depth = int(std::clamp<std::size_t>((std::size_t{1} << 20) / max, 8, 1024));
    s.set(zmq::sockopt::sndhwm, depth);
    s.set(zmq::sockopt::rcvhwm, depth);
}

class ZmqPair final : public System {
public:
    void prepare(std::size_t max_message, std::uint32_t readers) override {
        max_ = std::max<std::size_t>(max_message, 8);
        for (std::uint32_t r = 0; r < readers; ++r) paths_.push_back("/tmp/" + unique_name("zmq") + ".ipc");
    }
    std::unique_ptr<ReaderEnd> make_reader(std::uint32_t rank) override {
        struct End final : ReaderEnd {
            zmq::context_t ctx{1};
            zmq::socket_t s{ctx, zmq::socket_type::pair};
            std::vector<std::byte> buf;
            std::span<const std::byte> receive() override {
                const auto r = s.recv(zmq::mutable_buffer(buf.data(), buf.size()));
                if (!r) throw BenchError("zmq receive timed out");
                if (r->truncated()) throw BenchError("zmq message larger than expected");
                return {buf.data(), r->size};
            }
            void reply(std::span<const std::byte> b) override {
                if (!s.send(zmq::const_buffer(b.data(), b.size()))) throw BenchError("zmq reply timed out");
            }
        };
        auto e = std::make_unique<End>();
        e->buf.resize(max_);
        setup(e->s, max_);
        e->s.connect("ipc://" + paths_[rank]);
        return e;
    }
    std::unique_ptr<WriterEnd> make_writer() override {
        struct End final : WriterEnd {
            zmq::context_t ctx{1};
            std::vector<zmq::socket_t> socks;
            std::byte buf[kReplyMax];
            void broadcast(std::span<const std::byte> m) override {
                for (auto& s : socks)
                    if (!s.send(zmq::const_buffer(m.data(), m.size()))) throw BenchError("zmq send timed out");
            }
            void collect(const std::function<void(std::uint32_t, std::span<const std::byte>)>& f) override {
                for (std::uint32_t r = 0; r < socks.size(); ++r) {
                    const auto got = socks[r].recv(zmq::mutable_buffer(buf, sizeof buf));
                    if (!got) throw BenchError("zmq reply receive timed out");
                    f(r, {buf, got->size});
                }
            }
        };
        auto e = std::make_unique<End>();
        for (auto& p : paths_) {
            e->socks.emplace_back(e->ctx, zmq::socket_type::pair);
            setup(e->socks.back(), max_);
            e->socks.back().bind("ipc://" + p);
        }
        return e;
    }
    void cleanup() noexcept override {
        for (auto& p : paths_) ::unlink(p.c_str());
    }

private:
    std::size_t max_ = 0;
    std::vector<std::string> paths_;
};

}  // namespace

std::unique_ptr<System> make_zmq_pair() { return std::make_unique<ZmqPair>(); }

}  // namespace rcbench
