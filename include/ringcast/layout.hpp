// ringcast/layout.hpp — the shared-memory layout of one queue, in one place.
//
//   offset 0                       +-------------------------+
//                                  | SegmentHeader           |  identity + geometry, written once
//   kWriterLineOffset              +-------------------------+
//                                  | WriterLine              |  tail, notify_seq
//   kReaderSleepLineOffset         +-------------------------+
//                                  | ReaderSleepLine         |  one "may be asleep" bit per rank
//   kSpaceLineOffset               +-------------------------+
//                                  | SpaceLine               |  space_seq, writer_sleeping
//   kReaderSlotsOffset             +-------------------------+
//                                  | ReaderSlot[reader_count]|  one line pair per rank: head, owner
//   data_offset(reader_count)      +-------------------------+
//                                  | data ring [capacity]    |  16-byte aligned records
//                                  +-------------------------+
//
// Cursors are monotonically increasing byte counts (u64: wrap-around of the counter itself would take
// centuries). A byte position p lives at data[p & (capacity - 1)].
//
//         slowest reader head      fastest reader head          tail
//                |                        |                      |
//   ... released | unread by someone      | unread by slowest    | free (writer may fill) ...
//                 <----------------- tail - min(head) <= capacity -------->
//
// Every multi-process-shared field is a lock-free std::atomic of fixed width; the structs are
// standard-layout so the offsets below are the same in every process and every compiler of the ABI.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace ringcast::layout {

// 128 rather than 64: Intel's adjacent-line (spatial) prefetcher pulls cache lines in pairs, so two
// hot cursors 64 bytes apart can still false-share; 128 costs a few hundred bytes per segment.
inline constexpr std::size_t kLine = 128;

inline constexpr std::uint64_t kMagic = 0x5453'4143'474e'4952ULL;  // "RINGCAST" little-endian
inline constexpr std::uint32_t kAbiVersion = 4;  // 2: one owner word per slot, sleeper bits;
                                                 // 3: eventfd registrations (EventfdSlot);
                                                 // 4: record stamps (kind + lap), published first
                                                 // (WriterLine::ahead_us took a reserved, zeroed word
                                                 // with no bump: a peer that ignores it is woken
                                                 // ahead for nothing, or spins only spin_for, and the
                                                 // publish wakes it as always; SegmentHeader::
                                                 // creator_pid_ns likewise: zero in an older build's
                                                 // segment reads as "namespace unknown", checked as before)
inline constexpr std::uint32_t kMaxReaders = 1024;
inline constexpr std::uint64_t kMinCapacity = 64 * 1024;
inline constexpr std::uint64_t kMaxCapacity = 1ULL << 40;
inline constexpr std::size_t kRecordAlign = 16;  // = header size: the gap before the ring's end is
                                                 // always >= one header, so padding always fits

// Header flag bits (SegmentHeader::flags).
inline constexpr std::uint32_t kFlagClosed = 1u << 0;

// Reader slot states (the state field of a slot's owner word).
enum class SlotState : std::uint32_t {
    never_attached = 0,  // head stays 0: the writer waits for this rank, so it misses nothing
    attached = 1,
    detached = 2,        // left cleanly and kept its place (ReaderOptions::keep_place): head kept,
                         // the writer still honours it, the rank may re-attach and resume
    evicted = 3,         // declared dead under an eviction policy: the writer ignores its head
    left = 4,            // left cleanly without keeping its place: the writer ignores its head; the
                         // rank cannot re-attach (its place in the stream is gone, as after eviction)
};
inline constexpr std::uint32_t kSlotStateCount = 5;

// ---- owner words ----------------------------------------------------------------------------------
// Who holds a role (a reader rank, or the writer), in ONE 64-bit word so that every change of
// ownership is one CAS: a claim, a clean detach, an eviction. Two separate words (pid, then start
// time) let an observer pair a new pid with the old start time and judge a live owner dead; a
// check-then-store of the state let a claim undo an eviction the writer had already acted on.
//
//   bit 63      61 60                   39 38                                   0
//      +---------+------------------------+--------------------------------------+
//      | state 3 | pid 22                 | start time (clock ticks) mod 2^39     |
//      +---------+------------------------+--------------------------------------+
//
// pid: Linux caps pid_max at 2^22 (PID_MAX_LIMIT). Start time: /proc/<pid>/stat field 22 in
// USER_HZ (100/s) ticks; 2^39 ticks are 174 years of uptime. pid 0 = nobody. The start time makes a
// reused pid look like a different process — unless the pid is reused within one 10 ms tick, which
// needs the whole pid space to cycle in 10 ms; we accept that.
inline constexpr unsigned kOwnerStartBits = 39;
inline constexpr unsigned kOwnerPidBits = 22;
inline constexpr std::uint64_t kOwnerStartMask = (std::uint64_t{1} << kOwnerStartBits) - 1;
inline constexpr std::uint64_t kOwnerPidMask = (std::uint64_t{1} << kOwnerPidBits) - 1;

struct Owner {
    SlotState state = SlotState::never_attached;
    std::uint32_t pid = 0;
    std::uint64_t start_time = 0;  // already reduced mod 2^39
    friend constexpr bool operator==(const Owner&, const Owner&) = default;
};
[[nodiscard]] constexpr std::uint64_t pack_owner(const Owner& o) noexcept {
    return (std::uint64_t{static_cast<std::uint32_t>(o.state)} << (kOwnerStartBits + kOwnerPidBits)) |
           ((std::uint64_t{o.pid} & kOwnerPidMask) << kOwnerStartBits) | (o.start_time & kOwnerStartMask);
}
[[nodiscard]] constexpr Owner unpack_owner(std::uint64_t w) noexcept {
    return {static_cast<SlotState>(w >> (kOwnerStartBits + kOwnerPidBits)),
            static_cast<std::uint32_t>((w >> kOwnerStartBits) & kOwnerPidMask), w & kOwnerStartMask};
}
static_assert(kSlotStateCount <= 8 && kOwnerStartBits + kOwnerPidBits + 3 == 64);
static_assert(unpack_owner(pack_owner({SlotState::left, 4194303, kOwnerStartMask})) ==
              Owner{SlotState::left, 4194303, kOwnerStartMask});

// ---- eventfd registrations (events/eventfd.hpp) ----------------------------------------------------
// An endpoint that sleeps on an eventfd instead of its futex word (WaitKind::eventfd, or an event
// loop) publishes where its waker can take a copy of the fd (pidfd_getfd). `gen` is a seqlock: odd
// while holder/fd change; the fd stays open in the holder until gen moved on again, so a waker that
// reads the same even gen before and after its pidfd_getfd took the registered eventfd.
struct EventfdSlot {
    std::atomic<std::uint64_t> holder;      // owner word (pid + start time) of the process holding the
                                            // eventfd (state field unused); 0: the endpoint sleeps on futexes
    std::atomic<std::uint32_t> fd;          // the eventfd's number in the holder
    std::atomic<std::uint32_t> gen;         // seqlock generation (above)
    std::atomic<std::uint32_t> refused;     // errno of a waker that could not take the fd (EPERM ...), 0: none
    std::atomic<std::uint32_t> refused_by;  // that waker's pid
};
static_assert(std::is_standard_layout_v<EventfdSlot> && sizeof(EventfdSlot) == 24);

struct SegmentHeader {
    std::atomic<std::uint64_t> magic;  // stored last (release) by the creator: an attacher that
                                       // sees it sees every other header field
    std::uint32_t abi_version;
    std::uint32_t layout_hash;
    std::uint64_t capacity;          // data ring bytes, power of two
    std::uint64_t total_size;        // whole segment size, checked against fstat
    std::uint32_t reader_count;
    std::uint32_t mode;              // permission bits it was created with (for `ringcast stat`)
    std::uint64_t creation_time_ns;  // CLOCK_REALTIME
    std::uint32_t creator_pid;
    std::uint32_t creator_pid_ns;      // inode of the creator's /proc/self/ns/pid; 0: unknown (no /proc,
                                       // or made by a build before the field, which left it zero). Every
                                       // pid in this segment means a process only in that namespace.
    std::uint64_t creator_start_time;  // /proc/<pid>/stat field 22: pid reuse safe identity
    std::atomic<std::uint32_t> flags;  // kFlagClosed, stored with release after the final tail
    std::uint32_t reserved1;
    std::atomic<std::uint64_t> writer_owner;  // 0 = no writer, else the claimant's owner word, state
                                              // attached (Segment::validate_image refuses any other); CAS-claimed
};

struct alignas(kLine) WriterLine {  // written by the writer on every publish: its own line pair
    std::atomic<std::uint64_t> tail;             // bytes published; only the writer stores (release)
    std::atomic<std::uint32_t> notify_seq;       // futex word readers sleep on
    std::atomic<std::uint32_t> ahead_us;         // how long a reader woken ahead of a message spins for
                                                 // it (Writer::wake_ahead; a hint, relaxed, clamped by the
                                                 // reader to its spin bounds; 0 gives their floor)
    std::atomic<std::uint64_t> wake_calls;       // futex_wake syscalls by the writer (diagnostics)
    std::atomic<std::uint64_t> messages;         // messages published (diagnostics, `ringcast stat`)
};

// Sleep announcements are per endpoint, never shared counts: a count that a process incremented and
// then died with stays incremented forever (every publish pays a wake syscall), while a bit belongs
// to one rank and whoever claims the rank next clears it (wait.hpp, "announcements").
inline constexpr std::size_t kSleepWords = kMaxReaders / 64;
struct alignas(kLine) ReaderSleepLine {  // readers write it only when going to sleep; the writer loads
                                         // ceil(readers/64) words of it on every publish
    std::atomic<std::uint64_t> sleeping[kSleepWords];  // bit r: rank r may be asleep on notify_seq
};

struct alignas(kLine) SpaceLine {  // touched only when the writer runs out of room
    std::atomic<std::uint32_t> space_seq;        // futex word the writer sleeps on
    std::uint32_t reserved0;
    std::atomic<std::uint64_t> writer_sleeping;  // bit 0: the writer may be asleep on space_seq
    std::atomic<std::uint64_t> writer_waits;     // futex_wait calls by the writer
    EventfdSlot writer_eventfd;                  // the writer's eventfd while it waits for space on one
};

struct alignas(kLine) ReaderSlot {  // written by its reader on every release: its own line pair
    std::atomic<std::uint64_t> head;   // bytes released; only this rank's reader stores (release)
    std::atomic<std::uint64_t> owner;  // owner word: SlotState + pid + start time; changed by CAS only
    std::atomic<std::uint64_t> waits;       // futex_wait calls by this reader
    std::atomic<std::uint64_t> wake_calls;  // futex_wake syscalls by this reader (space wakes)
    std::atomic<std::uint64_t> messages;    // messages consumed
    EventfdSlot eventfd;                    // this rank's eventfd while it waits for data on one
};

static_assert(std::is_standard_layout_v<SegmentHeader>);
static_assert(std::is_standard_layout_v<WriterLine>);
static_assert(std::is_standard_layout_v<SpaceLine>);
static_assert(std::is_standard_layout_v<ReaderSleepLine>);
static_assert(std::is_standard_layout_v<ReaderSlot>);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "cross-process atomics need no lock");
static_assert(sizeof(std::atomic<std::uint64_t>) == 8 && sizeof(std::atomic<std::uint32_t>) == 4);
static_assert(sizeof(SegmentHeader) <= kLine);
static_assert(sizeof(WriterLine) == kLine && sizeof(SpaceLine) == kLine && sizeof(ReaderSlot) == kLine);
static_assert(sizeof(ReaderSleepLine) == kLine && kSleepWords * 64 == kMaxReaders);

inline constexpr std::size_t kWriterLineOffset = kLine;
inline constexpr std::size_t kReaderSleepLineOffset = kWriterLineOffset + sizeof(WriterLine);
inline constexpr std::size_t kSpaceLineOffset = kReaderSleepLineOffset + sizeof(ReaderSleepLine);
inline constexpr std::size_t kReaderSlotsOffset = kSpaceLineOffset + sizeof(SpaceLine);

[[nodiscard]] constexpr std::size_t data_offset(std::uint32_t reader_count) noexcept {
    return kReaderSlotsOffset + std::size_t{reader_count} * sizeof(ReaderSlot);
}
[[nodiscard]] constexpr std::size_t segment_size(std::uint32_t reader_count, std::uint64_t capacity) noexcept {
    return data_offset(reader_count) + capacity;
}
[[nodiscard]] constexpr bool is_power_of_two(std::uint64_t v) noexcept { return v && !(v & (v - 1)); }

// ---- records in the data ring --------------------------------------------------------------------
//
//   +---------------+-------------+----------------+---------------------------+
//   | u32 length    | u32 stamp   | u64 tag        | payload [length], padded   |
//   +---------------+-------------+----------------+  to kRecordAlign           |
//                    kind (8 bits) | lap (24 bits): the lap of the ring the record was written in
//
// A record never wraps: when it does not fit before the ring's end the writer publishes a padding
// record covering the gap. A message larger than kMaxRecordPayload(capacity) travels as
// fragment_first (payload starts with the u64 total message length), fragment_middle*,
// fragment_last; fragment_abort tells readers to drop a stream the writer gave up on (timeout).
//
// Stamps: a record is published twice over — by its stamp (a release store, the last write of the
// record itself) and then by the tail (ring.hpp, publish order). A reader that has caught up with
// the writer polls the stamp at its head instead of the tail: the record's own cache line carries
// the news, where the tail would cost a second line per message (the core hop). What a caught-up
// reader finds at its head is only ever 0, a stamp of the previous lap, or the new record's stamp:
//   Z  zero-ahead: before stamping a record ending at `end`, the writer stores 0 into the stamp word
//      at `end` — the only place a reader can poll next — unless a held reader has not read the
//      previous lap's record that starts there (then the word is that record's stamp, and its lap
//      is one short of the lap a reader polling there expects).
// Without Z, the word at `end` may hold payload bytes of the previous lap, which a sender controls:
// a forged stamp would hand the reader a record that was never written (tests/model/stamp.pml).
enum class RecordKind : std::uint32_t {
    message = 1,
    padding = 2,
    fragment_first = 3,
    fragment_middle = 4,
    fragment_last = 5,
    fragment_abort = 6,
};

struct RecordHeader {
    std::uint32_t length;              // payload bytes (not counting header or padding)
    std::atomic<std::uint32_t> stamp;  // kind | lap << 8; 0: not (yet) published. Stored last (release)
    std::uint64_t tag;                 // caller's request tag (copied to every fragment)
};
static_assert(sizeof(RecordHeader) == kRecordAlign && std::is_standard_layout_v<RecordHeader>);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

inline constexpr unsigned kStampKindBits = 8;
inline constexpr std::uint32_t kStampKindMask = (1u << kStampKindBits) - 1;
inline constexpr std::uint32_t kStampLapMask = 0xffff'ffffu >> kStampKindBits;
// A position's lap: its cursor divided by the capacity (lap_shift = log2(capacity)), cut to 24 bits —
// a stamp is compared only with the lap before it (Z), so any width would do; 24 tells more in a dump.
[[nodiscard]] constexpr std::uint32_t lap_of(std::uint64_t position, unsigned lap_shift) noexcept {
    return static_cast<std::uint32_t>(position >> lap_shift) & kStampLapMask;
}
[[nodiscard]] constexpr std::uint32_t make_stamp(RecordKind kind, std::uint64_t position, unsigned lap_shift) noexcept {
    return static_cast<std::uint32_t>(kind) | lap_of(position, lap_shift) << kStampKindBits;
}
[[nodiscard]] constexpr std::uint32_t stamp_kind(std::uint32_t stamp) noexcept { return stamp & kStampKindMask; }
// True if `stamp` (loaded at `position`) says a record written in this lap is there. Kind 0 never is.
[[nodiscard]] constexpr bool stamp_current(std::uint32_t stamp, std::uint64_t position, unsigned lap_shift) noexcept {
    return stamp_kind(stamp) != 0 && stamp >> kStampKindBits == lap_of(position, lap_shift);
}
static_assert(make_stamp(RecordKind::message, 0, 16) == 1 && stamp_kind(make_stamp(RecordKind::padding, 5u << 16, 16)) == 2);
static_assert(stamp_current(make_stamp(RecordKind::message, 3u << 16, 16), (3u << 16) + 64, 16));
static_assert(!stamp_current(make_stamp(RecordKind::message, 2u << 16, 16), 3u << 16, 16));
inline constexpr std::size_t kFragmentPrefix = sizeof(std::uint64_t);  // total length in fragment_first

[[nodiscard]] constexpr std::uint64_t align_record(std::uint64_t n) noexcept {
    return (n + kRecordAlign - 1) & ~std::uint64_t{kRecordAlign - 1};
}
[[nodiscard]] constexpr std::uint64_t record_size(std::uint64_t payload) noexcept {
    return sizeof(RecordHeader) + align_record(payload);
}
// The largest single record: a quarter of the ring, so up to four records are in flight while a
// fragmented stream is copied (writer fills one while readers drain the others) — and never more
// than the u32 length field holds: rings of 32 GiB and more would otherwise cut the length and the
// reader would parse payload bytes as the next record. Kept a multiple of kRecordAlign.
inline constexpr std::uint64_t kMaxRecordLength = 0xffff'ffffULL & ~std::uint64_t{kRecordAlign - 1};
[[nodiscard]] constexpr std::uint64_t max_record_payload(std::uint64_t capacity) noexcept {
    const std::uint64_t quarter = capacity / 4 - sizeof(RecordHeader);
    return quarter < kMaxRecordLength ? quarter : kMaxRecordLength;
}
static_assert(max_record_payload(kMaxCapacity) <= 0xffff'ffffULL);

// Named access to the record at a ring offset (offset & (capacity - 1), a multiple of kRecordAlign).
[[nodiscard]] inline RecordHeader& record_at(std::byte* data, std::uint64_t offset) noexcept {
    return *reinterpret_cast<RecordHeader*>(data + offset);
}
[[nodiscard]] inline const RecordHeader& record_at(const std::byte* data, std::uint64_t offset) noexcept {
    return *reinterpret_cast<const RecordHeader*>(data + offset);
}
[[nodiscard]] inline std::byte* record_payload(std::byte* data, std::uint64_t offset) noexcept {
    return data + offset + sizeof(RecordHeader);
}
[[nodiscard]] inline const std::byte* record_payload(const std::byte* data, std::uint64_t offset) noexcept {
    return data + offset + sizeof(RecordHeader);
}
// The end of the record at `position`, whose stamp (loaded there) is current; `position` itself when
// its length cannot be: a padding record that does not reach the ring's end, a record longer than the
// largest or crossing the ring's end. The one judgement of a stamped header, for the writer's
// successor, the checks of a head past the tail, and a caught-up reader (Reader::stamped_at_head).
[[nodiscard]] inline std::uint64_t stamped_record_end(const RecordHeader& h, std::uint32_t stamp, std::uint64_t position,
                                                      std::uint64_t capacity) noexcept {
    const std::uint64_t to_end = capacity - (position & (capacity - 1));
    if (stamp_kind(stamp) == static_cast<std::uint32_t>(RecordKind::padding))
        return h.length + sizeof(RecordHeader) == to_end ? position + to_end : position;
    if (h.length > max_record_payload(capacity) || record_size(h.length) > to_end) return position;
    return position + record_size(h.length);
}

// Where the run of records stamped at and after `tail` ends (== tail: none). The writer stamps a
// commit's records, then exchanges the tail (ring.hpp, publish order): one that died in between left
// them stamped, and a caught-up reader may have read them, so its head may lie past the tail. At most
// one commit's records lie there: a padding record and the record after it. A stamp whose record
// cannot be (a length beyond the largest, a padding record not reaching the ring's end) ends the run.
// acquire: pairs with the stamp's release store, so the lengths read here are the writer's.
[[nodiscard]] inline std::uint64_t stamped_end(const std::byte* data, std::uint64_t capacity, std::uint64_t tail) noexcept {
    const auto lap_shift = static_cast<unsigned>(std::countr_zero(capacity));
    std::uint64_t pos = tail;
    for (int records = 0; records < 2; ++records) {
        const RecordHeader& h = record_at(data, pos & (capacity - 1));
        const std::uint32_t stamp = h.stamp.load(std::memory_order_acquire);
        if (!stamp_current(stamp, pos, lap_shift)) break;
        const std::uint64_t end = stamped_record_end(h, stamp, pos, capacity);
        if (end == pos) break;
        pos = end;
        // A padding record: the record it leads to may be stamped too.
        if (stamp_kind(stamp) != static_cast<std::uint32_t>(RecordKind::padding)) break;
    }
    return pos;
}

// Cursors (tail, heads) only ever advance by whole records: one that is not a multiple of
// kRecordAlign is corrupt (a header read there could straddle the ring's end).
[[nodiscard]] constexpr bool cursor_aligned(std::uint64_t cursor) noexcept { return cursor % kRecordAlign == 0; }
// The furthest a cursor found at attach may be: 2^63 bytes (~90 years of 3 GB/s, ~3 years of a
// sustained 100 GB/s). Past it the sums the ring takes for granted (tail + record, head + capacity,
// a padding's end) come within reach of 2^64 and wrap: a segment that says otherwise was written by
// something else, and is refused as corrupt instead of losing messages behind a wrapped tail.
inline constexpr std::uint64_t kMaxCursorAtAttach = std::uint64_t{1} << 63;

// ---- the gather doorbell object "<group>.bell": one line -------------------------------------------
inline constexpr std::uint64_t kDoorbellMagic = 0x4c4c'4542'4347'5243ULL;  // "RCGCBELL"
struct alignas(kLine) DoorbellLine {  // its own line: workers load collector_sleeping on every publish
    std::atomic<std::uint64_t> magic;               // stored last (release) by the creator
    std::atomic<std::uint32_t> doorbell_seq;        // futex word the collector sleeps on
    std::atomic<std::uint32_t> ranks;               // group size, checked on attach
    std::atomic<std::uint64_t> collector_sleeping;  // bit 0: the collector may be asleep on doorbell_seq
    std::atomic<std::uint64_t> rings;               // futex_wake calls by workers (diagnostics)
    std::atomic<std::uint64_t> waits;               // futex_wait calls by the collector
    std::uint32_t abi_version;                      // kAbiVersion, checked on attach
    std::uint32_t layout_hash;                      // kLayoutHash, checked on attach
    EventfdSlot collector_eventfd;                  // the collector's eventfd while it waits on one
};
static_assert(std::is_standard_layout_v<DoorbellLine> && sizeof(DoorbellLine) == kLine);
// A queue's attach tells a doorbell from a foreign object by the magic at the same place.
static_assert(offsetof(DoorbellLine, magic) == offsetof(SegmentHeader, magic));

// ---- layout hash: any change of a size or offset changes it, so mismatched builds refuse ----------
[[nodiscard]] constexpr std::uint32_t fnv1a_step(std::uint32_t h, std::uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i) {
        h ^= static_cast<std::uint32_t>((v >> (8 * i)) & 0xff);
        h *= 16777619u;
    }
    return h;
}
[[nodiscard]] constexpr std::uint32_t compute_layout_hash() noexcept {
    std::uint32_t h = 2166136261u;
    for (std::uint64_t v : {std::uint64_t{kLine}, std::uint64_t{sizeof(SegmentHeader)},
                            std::uint64_t{sizeof(WriterLine)}, std::uint64_t{sizeof(SpaceLine)},
                            std::uint64_t{sizeof(ReaderSlot)}, std::uint64_t{sizeof(RecordHeader)},
                            std::uint64_t{kRecordAlign}, std::uint64_t{kFragmentPrefix},
                            std::uint64_t{offsetof(SegmentHeader, flags)},
                            std::uint64_t{offsetof(SegmentHeader, writer_owner)},
                            std::uint64_t{offsetof(WriterLine, notify_seq)},
                            std::uint64_t{sizeof(ReaderSleepLine)},
                            std::uint64_t{offsetof(SpaceLine, writer_sleeping)},
                            std::uint64_t{offsetof(ReaderSlot, owner)},
                            std::uint64_t{kOwnerStartBits}, std::uint64_t{kOwnerPidBits},
                            std::uint64_t{sizeof(DoorbellLine)},
                            std::uint64_t{offsetof(DoorbellLine, collector_sleeping)},
                            std::uint64_t{kMaxRecordLength}, std::uint64_t{sizeof(EventfdSlot)},
                            std::uint64_t{offsetof(ReaderSlot, eventfd)},
                            std::uint64_t{offsetof(SpaceLine, writer_eventfd)},
                            std::uint64_t{offsetof(DoorbellLine, collector_eventfd)},
                            std::uint64_t{offsetof(RecordHeader, stamp)}, std::uint64_t{kStampKindBits}})
        h = fnv1a_step(h, v);
    return h;
}
inline constexpr std::uint32_t kLayoutHash = compute_layout_hash();

}  // namespace ringcast::layout
