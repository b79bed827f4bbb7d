// floor_ring: the least a ring queue does for the hop — ringcast's protocol with none of its code
// around it. The question it answers: of what ringcast's round trip adds to the atomic floor's, how
// much does any ring of packed records with sleep-capable waiters pay, and how much is ringcast's
// own (its checks, bookkeeping and calls)?
//
// A ringcast ring's layout in what the hop touches, and its shared stores (include/ringcast/layout.hpp):
// records packed at 16-byte alignment, each a 16-byte header (here a 64-bit stamp word and the length;
// ringcast's also holds the tag) and the payload; a padding record where a record would cross the ring's end; the stamp word ahead of a new
// record zeroed (Z) where no reader may still be on the previous lap's record there; a caught-up reader
// polls the stamp at its head. Every publish and every release is what a waker owes a waiter that may
// sleep (w1, w2 of include/ringcast/wait.hpp): the cursor store an exchange (seq_cst), then a seq_cst
// load of the sleepers' word; the waiters here only spin, so nobody ever announces and nobody is woken.
// Not there: the closed flag, liveness, tags, fragments, diagnostics counters, every check of a
// record against the tail, and the calls' layers. Three forms: floor_ring has no tail word (readers go
// by the stamps alone, and the stamp's store is the exchange); floor_ring_tail stores the stamps
// with a release and then publishes the tail word with the exchange, as ringcast does (its readers
// still poll the stamps: the tail is stored, never waited on). Their difference is the tail's price.
// floor_ring_asym is floor_ring_tail with the waker's side of asymmetric fences (floor_ring.hpp, Fences):
// every cursor store a plain release and the sleepers' load a plain load, no fence between them (in such
// a protocol the waiter about to sleep would pay it, by membarrier) — what a wake protocol of that kind
// could take off ringcast's hop at most.
//
// Stamps are absolute: position + 1 (0: not yet written), so a previous lap's stamp never passes.
// Requests: one ring, R readers, a head each. Replies: one ring per reader, the writer its reader.
#include <sys/mman.h>

#include "floor_ring.hpp"

namespace rcbench {
namespace {

using floor_ring::Ring;
using floor_ring::RingReader;
using floor_ring::RingWriter;
using floor_ring::Fences;
using floor_ring::record_size;

class FloorRingSystem final : public System {
public:
    FloorRingSystem(bool with_tail, Fences fences) : with_tail_(with_tail), fences_(fences) {}
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
            End(const Ring& req, std::uint32_t rank, const Ring& rep, bool tail, Fences f) : in(req, rank, f), out(rep, tail, f) {}
            std::span<const std::byte> receive() override {
                const auto m = in.peek();
                buf.assign(m.begin(), m.end());
                in.release();
                return buf;
            }
            void reply(std::span<const std::byte> b) override { out.write(b); }
        };
        return std::make_unique<End>(requests_, rank, replies_[rank], with_tail_, fences_);
    }
    std::unique_ptr<WriterEnd> make_writer() override {
        struct End final : WriterEnd {
            RingWriter out;
            std::vector<RingReader> replies;
            End(const Ring& req, bool tail, Fences f) : out(req, tail, f) {}
            void broadcast(std::span<const std::byte> m) override { out.write(m); }
            void collect(const std::function<void(std::uint32_t, std::span<const std::byte>)>& f) override {
                for (std::uint32_t r = 0; r < replies.size(); ++r) {
                    f(r, replies[r].peek());
                    replies[r].release();
                }
            }
        };
        auto e = std::make_unique<End>(requests_, with_tail_, fences_);
        for (const Ring& rep : replies_) e->replies.emplace_back(rep, 0, fences_);
        return e;
    }
    void cleanup() noexcept override {
        if (base_) ::munmap(base_, bytes_);
        base_ = nullptr;
    }

private:
    static constexpr std::uint64_t kReplyCapacity = 64 * 1024;  // ringcast's rows' reply rings
    bool with_tail_;
    Fences fences_;
    std::uint32_t readers_ = 0;
    std::uint64_t request_capacity_ = 0;
    std::size_t bytes_ = 0;
    std::byte* base_ = nullptr;
    Ring requests_;
    std::vector<Ring> replies_;
};

}  // namespace

std::unique_ptr<System> make_floor_ring(bool with_tail, Fences fences) {
    return std::make_unique<FloorRingSystem>(with_tail, fences);
}

}  // namespace rcbench
