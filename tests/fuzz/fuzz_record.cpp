// libFuzzer target: Reader::peek on a ring full of corrupted record headers and payloads.
//
// Each input becomes a fresh segment (1 rank, 64 KiB ring) whose data the input writes directly:
//   bytes 0..7   u64: where the reader's head starts (mod 4 x capacity; any alignment — an unaligned
//                cursor must be refused at attach), so records may sit anywhere, across the ring's end too
//   bytes 8..9   u16: how many bytes past the head are "published" (tail - head, <= capacity, any alignment)
//   byte  10     bit 0: the queue is closed
//   bytes 11..   the ring's bytes from the head on (records: u32 length, u32 kind, u64 tag, payload)
// The reader then peeks/releases until it times out, sees closed, or reports Error(corrupt).
// Contract: no crash, no out-of-bounds access (ASan), no error other than Error(corrupt) (no
// bad_alloc either: reassembly memory follows the fragments that arrived, not an announced total);
// every delivered message lies inside the ring's published bytes or the reader's reassembly buffer.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

#include "ringcast/ring.hpp"

namespace {

using namespace ringcast;

std::string segment_name() { return "rc-fuzz-record-" + std::to_string(::getpid()); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 11) return 0;
    constexpr std::uint64_t capacity = layout::kMinCapacity;
    std::uint64_t head = 0;
    std::memcpy(&head, data, 8);
    head = head % (4 * capacity);
    std::uint16_t published16 = 0;
    std::memcpy(&published16, data + 8, 2);
    const std::uint64_t published = std::min<std::uint64_t>(published16, capacity);
    const bool closed = (data[10] & 1) != 0;
    const std::uint8_t* ring_bytes = data + 11;
    const std::size_t ring_len = std::min<std::size_t>(size - 11, capacity);

    const std::string name = segment_name();
    Segment::remove(name);
    {
        Segment seg = Segment::create(name, SegmentOptions{.readers = 1, .capacity = capacity});
        // Lay the input out from the head on, wrapping at the ring's end like the writer does.
        for (std::size_t i = 0; i < ring_len; ++i)
            seg.data()[(head + i) & (capacity - 1)] = static_cast<std::byte>(ring_bytes[i]);
        seg.reader_slot(0).head.store(head);
        seg.writer_line().tail.store(head + published);
        if (closed) seg.header().flags.store(layout::kFlagClosed);

        ReaderOptions ro;
        ro.liveness_interval = std::chrono::nanoseconds(0);  // no writer exists: nothing to check
        ro.wait.kind = WaitKind::futex;                     // a zero timeout: no spinning
        const std::byte* ring_begin = seg.data();
        const std::byte* ring_end = ring_begin + capacity;
        try {
            Reader reader = Reader::attach(name, 0, ro);  // refuses unaligned cursors: Error(corrupt)
            for (int i = 0; i < 4096; ++i) {
                const Message m = reader.peek(std::chrono::nanoseconds(0));
                if (m.status != Status::ok) break;
                // A message is either a view into the ring (then inside it) or the reassembly buffer.
                const std::byte* b = m.bytes.data();
                const bool in_ring = b >= ring_begin && b + m.bytes.size() <= ring_end;
                if (in_ring && m.bytes.size() > published) std::abort();  // beyond what was published
                volatile std::uint8_t sink = 0;
                for (const std::byte x : m.bytes) sink = sink ^ static_cast<std::uint8_t>(x);  // ASan checks every byte
                (void)sink;
                reader.release();
            }
        } catch (const Error& e) {
            if (e.code() != ErrorCode::corrupt) std::abort();  // the only error a bad record may cause
        }
    }
    Segment::remove(name);
    return 0;
}
