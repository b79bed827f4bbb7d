// The systems under test: ringcast with each wait strategy, and the two floors (bare atomic and bare
// futex hand-off through one shared buffer). The peers live in peer_boost.cpp / peer_zmq.cpp.
#include <atomic>
#include <climits>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.hpp"
#include "floor_ring.hpp"  // wake_if_announced
#include "ringcast/futex.hpp"
#include "ringcast/ring.hpp"

namespace rcbench {

std::unique_ptr<System> make_boost_mq();    // peer_boost.cpp
std::unique_ptr<System> make_floor_ring(bool with_tail, floor_ring::Fences fences);  // floor_ring.cpp
#ifdef RINGCAST_BENCH_HAVE_ZMQ
std::unique_ptr<System> make_zmq_pair();  // peer_zmq.cpp
#endif

std::string unique_name(const char* what) {
    static int counter = 0;
    return std::string("rcb-") + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

namespace {

using namespace std::chrono_literals;
constexpr auto kTimeout = std::chrono::nanoseconds(kStepTimeoutNs);

void expect_ok(ringcast::Status s, const char* what) {
    if (s != ringcast::Status::ok)
        throw BenchError(std::string(what) + ": " + ringcast::to_string(s));
}

// ---- ringcast -------------------------------------------------------------------------------------
// Request ring: 1 writer → R readers. Reply ring r: reader r → the writer (a one-reader ring each, as
// gather.hpp's per-rank reply rings).
class RingcastSystem final : public System {
public:
    explicit RingcastSystem(ringcast::WaitKind kind, std::chrono::nanoseconds spin_max = {}) {
        wait_.kind = kind;
        wait_.spin_max = spin_max;
    }

    void prepare(std::size_t max_message, std::uint32_t readers) override {
        readers_ = readers;
        // Room for >= 8 messages in flight (one record each: max record = capacity / 4), >= 1 MiB.
        std::uint64_t cap = 1ULL << 20;
        while (cap < 8 * (max_message + 64)) cap <<= 1;
        req_name_ = unique_name("req");
        ringcast::WriterOptions wo;
        wo.wait = wait_;
        wo.unlink_on_destroy = false;  // cleanup() unlinks, also after a failure
        writer_ = std::make_unique<ringcast::Writer>(
            ringcast::Writer::create(req_name_, {.readers = readers, .capacity = cap}, wo));
        for (std::uint32_t r = 0; r < readers; ++r) {
            reply_names_.push_back(unique_name("rep"));
            reply_segs_.push_back(ringcast::Segment::create(reply_names_.back(), {.readers = 1, .capacity = 64 * 1024}));
        }
    }

    std::unique_ptr<ReaderEnd> make_reader(std::uint32_t rank) override {
        struct End final : ReaderEnd {
            ringcast::Reader in;
            ringcast::Writer out;
            std::vector<std::byte> buf;
            End(ringcast::Reader i, ringcast::Writer o) : in(std::move(i)), out(std::move(o)) {}
            std::span<const std::byte> receive() override {
                expect_ok(in.read(buf, kTimeout), "reader read");
                return buf;
            }
            void reply(std::span<const std::byte> b) override { expect_ok(out.write(b, kTimeout), "reply write"); }
        };
        ringcast::ReaderOptions ro;
        ro.wait = wait_;
        ringcast::WriterOptions wo;
        wo.wait = wait_;
        wo.unlink_on_destroy = false;
        return std::make_unique<End>(ringcast::Reader::attach(req_name_, rank, ro),
                                     ringcast::Writer::open(reply_names_[rank], wo));
    }

    std::unique_ptr<WriterEnd> make_writer() override {
        struct End final : WriterEnd {
            ringcast::Writer* out;
            std::vector<ringcast::Reader> replies;
            void broadcast(std::span<const std::byte> m) override { expect_ok(out->write(m, kTimeout), "broadcast"); }
            void collect(const std::function<void(std::uint32_t, std::span<const std::byte>)>& f) override {
                for (std::uint32_t r = 0; r < replies.size(); ++r) {
                    const ringcast::Message m = replies[r].peek(kTimeout);
                    expect_ok(m.status, "reply peek");
                    f(r, m.bytes);
                    replies[r].release();
                }
            }
        };
        auto e = std::make_unique<End>();
        e->out = writer_.get();
        ringcast::ReaderOptions ro;
        ro.wait = wait_;
        for (std::uint32_t r = 0; r < readers_; ++r) e->replies.push_back(ringcast::Reader::attach(reply_names_[r], 0, ro));
        return e;
    }

    void cleanup() noexcept override {
        writer_.reset();
        reply_segs_.clear();
        try {
            ringcast::Segment::remove(req_name_);
            for (auto& n : reply_names_) ringcast::Segment::remove(n);
        } catch (...) {
        }
    }

private:
    ringcast::WaitOptions wait_{};
    std::uint32_t readers_ = 0;
    std::string req_name_;
    std::vector<std::string> reply_names_;
    std::unique_ptr<ringcast::Writer> writer_;
    std::vector<ringcast::Segment> reply_segs_;
};

// ---- floors ---------------------------------------------------------------------------------------
// One shared buffer handed back and forth: the writer copies the message in and bumps `seq`; each
// reader waits for the bump, copies the message out, writes its reply into its own ack line and
// stores `seq` there. The writer touches the buffer again only after every ack (lock-step), so no
// further synchronisation is needed. Spin: pause loop. Futex: no spinning at all, the waker always
// calls futex_wake (the textbook ping-pong; ringcast skips the wake when nobody sleeps). Eventfd:
// likewise with one eventfd per direction and reader (inherited across the fork), the waker always
// writes it and the waiter blocks in poll + read (what an event loop does on readiness).
// Wakeable: the spin floor whose every publish (the request's `seq`, each ack's) is what a waker owes
// a waiter that may sleep (w1, w2 of include/ringcast/wait.hpp): the store made a seq_cst exchange,
// the store-load fence that keeps a sleeper's announcement from being missed, then a seq_cst load of
// the sleepers' word (its own line, like ringcast's announcement bits). Its waiters only spin, so the
// word stays 0 and nobody is ever woken: the row is the price of being able to sleep, paid on every
// hand-off by any queue whose reader may sleep, and nothing else.
class FloorSystem final : public System {
public:
    enum class Mode { atomic, wakeable, futex, eventfd };
    explicit FloorSystem(Mode mode)
        : wakeable_(mode == Mode::wakeable), futex_(mode == Mode::futex), eventfd_(mode == Mode::eventfd) {}
    bool can_stream() const override { return false; }

    void prepare(std::size_t max_message, std::uint32_t readers) override {
        readers_ = readers;
        max_ = std::max<std::size_t>(max_message, 8);
        bytes_ = sizeof(Line) * (2 + readers) + max_;  // request, acks, the sleepers' line
        void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw BenchError("mmap of the floor buffer failed");
        base_ = static_cast<std::byte*>(p);
        new (base_) Line[2 + readers]{};
        if (eventfd_) {
            for (std::uint32_t i = 0; i < 2 * readers; ++i) {  // [0, R): requests, [R, 2R): acks
                const int fd = ::eventfd(0, EFD_CLOEXEC);
                if (fd < 0) throw BenchError("eventfd() failed");
                efds_.push_back(fd);
            }
        }
    }
    std::unique_ptr<ReaderEnd> make_reader(std::uint32_t rank) override {
        struct End final : ReaderEnd {
            FloorSystem* s;
            std::uint32_t rank;
            std::uint32_t seen = 0;
            std::vector<std::byte> buf;
            std::span<const std::byte> receive() override {
                Line& req = s->line(0);
                seen = s->wait_change(req.seq, seen, s->eventfd_ ? s->efds_[rank] : -1);
                buf.resize(req.len);
                std::memcpy(buf.data(), s->data(), req.len);
                return buf;
            }
            void reply(std::span<const std::byte> b) override {
                Line& ack = s->line(1 + rank);
                std::memcpy(ack.payload, b.data(), b.size());
                ack.len = std::uint32_t(b.size());
                s->publish(ack.seq, seen);
                if (s->futex_) ringcast::futex_wake(&ack.seq, 1);
                if (s->eventfd_) s->signal(s->efds_[s->readers_ + rank]);
            }
        };
        auto e = std::make_unique<End>();
        e->s = this;
        e->rank = rank;
        e->buf.reserve(max_);
        return e;
    }
    std::unique_ptr<WriterEnd> make_writer() override {
        struct End final : WriterEnd {
            FloorSystem* s;
            std::uint32_t seq = 0;
            void broadcast(std::span<const std::byte> m) override {
                if (m.size() > s->max_) throw BenchError("floor message too large");
                std::memcpy(s->data(), m.data(), m.size());
                Line& req = s->line(0);
                req.len = std::uint32_t(m.size());
                s->publish(req.seq, ++seq);
                if (s->futex_) ringcast::futex_wake(&req.seq, INT_MAX);
                if (s->eventfd_)
                    for (std::uint32_t r = 0; r < s->readers_; ++r) s->signal(s->efds_[r]);
            }
            void collect(const std::function<void(std::uint32_t, std::span<const std::byte>)>& f) override {
                for (std::uint32_t r = 0; r < s->readers_; ++r) {
                    Line& ack = s->line(1 + r);
                    std::uint32_t v = ack.seq.load(std::memory_order_acquire);
                    while (v != seq) v = s->wait_change(ack.seq, v, s->eventfd_ ? s->efds_[s->readers_ + r] : -1);
                    f(r, {ack.payload, ack.len});
                }
            }
        };
        auto e = std::make_unique<End>();
        e->s = this;
        return e;
    }
    void cleanup() noexcept override {
        if (base_) ::munmap(base_, bytes_);
        base_ = nullptr;
        for (int fd : efds_) ::close(fd);
        efds_.clear();
    }

private:
    struct alignas(128) Line {
        std::atomic<std::uint32_t> seq{0};
        std::uint32_t len = 0;
        std::byte payload[kReplyMax]{};
    };
    Line& line(std::uint32_t i) { return reinterpret_cast<Line*>(base_)[i]; }
    Line& sleepers() { return line(1 + readers_); }  // wakeable: nobody ever announces (waiters spin)
    std::byte* data() { return base_ + sizeof(Line) * (2 + readers_); }

    // release: the bytes written before it are visible to the acquire load that sees `value`.
    void publish(std::atomic<std::uint32_t>& word, std::uint32_t value) {
        if (!wakeable_) {
            word.store(value, std::memory_order_release);
            return;
        }
        word.exchange(value, std::memory_order_seq_cst);  // w1
        floor_ring::wake_if_announced(sleepers().seq);    // w2
    }

    static void signal(int fd) {
        const std::uint64_t one = 1;
        if (::write(fd, &one, sizeof one) != sizeof one) throw BenchError("eventfd write failed");
    }
    // Waits until `word` differs from `old`; returns the new value (acquire). `fd`: the eventfd to
    // block on (eventfd mode).
    std::uint32_t wait_change(std::atomic<std::uint32_t>& word, std::uint32_t old, int fd) {
        const std::int64_t give_up = now_ns() + kStepTimeoutNs;
        for (std::uint32_t i = 1;; ++i) {
            const std::uint32_t v = word.load(std::memory_order_acquire);
            if (v != old) return v;
            if (eventfd_) {
                pollfd p{fd, POLLIN, 0};
                if (::poll(&p, 1, 1000) == 1) {
                    std::uint64_t n = 0;
                    if (::read(fd, &n, sizeof n) != sizeof n) throw BenchError("eventfd read failed");
                }
            } else if (futex_) {
                (void)ringcast::futex_wait(&word, old, ringcast::deadline_after(std::chrono::seconds(1)));
            } else {
                ringcast::cpu_relax();
            }
            if ((i & 4095u) == 0 || futex_ || eventfd_) {
                if (now_ns() > give_up) throw BenchError("floor: peer did not answer within the step timeout");
            }
        }
    }

    bool wakeable_;
    bool futex_;
    bool eventfd_;
    std::vector<int> efds_;
    std::uint32_t readers_ = 0;
    std::size_t max_ = 0, bytes_ = 0;
    std::byte* base_ = nullptr;
};

}  // namespace

std::vector<SystemInfo> all_systems() {
    using ringcast::WaitKind;
    std::vector<SystemInfo> v;
    for (WaitKind k : {WaitKind::spin, WaitKind::spin_yield, WaitKind::futex, WaitKind::hybrid})
        v.push_back({std::string(ringcast::to_string(k)), "ringcast", [k] { return std::make_unique<RingcastSystem>(k); }});
    // The adaptive hybrid, the library's default: spin up to 2 ms while the recent waits fit in it, else
    // about twice them. ("hybrid" above is the fixed 10 us spin, spin_max 0.)
    v.push_back({"hybrid_adapt", "ringcast", [] {
                     return std::make_unique<RingcastSystem>(WaitKind::hybrid, std::chrono::milliseconds(2));
                 }});
    v.push_back({"eventfd", "ringcast", [] { return std::make_unique<RingcastSystem>(WaitKind::eventfd); }});
    v.push_back({"floor_atomic", "floor", [] { return std::make_unique<FloorSystem>(FloorSystem::Mode::atomic); }});
    v.push_back({"floor_wakeable", "floor", [] { return std::make_unique<FloorSystem>(FloorSystem::Mode::wakeable); }});
    v.push_back({"floor_ring", "floor", [] { return make_floor_ring(false, floor_ring::Fences::symmetric); }});
    v.push_back({"floor_ring_tail", "floor", [] { return make_floor_ring(true, floor_ring::Fences::symmetric); }});
    v.push_back({"floor_ring_asym", "floor", [] { return make_floor_ring(true, floor_ring::Fences::asymmetric); }});
    v.push_back({"floor_futex", "floor", [] { return std::make_unique<FloorSystem>(FloorSystem::Mode::futex); }});
    v.push_back({"floor_eventfd", "floor", [] { return std::make_unique<FloorSystem>(FloorSystem::Mode::eventfd); }});
    v.push_back({"boost_mq", "peer", [] { return make_boost_mq(); }});
#ifdef RINGCAST_BENCH_HAVE_ZMQ
    v.push_back({"zmq_pair", "peer", [] { return make_zmq_pair(); }});
#endif
    return v;
}

const SystemInfo* find_system(const std::string& name) {
    static const std::vector<SystemInfo> systems = all_systems();
    for (const auto& s : systems)
        if (s.name == name) return &s;
    return nullptr;
}

}  // namespace rcbench
