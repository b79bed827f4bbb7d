// floor_ring.hpp — the ring floor's writer and reader (floor_ring.cpp says what it is and why),
// shared with bench/profile/hop_instructions.cpp, which counts their instructions per hop.
#pragma once

#include <atomic>
#include <climits>
#include <cstring>

#include "common.hpp"
#include "ringcast/futex.hpp"
#include "ringcast/wait.hpp"  // cpu_relax

namespace rcbench::floor_ring {


struct alignas(16) Header {
    std::atomic<std::uint64_t> stamp;  // position + 1 once published; 0 or an older lap's before
    std::uint32_t length;              // payload bytes (a padding record: the bytes to the ring's end)
    std::uint32_t is_padding;          // 1: a padding record
};
static_assert(sizeof(Header) == 16);

struct alignas(128) Word {  // its own line (two, against the adjacent-line prefetcher)
    std::atomic<std::uint64_t> value{0};
};
struct alignas(128) SleepersWord {  // a futex word of announcements, its own line as a Word
    std::atomic<std::uint32_t> value{0};
};
static_assert(sizeof(SleepersWord) == sizeof(Word));

inline constexpr std::uint64_t record_size(std::uint64_t payload) { return (sizeof(Header) + payload + 15) & ~std::uint64_t{15}; }

// One ring in shared memory: the heads of its readers, the sleepers' words, the records.
struct Ring {
    Word* tail = nullptr;            // floor_ring_tail only
    Word* heads = nullptr;           // [readers]
    SleepersWord* data_sleepers = nullptr;   // readers would announce here (never do: they spin)
    SleepersWord* space_sleepers = nullptr;  // the writer would announce here (never does)
    std::byte* data = nullptr;
    std::uint64_t capacity = 0;
    std::uint32_t readers = 0;

    static std::size_t bytes(std::uint64_t capacity, std::uint32_t readers) {
        return sizeof(Word) * (readers + 3) + capacity;
    }
    void place(std::byte* at, std::uint64_t cap, std::uint32_t n) {
        for (std::uint32_t k = 0; k < n + 1; ++k) new (at + sizeof(Word) * k) Word{};
        tail = reinterpret_cast<Word*>(at);
        heads = tail + 1;
        data_sleepers = new (at + sizeof(Word) * (n + 1)) SleepersWord{};
        space_sleepers = new (at + sizeof(Word) * (n + 2)) SleepersWord{};
        data = at + sizeof(Word) * (n + 3);
        capacity = cap;
        readers = n;
    }
    Header& header_at(std::uint64_t pos) const { return *reinterpret_cast<Header*>(data + (pos & (capacity - 1))); }
};

// How a publish or a release orders its cursor store before its load of the sleepers' word.
//  symmetric:  what ringcast does (w1, w2 of include/ringcast/wait.hpp): the store an exchange, the load
//              seq_cst — a full fence on every hop, so that a waiter that announced itself and then
//              re-checked cannot miss the store while the waker misses the announcement.
//  asymmetric: a release store and a plain load with only the compiler kept from reordering them. A
//              wake protocol built so would make the waiter pay the fence instead, on the rare path
//              before it sleeps (membarrier(2), MEMBARRIER_CMD_GLOBAL_EXPEDITED, forcing one on every
//              CPU that runs a registered waker process); here no waiter ever sleeps, so this form
//              measures what such a protocol would take off a hop at most. Not a correct wake
//              protocol on its own.
enum class Fences { symmetric, asymmetric };

// w2 (w1 was the caller's cursor store): wakes the futex sleepers announced in `sleepers` (the floors'
// waiters only spin, so none ever is). The wakeable atomic floor (systems.cpp) publishes through it too.
inline void wake_if_announced(std::atomic<std::uint32_t>& sleepers, Fences fences = Fences::symmetric) {
    std::uint32_t announced;
    if (fences == Fences::symmetric) {
        announced = sleepers.load(std::memory_order_seq_cst);
    } else {
        std::atomic_signal_fence(std::memory_order_seq_cst);  // the compiler only: the CPU may reorder
        announced = sleepers.load(std::memory_order_relaxed);
    }
    if (announced != 0) [[unlikely]]
        ringcast::futex_wake(&sleepers, INT_MAX);
}

// The cursor store of a publish (the tail, or the stamp where there is no tail) or of a release (a head).
inline void store_cursor(std::atomic<std::uint64_t>& cursor, std::uint64_t value, Fences fences) {
    if (fences == Fences::symmetric) cursor.exchange(value, std::memory_order_seq_cst);  // w1
    else cursor.store(value, std::memory_order_release);
}

// Every 4096 spin steps: the first time starts the step's timeout, later ones check it (no clock read
// on a hop that finds its record within the first steps, as ringcast's waits).
inline void give_up_if_late(std::uint32_t i, std::int64_t& give_up, const char* what) {
    if ((i & 4095u) != 0) return;
    if (give_up == 0) give_up = now_ns() + kStepTimeoutNs;
    else if (now_ns() > give_up) throw BenchError(std::string("floor_ring: ") + what + " timed out");
}

class RingWriter {
public:
    RingWriter(const Ring& r, bool with_tail, Fences fences = Fences::symmetric)
        : r_(r), with_tail_(with_tail), fences_(fences), known_free_end_(r.capacity) {}
    void write(std::span<const std::byte> m) {
        const std::uint64_t rec = record_size(m.size());
        const std::uint64_t to_end = r_.capacity - (tail_ & (r_.capacity - 1));
        const std::uint64_t pad = rec > to_end ? to_end : 0;
        wait_for_space(pad + rec);
        // The padding is stamped at once, with its own release (ringcast stamps it after the record it
        // leads to; a reader that sees it here spins at the ring's start until the record comes).
        if (pad != 0) {  // release: a reader that sees this stamp reads the fields stored before it
            Header& p = r_.header_at(tail_);
            p.length = std::uint32_t(pad - sizeof(Header));
            p.is_padding = 1;
            p.stamp.store(tail_ + 1, std::memory_order_release);
        }
        const std::uint64_t pos = tail_ + pad, end = pos + rec;
        Header& h = r_.header_at(pos);
        std::memcpy(reinterpret_cast<std::byte*>(&h) + sizeof(Header), m.data(), m.size());
        h.length = std::uint32_t(m.size());
        h.is_padding = 0;
        if (end + sizeof(Header) <= known_free_end_) r_.header_at(end).stamp.store(0, std::memory_order_relaxed);  // Z
        tail_ = end;
        if (with_tail_) {  // ringcast's order: the stamp (release), then the tail's store is w1
            h.stamp.store(pos + 1, std::memory_order_release);
            store_cursor(r_.tail->value, tail_, fences_);
        } else {
            store_cursor(h.stamp, pos + 1, fences_);  // w1: publishes the record
        }
        wake_if_announced(r_.data_sleepers->value, fences_);
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
    Fences fences_;
    std::uint64_t tail_ = 0;
    std::uint64_t known_free_end_;
};

class RingReader {
public:
    RingReader(const Ring& r, std::uint32_t rank, Fences fences = Fences::symmetric) : r_(r), rank_(rank), fences_(fences) {}
    // The record at the head, spun for; valid until release().
    std::span<const std::byte> peek() {
        std::int64_t give_up = 0;
        for (std::uint32_t i = 1;; ++i) {
            Header& h = r_.header_at(head_);
            if (h.stamp.load(std::memory_order_acquire) == head_ + 1) {
                if (h.is_padding == 0) {
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
        store_cursor(r_.heads[rank_].value, head_, fences_);  // w1 of the release
        wake_if_announced(r_.space_sleepers->value, fences_);
    }

private:
    const Ring& r_;
    std::uint32_t rank_;
    Fences fences_;
    std::uint64_t head_ = 0, end_ = 0;
};

}  // namespace rcbench::floor_ring
