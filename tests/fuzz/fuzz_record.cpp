// libFuzzer target: Reader::peek on a ring full of corrupted record headers and payloads.
//
// Each input becomes a fresh segment (1 rank, 64 KiB ring) whose data the input writes directly:
//   bytes 0..7   u64: where the reader's head starts (mod 4 x capacity; any alignment — an unaligned
//                cursor must be refused at attach), so records may sit anywhere, across the ring's end too
//   bytes 8..11  u32: how many bytes past the head are "published" (tail - head, mod capacity + 1: 0 up
//                to a full ring, any alignment)
//   byte  12     bit 0: the queue is closed
//   bytes 13..   the ring's bytes from the head on (records: u32 length, u32 kind, u64 tag, payload);
//                a full ring needs inputs of capacity + 13 bytes: run_fuzzers.sh sets -max_len above it
//                and -len_control=0 (no ramp from short inputs)
// The reader then peeks/releases until it times out, sees closed, or reports Error(corrupt).
// Contract: no crash, no out-of-bounds access (ASan), no error other than Error(corrupt) (no
// bad_alloc either: reassembly memory follows the fragments that arrived, not an announced total);
// every delivered message that is a view into the ring lies within [head, tail) — the reader's
// released head at that moment and the published tail (mod the ring) — or is the reassembly buffer.
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

#include "ringcast/ring.hpp"

namespace {

using namespace ringcast;

std::string segment_name() { return "rc-fuzz-record-" + std::to_string(::getpid()); }

// The oracle's verdict: a broken promise is a crash libFuzzer keeps, with the promise printed.
void expect(bool holds, const char* promise) {
    if (holds) return;
    std::fprintf(stderr, "fuzz_record: %s\n", promise);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    constexpr std::size_t kPrefix = 13;
    if (size < kPrefix) return 0;
    constexpr std::uint64_t capacity = layout::kMinCapacity;
    std::uint64_t head = 0;
    std::memcpy(&head, data, 8);
    head = head % (4 * capacity);
    std::uint32_t published32 = 0;
    std::memcpy(&published32, data + 8, 4);
    const std::uint64_t published = published32 % (capacity + 1);
    const std::uint64_t tail = head + published;
    const bool closed = (data[12] & 1) != 0;
    const std::uint8_t* ring_bytes = data + kPrefix;
    const std::size_t ring_len = std::min<std::size_t>(size - kPrefix, capacity);

    const std::string name = segment_name();
    Segment::remove(name);
    {
        Segment seg = Segment::create(name, SegmentOptions{.readers = 1, .capacity = capacity});
        // Lay the input out from the head on, wrapping at the ring's end like the writer does.
        for (std::size_t i = 0; i < ring_len; ++i)
            seg.data()[(head + i) & (capacity - 1)] = static_cast<std::byte>(ring_bytes[i]);
        seg.reader_slot(0).head.store(head);
        seg.writer_line().tail.store(tail);
        if (closed) seg.header().flags.store(layout::kFlagClosed);

        ReaderOptions ro;
        ro.liveness_interval = std::chrono::nanoseconds(0);  // no writer exists: nothing to check
        ro.wait.kind = WaitKind::futex;                     // a zero timeout: no spinning
        try {
            Reader reader = Reader::attach(name, 0, ro);  // refuses unaligned cursors: Error(corrupt)
            expect(layout::cursor_aligned(head), "a reader attached at an unaligned head");
            // The reader's views point into its own mapping of the segment, not into `seg`'s.
            const std::byte* ring_begin = reader.segment().data();
            const std::byte* ring_end = ring_begin + capacity;
            const auto lap_shift = static_cast<unsigned>(std::countr_zero(capacity));
            for (int i = 0; i < 4096; ++i) {
                const std::uint64_t released = seg.reader_slot(0).head.load();  // what the reader gave back
                const Message m = reader.peek(std::chrono::nanoseconds(0));
                if (m.status != Status::ok) break;
                // A message is either a view into the ring or the reassembly buffer (then not in the ring
                // at all). A view lies within [released, released + capacity), so an offset in the ring
                // names one stream position, released + ((offset − released) mod capacity). It may reach
                // past the tail only as a record stamped for its position's lap: a reader takes a record
                // by its stamp before the tail passes it (layout.hpp "Stamps").
                const std::byte* b = m.bytes.data();
                const bool in_ring = b >= ring_begin && b < ring_end;
                if (in_ring) {
                    const std::uint64_t offset = static_cast<std::uint64_t>(b - ring_begin);
                    const std::uint64_t from = released + ((offset - released) & (capacity - 1));
                    expect(released >= head && released - head <= capacity, "the released head moved more than a lap");
                    expect(from >= released + sizeof(layout::RecordHeader), "a message before its record's header");
                    expect(from + m.bytes.size() <= released + capacity, "a message reaching a lap past the released head");
                    const std::uint64_t header = from - sizeof(layout::RecordHeader);  // a whole message's record
                    expect(from + m.bytes.size() <= tail ||
                               layout::stamp_current(layout::record_at(ring_begin, header & (capacity - 1)).stamp.load(),
                                                     header, lap_shift),
                           "a message past the tail without a stamp of its lap");
                    expect(b + m.bytes.size() <= ring_end, "a view crossing the ring's end");
                }
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
