// Instructions per hop, for callgrind (no hardware counters in our VMs): one 64-byte message
// published and consumed (write → peek → release) through a 1-reader ring, against the atomic floor's
// hop (copy in, store a word, load it, copy out) and the ring floor's (ringcast-bench's floor_ring and
// floor_ring_tail: the same records and fences with none of ringcast's code; bench/harness/floor_ring.hpp).
// Single thread, nothing ever waits, so what callgrind counts is exactly the fast-path code of each.
//
//   valgrind --tool=callgrind --toggle-collect='*ringcast_hop*' --toggle-collect='*floor_hop*'
//            build/bench/profile/ringcast-hop-instructions 100000        (one command line; *floor_hop*
//            takes the atomic floor's and both ring floors' hops)
//   callgrind_annotate --inclusive=yes callgrind.out.<pid> | grep _hop
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "floor_ring.hpp"
#include "ringcast/ring.hpp"

namespace {

alignas(64) std::byte g_payload[64];
alignas(64) std::byte g_out[64];
struct alignas(128) FloorLine {  // the floor's shared state: one word each way, its own lines
    std::atomic<std::uint64_t> seq{0};
    alignas(128) std::atomic<std::uint64_t> ack{0};
    alignas(128) std::byte data[64];
};
FloorLine g_floor;

[[gnu::noinline]] bool ringcast_hop(ringcast::Writer& w, ringcast::Reader& r) {
    if (w.write(g_payload, std::chrono::seconds(1)) != ringcast::Status::ok) return false;
    const ringcast::Message m = r.peek(std::chrono::seconds(1));
    if (m.status != ringcast::Status::ok) return false;
    std::memcpy(g_out, m.bytes.data(), m.bytes.size());
    r.release();
    return true;
}

[[gnu::noinline]] bool floor_hop(std::uint64_t i) {
    std::memcpy(g_floor.data, g_payload, sizeof g_payload);
    g_floor.seq.store(i, std::memory_order_release);
    if (g_floor.seq.load(std::memory_order_acquire) != i) return false;
    std::memcpy(g_out, g_floor.data, sizeof g_out);
    g_floor.ack.store(i, std::memory_order_release);
    return g_floor.ack.load(std::memory_order_acquire) == i;
}

// One hop through the ring floor: floor_ring (no tail word) and floor_ring_tail (ringcast's tail
// word), each its own function so that callgrind counts them apart (noipa: not folded into one).
bool ring_hop(rcbench::floor_ring::RingWriter& w, rcbench::floor_ring::RingReader& r) {
    w.write(g_payload);
    const std::span<const std::byte> m = r.peek();
    std::memcpy(g_out, m.data(), m.size());
    r.release();
    return m.size() == sizeof g_payload;
}
[[gnu::noipa]] bool ring_floor_hop(rcbench::floor_ring::RingWriter& w, rcbench::floor_ring::RingReader& r) {
    return ring_hop(w, r);
}
[[gnu::noipa]] bool ring_tail_floor_hop(rcbench::floor_ring::RingWriter& w, rcbench::floor_ring::RingReader& r) {
    return ring_hop(w, r);
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
    const std::string name = "rc-hop-" + std::to_string(::getpid());
    auto w = ringcast::Writer::create(name, {.readers = 1, .capacity = 1 << 20});
    auto r = ringcast::Reader::attach(name, 0);
    for (std::uint64_t i = 0; i < n; ++i)
        if (!ringcast_hop(w, r)) return 1;
    for (std::uint64_t i = 1; i <= n; ++i)
        if (!floor_hop(i)) return 1;
    for (const bool with_tail : {false, true}) {  // the ring floor in process memory: one thread needs no sharing
        constexpr std::uint64_t capacity = 1 << 20;
        std::vector<std::byte> memory(rcbench::floor_ring::Ring::bytes(capacity, 1) + 128);
        rcbench::floor_ring::Ring ring;
        ring.place(memory.data() + (128 - reinterpret_cast<std::uintptr_t>(memory.data()) % 128) % 128, capacity, 1);
        rcbench::floor_ring::RingWriter ring_writer(ring, with_tail);
        rcbench::floor_ring::RingReader ring_reader(ring, 0);
        for (std::uint64_t i = 0; i < n; ++i)
            if (!(with_tail ? ring_tail_floor_hop(ring_writer, ring_reader) : ring_floor_hop(ring_writer, ring_reader)))
                return 1;
    }
    std::printf("%llu hops each (the ring floor's in two forms: without, then with its tail word); divide callgrind's\n"
                "inclusive Ir of ringcast_hop / floor_hop / ring_floor_hop / ring_tail_floor_hop by it\n",
                static_cast<unsigned long long>(n));
    return 0;
}
