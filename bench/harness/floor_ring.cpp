// floor_ring: the least a ring queue does for the hop — ringcast's protocol with none of its code
// around it. The question it answers: of what ringcast's round trip adds to the atomic floor's, how
// much does any ring of packed records with sleep-capable waiters pay, and how much is ringcast's
// own (its checks, bookkeeping and calls)?
//
// The same layout and the same shared stores as a ringcast ring (include/ringcast/layout.hpp):
// records packed at 16-byte alignment, each a 16-byte header (its stamp word, its length) and the
// payload; a padding record where a record would cross the ring's end; the stamp word ahead of a new
// record zeroed (Z) where no reader may still be on the previous lap's record there; a caught-up reader
// polls the stamp at its head. Every publish and every release is what a waker owes a waiter that may
// sleep (w1, w2 of include/ringcast/wait.hpp): the cursor store an exchange (seq_cst), then a seq_cst
// load of the sleepers' word; the waiters here only spin, so nobody ever announces and nobody is woken.
// Not there: the closed flag, liveness, tags, fragments, diagnostics counters, every check of a
// record against the tail, and the calls' layers. Two forms: floor_ring has no tail word (readers go
// by the stamps alone, and the stamp's store is the exchange); floor_ring_tail stores the stamps
// with a release and then publishes the tail word with the exchange, as ringcast does (its readers
// still poll the stamps: the tail is stored, never waited on). Their difference is the tail's price.
//
// Stamps are absolute: position + 1 (0: not yet written), so a previous lap's stamp never passes.
// Requests: one ring, R readers, a head each. Replies: one ring per reader, the writer its reader.
#include <atomic>
#include <climits>
#include <cstring>

#include <sys/mman.h>

#include "common.hpp"
#include "ringcast/futex.hpp"
#include "ringcast/wait.hpp"  // cpu_relax

namespace rcbench {
namespace {

struct alignas(16) Header {
    std::atomic<std::uint64_t> stamp;  // position + 1 once published; 0 or an older lap's before
    std::uint32_t length;              // payload bytes (a padding record: the bytes to the ring's end)
    std::uint32_t padding;             // 1: a padding record
};
static_assert(sizeof(Header) == 16);

struct alignas(128) Word {  // its own line (two, against the adjacent-line prefetcher)
    std::atomic<std::uint64_t> value{0};
};

constexpr std::uint64_t record_size(std::uint64_t payload) { return (sizeof(Header) + payload + 15) & ~std::uint64_t{15}; }

// One ring in shared memory: the heads of its readers, the sleepers' words, the records.
struct Ring {
    Word* tail = nullptr;            // floor_ring_tail only
    Word* heads = nullptr;           // [readers]
    Word* data_sleepers = nullptr;   // readers would announce here (never do: they spin)
    Word* space_sleepers = nullptr;  // the writer would announce here (never does)
    std::byte* data = nullptr;
    std::uint64_t capacity = 0;
    std::uint32_t readers = 0;

    static std::size_t bytes(std::uint64_t capacity, std::uint32_t readers) {
        return sizeof(Word) * (readers + 3) + capacity;
    }
    void place(std::byte* at, std::uint64_t cap, std::uint32_t n) {
        for (std::uint32_t k = 0; k < n + 3; ++k) new (at + sizeof(Word) * k) Word{};
        tail = reinterpret_cast<Word*>(at);
        heads = tail + 1;
        data_sleepers = heads + n;
        space_sleepers = heads + n + 1;
        data = at + sizeof(Word) * (n + 3);
        capacity = cap;
        readers = n;
    }
    Header& header_at(std::uint64_t pos) const { return *reinterpret_cast<Header*>(data + (pos & (capacity - 1))); }
};

void wake_if_announced(Word& sleepers) {  // w2 (w1 was the caller's exchange)
    if (sleepers.value.load(std::memory_order_seq_cst) != 0) [[unlikely]]
        ringcast::futex_wake(reinterpret_cast<std::atomic<std::uint32_t>*>(&sleepers.value), INT_MAX);
}

// Every 4096 spin steps: the first time starts the step's timeout, later ones check it (no clock read
// on a hop that finds its record within the first steps, as ringcast's waits).
void give_up_if_late(std::uint32_t i, std::int64_t& give_up, const char* what) {
    if ((i & 4095u) != 0) return;
    if (give_up == 0) give_up = now_ns() + kStepTimeoutNs;
    else if (now_ns() > give_up) throw BenchError(std::string("floor_ring: ") + what + " timed out");
}

class RingWriter {
public:
    RingWriter(const Ring& r, bool with_tail) : r_(r), with_tail_(with_tail), known_free_end_(r.capacity) {}
    void write(std::span<const std::byte> m) {
        const std::uint64_t rec = record_size(m.size());
        const std::uint64_t to_end = r_.capacity - (tail_ & (r_.capacity - 1));
        const std::uint64_t pad = rec > to_end ? to_end : 0;
        wait_for_space(pad + rec);
        if (pad != 0) {  // release: a reader that sees this stamp reads the fields stored before it
            Header& p = r_.header_at(tail_);
            p.length = std::uint32_t(pad - sizeof(Header));
            p.padding = 1;
            p.stamp.store(tail_ + 1, std::memory_order_release);
        }
        const std::uint64_t pos = tail_ + pad, end = pos + rec;
        Header& h = r_.header_at(pos);
        std::memcpy(reinterpret_cast<std::byte*>(&h) + sizeof(Header), m.data(), m.size());
        h.length = std::uint32_t(m.size());
        h.padding = 0;
        if (end + sizeof(Header) <= known_free_end_) r_.header_at(end).stamp.store(0, std::memory_order_relaxed);  // Z
        tail_ = end;
        if (with_tail_) {  // ringcast's order: the stamp (release), then the tail's exchange is w1
            h.stamp.store(pos + 1, std::memory_order_release);
            r_.tail->value.exchange(tail_, std::memory_order_seq_cst);
        } else {
            h.stamp.exchange(pos + 1, std::memory_order_seq_cst);  // w1: publishes the record (and the padding)
        }
        wake_if_announced(*r_.data_sleepers);
    }

private:
    void wait_for_space(std::uint64_t need) {
        std::int64_t give_up = 0;
        for (std::uint32_t i = 1; tail_ + need > known_free_end_; ++i) {
            std::uint64_t min_head = tail_;
            for (std::uint32_t k = 0; k < r_.readers; ++k)
                min_head = std::min(min_head, r_.heads[k].value.load(std::memory_order_acquire));
            known_free_end_ = min_head + r_.capacity;
            if (tail_ + need <= known_free_end_) break;
            ringcast::cpu_relax();
            give_up_if_late(i, give_up, "waiting for space");
        }
    }
    const Ring& r_;
    bool with_tail_;
    std::uint64_t tail_ = 0;
    std::uint64_t known_free_end_;
};

class RingReader {
public:
    RingReader(const Ring& r, std::uint32_t rank) : r_(r), rank_(rank) {}
    // The record at the head, spun for; valid until release().
    std::span<const std::byte> peek() {
        std::int64_t give_up = 0;
        for (std::uint32_t i = 1;; ++i) {
            Header& h = r_.header_at(head_);
            if (h.stamp.load(std::memory_order_acquire) == head_ + 1) {
                if (h.padding == 0) {
                    end_ = head_ + record_size(h.length);
                    return {reinterpret_cast<const std::byte*>(&h) + sizeof(Header), h.length};
                }
                head_ += sizeof(Header) + h.length;  // released with the record after it
                continue;
            }
            ringcast::cpu_relax();
            give_up_if_late(i, give_up, "waiting for a record");
        }
    }
    void release() {
        head_ = end_;
        r_.heads[rank_].value.exchange(head_, std::memory_order_seq_cst);  // w1 of the release
        wake_if_announced(*r_.space_sleepers);
    }

private:
    const Ring& r_;
    std::uint32_t rank_;
    std::uint64_t head_ = 0, end_ = 0;
};

class FloorRingSystem final : public System {
public:
    explicit FloorRingSystem(bool with_tail) : with_tail_(with_tail) {}
    bool can_stream() const override { return false; }  // a floor: lock-step round trips only

    void prepare(std::size_t max_message, std::uint32_t readers) override {
        readers_ = readers;
        request_capacity_ = 1ULL << 20;  // ringcast's rows: >= 1 MiB and >= 8 records of the largest message
        while (request_capacity_ < 8 * record_size(max_message)) request_capacity_ <<= 1;
        bytes_ = Ring::bytes(request_capacity_, readers) + readers * Ring::bytes(kReplyCapacity, 1);
        void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw BenchError("mmap of the floor_ring buffer failed");
        base_ = static_cast<std::byte*>(p);
        requests_.place(base_, request_capacity_, readers);
        std::byte* at = base_ + Ring::bytes(request_capacity_, readers);
        replies_.resize(readers);
        for (std::uint32_t r = 0; r < readers; ++r, at += Ring::bytes(kReplyCapacity, 1)) replies_[r].place(at, kReplyCapacity, 1);
    }
    std::unique_ptr<ReaderEnd> make_reader(std::uint32_t rank) override {
        struct End final : ReaderEnd {
            RingReader in;
            RingWriter out;
            std::vector<std::byte> buf;
            End(const Ring& req, std::uint32_t rank, const Ring& rep, bool tail) : in(req, rank), out(rep, tail) {}
            std::span<const std::byte> receive() override {
                const auto m = in.peek();
                buf.assign(m.begin(), m.end());
                in.release();
                return buf;
            }
            void reply(std::span<const std::byte> b) override { out.write(b); }
        };
        return std::make_unique<End>(requests_, rank, replies_[rank], with_tail_);
    }
    std::unique_ptr<WriterEnd> make_writer() override {
        struct End final : WriterEnd {
            RingWriter out;
            std::vector<RingReader> replies;
            End(const Ring& req, bool tail) : out(req, tail) {}
            void broadcast(std::span<const std::byte> m) override { out.write(m); }
            void collect(const std::function<void(std::uint32_t, std::span<const std::byte>)>& f) override {
                for (std::uint32_t r = 0; r < replies.size(); ++r) {
                    f(r, replies[r].peek());
                    replies[r].release();
                }
            }
        };
        auto e = std::make_unique<End>(requests_, with_tail_);
        for (const Ring& rep : replies_) e->replies.emplace_back(rep, 0);
        return e;
    }
    void cleanup() noexcept override {
        if (base_) ::munmap(base_, bytes_);
        base_ = nullptr;
    }

private:
    static constexpr std::uint64_t kReplyCapacity = 64 * 1024;  // ringcast's rows' reply rings
    bool with_tail_;
    std::uint32_t readers_ = 0;
    std::uint64_t request_capacity_ = 0;
    std::size_t bytes_ = 0;
    std::byte* base_ = nullptr;
    Ring requests_;
    std::vector<Ring> replies_;
};

}  // namespace

std::unique_ptr<System> make_floor_ring(bool with_tail) { return std::make_unique<FloorRingSystem>(with_tail); }

}  // namespace rcbench
