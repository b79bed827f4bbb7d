// libFuzzer target: the ownership state machine — who holds the writer role and each reader rank
// (layout.hpp's owner words; ring.cpp's claim C1/C2, detach D1, eviction E1/E2, the writer's claim) —
// under random interleavings of attach, detach, death, liveness ticks, writes and reads, checked
// after every step against `Model`, an executable statement of the rules:
//
//   attach r     evicted → peer_dead; left → rank_left; attached by a live owner → rank_in_use;
//                otherwise (never attached, detached, attached by a dead owner) → attached, and the
//                rank's sleep bit is cleared (C2: a predecessor killed asleep left it set)
//   detach r     (clean) → detached with keep_place, else left; its own sleep bit cleared (an event
//                loop's arm() may leave it set; nothing here sets a live rank's bit, so it is clear)
//   death r      the owner dies, asleep (its sleep bit stays set) or awake; the word stays attached
//   tick         the writer's liveness check: every attached rank with a dead owner whose head is the
//                slowest held head is evicted (state evicted, sleep bit cleared: E1 + E2) — or, without
//                eviction, the first such rank is named in a peer_dead error and nothing changes
//   writer death the writer dies, asleep for space (its sleep bit stays set) or awake
//   writer claim a live writer → writer_in_use; otherwise ours: its space bit is cleared, and so is
//                the sleep bit of every evicted or left rank (an E2 a dead writer may have owed)
//   reader tick  peer_dead iff the writer is dead and the rank has read every message it published
//                (what a dead writer published is read first; the queue is never closed here)
//   write, read  every reader gets the messages in order from where its rank left off (a replacement
//                resumes at its dead or detached predecessor's head); a held rank is never overwritten
//
// "Death" is simulated in one process: the owner word is replaced by one naming this pid with another
// start time (to owner_alive, a dead process whose pid was reused), then the object is destroyed — its
// D1 / release CAS fails on the changed word, as nothing of a killed process runs. A dead writer's
// destructor still stores `closed`; the harness restores the flags, as a SIGKILL would have left them.
//
// Input: byte 0 — readers 1 + (b & 3), bit 2: the writer evicts dead readers; then one op per byte:
// op = b % 9, arg = b / 9 (rank = arg % readers; the next bit of arg picks keep_place / asleep / a count).
// Not covered (sequential by design): races inside one claim (tests/model/ring.pml, the fault suites).
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <unistd.h>

#include "ringcast/ring.hpp"

namespace {

using namespace ringcast;
using layout::SlotState;

constexpr std::uint64_t kCapacity = layout::kMinCapacity;
constexpr std::size_t kMessage = 4080;  // one 4096-byte record: 16 fill the ring
constexpr std::uint32_t kMaxReaders = 4;

void expect(bool holds, const std::string& promise) {
    if (holds) return;
    std::fprintf(stderr, "fuzz_ownership: %s\n", promise.c_str());
    std::abort();
}

const char* state_name(SlotState s) {
    switch (s) {
        case SlotState::never_attached: return "never_attached";
        case SlotState::attached: return "attached";
        case SlotState::detached: return "detached";
        case SlotState::evicted: return "evicted";
        case SlotState::left: return "left";
    }
    return "?";
}

// The rules, on the model's own state (heads and tail are read from the segment: the model predicts
// ownership, the readers' checks below predict the data).
struct Model {
    struct Rank {
        SlotState state = SlotState::never_attached;
        bool alive = false;    // attached: is the owner alive?
        bool asleep = false;   // the rank's sleep bit
        std::uint64_t next_seq = 0;  // the next message this rank's holder must receive
    };
    std::array<Rank, kMaxReaders> ranks{};
    bool writer_alive = true;
    bool writer_asleep = false;
    std::uint64_t written = 0;  // messages published so far (seq numbers 0..written-1)

    static bool holds_writer(SlotState s) { return s != SlotState::evicted && s != SlotState::left; }

    // attach r: the error code it must throw, or nullopt for success.
    [[nodiscard]] std::optional<ErrorCode> attach(std::uint32_t r) {
        Rank& k = ranks[r];
        if (k.state == SlotState::evicted) return ErrorCode::peer_dead;
        if (k.state == SlotState::left) return ErrorCode::rank_left;
        if (k.state == SlotState::attached && k.alive) return ErrorCode::rank_in_use;
        k.state = SlotState::attached;
        k.alive = true;
        k.asleep = false;  // C2
        return std::nullopt;
    }
    void detach(std::uint32_t r, bool keep_place) { ranks[r].state = keep_place ? SlotState::detached : SlotState::left; }
    void death(std::uint32_t r, bool asleep) {
        ranks[r].alive = false;
        ranks[r].asleep = asleep;
    }
    // The writer's tick: the rank it must name in peer_dead, or -1.
    [[nodiscard]] int tick(bool evict, const std::array<std::uint64_t, kMaxReaders>& heads, std::uint32_t readers,
                           std::uint64_t tail) {
        std::uint64_t min_head = tail;
        for (std::uint32_t r = 0; r < readers; ++r)
            if (holds_writer(ranks[r].state)) min_head = std::min(min_head, heads[r]);
        for (std::uint32_t r = 0; r < readers; ++r) {
            Rank& k = ranks[r];
            if (k.state != SlotState::attached || k.alive || heads[r] != min_head) continue;
            if (!evict) return static_cast<int>(r);
            k.state = SlotState::evicted;
            k.asleep = false;  // E2
        }
        return -1;
    }
    [[nodiscard]] std::optional<ErrorCode> writer_claim(std::uint32_t readers) {
        if (writer_alive) return ErrorCode::writer_in_use;
        writer_alive = true;
        writer_asleep = false;
        for (std::uint32_t r = 0; r < readers; ++r)
            if (!holds_writer(ranks[r].state)) ranks[r].asleep = false;
        return std::nullopt;
    }
};

std::string segment_name() { return "rc-fuzz-owner-" + std::to_string(::getpid()); }

class Harness {
public:
    Harness(std::uint32_t readers, bool evict) : readers_(readers), evict_(evict) {
        Segment::remove(name_);
        segment_.emplace(Segment::create(name_, SegmentOptions{.readers = readers, .capacity = kCapacity}));
        writer_options_.evict_dead_readers = evict;
        writer_options_.liveness_interval = std::chrono::hours(1);  // only the explicit ticks judge
        writer_options_.unlink_on_destroy = false;
        writer_options_.wait.kind = WaitKind::futex;  // zero timeouts: polls, never a spin
        reader_options_.liveness_interval = std::chrono::hours(1);
        reader_options_.wait.kind = WaitKind::futex;
        writer_.emplace(Writer::open(name_, writer_options_));
    }
    ~Harness() {
        for (auto& r : readers_held_) r.reset();
        writer_.reset();
        segment_.reset();
        Segment::remove(name_);
    }
    Harness(const Harness&) = delete;
    Harness& operator=(const Harness&) = delete;

    void step(std::uint8_t byte) {
        const unsigned op = byte % 9;
        const unsigned arg = byte / 9;
        const std::uint32_t r = arg % readers_;
        const bool flag = ((arg / readers_) & 1) != 0;
        switch (op) {
            case 0: attach(r, flag); break;
            case 1: detach(r); break;
            case 2: reader_death(r, flag); break;
            case 3: writer_tick(); break;
            case 4: write(1 + (arg % 8)); break;
            case 5: read(r, 1 + (arg / readers_) % 4); break;
            case 6: writer_death(flag); break;
            case 7: writer_claim(); break;
            case 8: reader_tick(r); break;
        }
        check_shared_state(op);
    }

private:
    Segment& seg() { return *segment_; }
    layout::ReaderSlot& slot(std::uint32_t r) { return seg().reader_slot(r); }

    void attach(std::uint32_t r, bool keep_place) {
        const std::optional<ErrorCode> want = model_.attach(r);
        ReaderOptions o = reader_options_;
        o.keep_place = keep_place;
        try {
            Reader reader = Reader::attach(name_, r, o);
            expect(!want, "attach of rank " + std::to_string(r) + " succeeded; the rules say error " +
                              std::to_string(static_cast<int>(*want)));
            expect(!readers_held_[r], "two live Reader objects hold rank " + std::to_string(r));
            readers_held_[r].emplace(std::move(reader));
            keep_place_[r] = keep_place;
        } catch (const Error& e) {
            expect(want && e.code() == *want, "attach of rank " + std::to_string(r) + " threw (" + e.what() +
                                                  "); the rules say " +
                                                  (want ? "error " + std::to_string(static_cast<int>(*want)) : "success"));
        }
    }

    void detach(std::uint32_t r) {
        if (!readers_held_[r]) return;
        readers_held_[r].reset();
        model_.detach(r, keep_place_[r]);
    }

    // Simulated SIGKILL of the rank's holder (header comment).
    void reader_death(std::uint32_t r, bool asleep) {
        if (!readers_held_[r]) return;
        if (asleep) slot_sleep_word(r).fetch_or(std::uint64_t{1} << (r % 64));  // 3a, then killed
        slot(r).owner.store(reused_pid(slot(r).owner.load()));
        readers_held_[r].reset();  // its D1 CAS fails: the word is no longer its own
        model_.death(r, asleep);
    }

    void writer_death(bool asleep) {
        if (!writer_) return;
        auto& h = seg().header();
        if (asleep) seg().space_line().writer_sleeping.fetch_or(1);
        h.writer_owner.store(reused_pid(h.writer_owner.load()));
        const std::uint32_t flags = h.flags.load();
        writer_.reset();     // stores closed, its release CAS fails ...
        h.flags.store(flags);  // ... and a SIGKILL would have stored nothing
        model_.writer_alive = false;
        model_.writer_asleep = asleep;
    }

    void writer_claim() {
        const std::optional<ErrorCode> want = model_.writer_claim(readers_);
        try {
            Writer w = Writer::open(name_, writer_options_);
            expect(!want, "Writer::open succeeded beside a live writer");
            writer_.emplace(std::move(w));
        } catch (const Error& e) {
            expect(want && e.code() == *want, std::string("Writer::open threw: ") + e.what());
        }
    }

    void writer_tick() {
        if (!writer_) return;
        std::array<std::uint64_t, kMaxReaders> heads{};
        for (std::uint32_t r = 0; r < readers_; ++r) heads[r] = slot(r).head.load();
        const int named = model_.tick(evict_, heads, readers_, seg().writer_line().tail.load());
        try {
            writer_->check_liveness();
            expect(named < 0, "the writer's tick passed over dead lagging rank " + std::to_string(named));
        } catch (const Error& e) {
            expect(named >= 0 && e.code() == ErrorCode::peer_dead &&
                       std::string(e.what()).find("rank " + std::to_string(named) + " ") != std::string::npos,
                   std::string("the writer's tick threw: ") + e.what() + "; the rules name rank " + std::to_string(named));
        }
    }

    void reader_tick(std::uint32_t r) {
        if (!readers_held_[r]) return;
        try {
            readers_held_[r]->check_liveness();
            expect(model_.writer_alive || model_.ranks[r].next_seq < model_.written,
                   "a reader's tick passed over a dead writer with every message read");
        } catch (const Error& e) {
            expect(!model_.writer_alive && model_.ranks[r].next_seq == model_.written && e.code() == ErrorCode::peer_dead,
                   std::string("a reader's tick threw: ") + e.what() + " (it read " +
                       std::to_string(model_.ranks[r].next_seq) + " of " + std::to_string(model_.written) + " messages)");
        }
    }

    void write(unsigned count) {
        if (!writer_) return;
        std::array<std::byte, kMessage> msg{};
        for (unsigned i = 0; i < count; ++i) {
            const std::uint64_t seq = model_.written;
            std::memcpy(msg.data(), &seq, sizeof seq);
            const Status s = writer_->write(msg, std::chrono::nanoseconds(0), seq);
            if (s != Status::ok) {
                expect(s == Status::timed_out, std::string("write returned ") + to_string(s));
                break;
            }
            ++model_.written;
        }
    }

    void read(std::uint32_t r, unsigned count) {
        if (!readers_held_[r]) return;
        Model::Rank& k = model_.ranks[r];
        for (unsigned i = 0; i < count; ++i) {
            const Message m = readers_held_[r]->peek(std::chrono::nanoseconds(0));
            if (m.status == Status::timed_out) {
                expect(k.next_seq == model_.written, "rank " + std::to_string(r) + " found nothing; message " +
                                                         std::to_string(k.next_seq) + " of " +
                                                         std::to_string(model_.written) + " is unread");
                return;
            }
            expect(m.status == Status::ok, std::string("peek returned ") + to_string(m.status));
            std::uint64_t seq = ~std::uint64_t{0};
            if (m.bytes.size() == kMessage) std::memcpy(&seq, m.bytes.data(), sizeof seq);
            expect(seq == k.next_seq && m.tag == seq, "rank " + std::to_string(r) + " got message " +
                                                          std::to_string(seq) + ", expected " + std::to_string(k.next_seq));
            readers_held_[r]->release();
            ++k.next_seq;
        }
    }

    void check_shared_state(unsigned op) {
        const std::string after = " (after op " + std::to_string(op) + ")";
        const pid_t me = ::getpid();
        const std::uint64_t tail = seg().writer_line().tail.load();
        for (std::uint32_t r = 0; r < readers_; ++r) {
            const Model::Rank& k = model_.ranks[r];
            const layout::Owner o = layout::unpack_owner(slot(r).owner.load());
            expect(o.state == k.state, "rank " + std::to_string(r) + " is " + state_name(o.state) + ", the rules say " +
                                           state_name(k.state) + after);
            const bool holder = k.state == SlotState::attached;
            expect(holder ? o.pid == std::uint32_t(me) : o.pid == 0 && o.start_time == 0,
                   "rank " + std::to_string(r) + " (" + state_name(o.state) + ") names pid " + std::to_string(o.pid) + after);
            const bool bit = (slot_sleep_word(r).load() >> (r % 64) & 1) != 0;
            expect(bit == k.asleep, "rank " + std::to_string(r) + "'s sleep bit is " + (bit ? "set" : "clear") +
                                        ", the rules say " + (k.asleep ? "set" : "clear") + after);
            if (Model::holds_writer(k.state))  // a held rank's unread bytes are never overwritten
                expect(tail - slot(r).head.load() <= kCapacity, "the writer overran held rank " + std::to_string(r) + after);
        }
        const bool writer_bit = seg().space_line().writer_sleeping.load() != 0;
        expect(writer_bit == model_.writer_asleep, std::string("the writer's sleep bit is ") +
                                                       (writer_bit ? "set" : "clear") + after);
        const layout::Owner w = layout::unpack_owner(seg().header().writer_owner.load());
        expect(w.pid == std::uint32_t(me), "the writer role names pid " + std::to_string(w.pid) + after);
        expect((seg().header().flags.load() & layout::kFlagClosed) == 0, "the queue was closed" + after);
    }

    std::atomic<std::uint64_t>& slot_sleep_word(std::uint32_t r) { return seg().reader_sleep_line().sleeping[r / 64]; }

    // The same pid with another start time: to owner_alive, a dead process whose pid was reused.
    static std::uint64_t reused_pid(std::uint64_t word) {
        layout::Owner o = layout::unpack_owner(word);
        o.start_time = (o.start_time ^ 1) & layout::kOwnerStartMask;
        return layout::pack_owner(o);
    }

    const std::string name_ = segment_name();
    const std::uint32_t readers_;
    const bool evict_;
    Model model_;
    WriterOptions writer_options_;
    ReaderOptions reader_options_;
    std::optional<Segment> segment_;
    std::optional<Writer> writer_;
    std::array<std::optional<Reader>, kMaxReaders> readers_held_;
    std::array<bool, kMaxReaders> keep_place_{};
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    Harness h(1 + (data[0] & 3u), (data[0] & 4u) != 0);
    for (std::size_t i = 1; i < size && i < 4096; ++i) h.step(data[i]);
    return 0;
}
