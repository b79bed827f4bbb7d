// Peer: Boost.Interprocess message_queue. A queue delivers each message once, so a broadcast is one
// send per reader (one request queue each); all readers reply into one shared reply queue.
#include <boost/date_time/posix_time/posix_time_types.hpp>
#include <boost/interprocess/ipc/message_queue.hpp>

#include "common.hpp"

namespace rcbench {

std::string unique_name(const char* what);

namespace {

namespace bip = boost::interprocess;

boost::posix_time::ptime step_deadline() {
    // message_queue's timed calls take an absolute universal-time deadline.
    return boost::posix_time::microsec_clock::universal_time() +
           boost::posix_time::microseconds(kStepTimeoutNs / 1000);
}

class BoostMq final : public System {
public:
    void prepare(std::size_t max_message, std::uint32_t readers) override {
        max_ = std::max<std::size_t>(max_message, 8);
        // As many messages in flight as the ringcast ring holds (>= 8 of the size, >= 1 MiB).
        const std::size_t depth = std::clamp<std::size_t>((std::size_t{1} << 20) / max_, 8, 1024);
        for (std::uint32_t r = 0; r < readers; ++r) {
            req_.push_back(unique_name("mq-req"));
            bip::message_queue::remove(req_.back().c_str());
            bip::message_queue(bip::create_only, req_.back().c_str(), depth, max_);
        }
        rep_ = unique_name("mq-rep");
        bip::message_queue::remove(rep_.c_str());
        bip::message_queue(bip::create_only, rep_.c_str(), 4 * readers + 4, kReplyMax);
    }

    std::unique_ptr<ReaderEnd> make_reader(std::uint32_t rank) override {
        struct End final : ReaderEnd {
            bip::message_queue in, out;
            std::vector<std::byte> buf;
            End(const std::string& i, const std::string& o, std::size_t max)
                : in(bip::open_only, i.c_str()), out(bip::open_only, o.c_str()), buf(max) {}
            std::span<const std::byte> receive() override {
                std::size_t got = 0;
                unsigned prio = 0;
                if (!in.timed_receive(buf.data(), buf.size(), got, prio, step_deadline()))
                    throw BenchError("message_queue receive timed out");
                return {buf.data(), got};
            }
            void reply(std::span<const std::byte> b) override {
                if (!out.timed_send(b.data(), b.size(), 0, step_deadline()))
                    throw BenchError("message_queue reply timed out");
            }
        };
        return std::make_unique<End>(req_[rank], rep_, max_);
    }

    std::unique_ptr<WriterEnd> make_writer() override {
        struct End final : WriterEnd {
            std::vector<std::unique_ptr<bip::message_queue>> out;
            std::unique_ptr<bip::message_queue> in;
            std::byte buf[kReplyMax];
            void broadcast(std::span<const std::byte> m) override {
                for (auto& q : out)
                    if (!q->timed_send(m.data(), m.size(), 0, step_deadline()))
                        throw BenchError("message_queue send timed out");
            }
            void collect(const std::function<void(std::uint32_t, std::span<const std::byte>)>& f) override {
                for (std::uint32_t r = 0; r < out.size(); ++r) {
                    std::size_t got = 0;
                    unsigned prio = 0;
                    if (!in->timed_receive(buf, sizeof buf, got, prio, step_deadline()))
                        throw BenchError("message_queue reply receive timed out");
                    f(r, {buf, got});  // arrival order, not rank order: the driver does not care
                }
            }
        };
        auto e = std::make_unique<End>();
        for (auto& n : req_) e->out.push_back(std::make_unique<bip::message_queue>(bip::open_only, n.c_str()));
        e->in = std::make_unique<bip::message_queue>(bip::open_only, rep_.c_str());
        return e;
    }

    void cleanup() noexcept override {
        for (auto& n : req_) bip::message_queue::remove(n.c_str());
        if (!rep_.empty()) bip::message_queue::remove(rep_.c_str());
    }

private:
    std::size_t max_ = 0;
    std::vector<std::string> req_;
    std::string rep_;
};

}  // namespace

std::unique_ptr<System> make_boost_mq() { return std::make_unique<BoostMq>(); }

}  // namespace rcbench
