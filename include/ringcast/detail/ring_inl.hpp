// ringcast/detail/ring_inl.hpp — the hot paths of Writer and Reader, inline so a publish or a release
// compiles down to the stores, the fence and the load of the protocol. Included by ring.hpp only.
// Attach/create/liveness (cold) live in src/ring.cpp, and so do the waits and the cases of peek()
// behind the hot path (wait_for_space_blocking, wait_for_data_blocking, peek_blocking).
#pragma once

namespace ringcast {

// Diagnostics counter with one storer: a load and a store, no locked read-modify-write.
inline void bump_counter(std::atomic<std::uint64_t>& counter) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// ---- Writer hot path ------------------------------------------------------------------------------

namespace detail {
// The FillFn of write() and write_parts(): gathers a record's bytes from the parts. Calls come in
// message order, so it keeps its cursor; the first call locates it from the offset (a resumed write
// starts mid-message).
struct PartsFill {
    std::span<const std::span<const std::byte>> parts;
    std::size_t part = 0;
    std::uint64_t in_part = 0;
    bool located = false;

    static void fill(void* self, std::span<std::byte> dst, std::uint64_t offset) noexcept {
        auto& f = *static_cast<PartsFill*>(self);
        if (!f.located) {
            f.in_part = offset;
            while (f.part < f.parts.size() && f.in_part >= f.parts[f.part].size()) f.in_part -= f.parts[f.part++].size();
            f.located = true;
        }
        std::byte* out = dst.data();
        for (std::uint64_t left = dst.size(); left != 0;) {
            const std::uint64_t n = std::min<std::uint64_t>(left, f.parts[f.part].size() - f.in_part);
            if (n != 0) std::memcpy(out, f.parts[f.part].data() + f.in_part, n);  // an empty part may have no data()
            out += n;
            left -= n;
            f.in_part += n;
            if (f.in_part == f.parts[f.part].size()) {
                ++f.part;
                f.in_part = 0;
            }
        }
    }
};
}  // namespace detail

// The writer sleeps for space on space_seq, announced by bit 0 of writer_sleeping (one writer).
inline SleepSite Writer::space_site() const noexcept {
    auto& s = segment_.space_line();
    return {&s.space_seq, &s.writer_sleeping, 1, 0, &s.writer_waits, nullptr};
}
// Readers sleep for data on notify_seq (or their eventfd), announced by their rank's bit; the writer
// looks at every word.
inline SleepSite Writer::data_site() const noexcept {
    return {&line_->notify_seq, segment_.reader_sleep_line().sleeping, (readers_ + 63) / 64, 0, nullptr,
            reader_eventfds_.get()};
}

// A rank whose head holds the writer back: everything but evicted and left.
[[nodiscard]] inline bool holds_writer(layout::SlotState state) noexcept {
    return state != layout::SlotState::evicted && state != layout::SlotState::left;
}

// The slowest held rank. acquire: pairs with Reader::store_head's release, so the reader's last
// loads of the bytes it released happen-before our overwrite of them. The owner word is loaded
// before the head: a rank we skip was evicted (E1) or left (D1) by a CAS that happened before, and
// neither state is ever left again (a claim refuses both), so its head can never hold us again.
inline std::uint64_t Writer::min_reader_head_acquire() const noexcept {
    std::uint64_t min_head = tail_;
    for (std::uint32_t r = 0; r < readers_; ++r) {
        auto& slot = segment_.reader_slot(r);
        if (!holds_writer(layout::unpack_owner(slot.owner.load(std::memory_order_acquire)).state)) continue;
        min_head = std::min(min_head, slot.head.load(std::memory_order_acquire));
    }
    return min_head;
}

// Waits until tail_ + need <= min(head) + capacity (the mirror image of Reader::wait_for_data).
inline Status Writer::wait_for_space(std::uint64_t need, Timeout& timeout) {
    if (tail_ + need <= known_free_end_) [[likely]] return Status::ok;  // fast path: no shared load at all
    return wait_for_space_blocking(need, timeout);  // src/ring.cpp
}

// Makes room for one record of `payload` bytes at tail_ (after a padding record if it would cross the
// ring's end). Sets reserved_pos_. Nothing is visible to readers until commit_record().
inline Status Writer::reserve_record(std::uint64_t payload, Timeout& timeout) {
    // Every write, reserve and abort comes here first: a fork()ed child's copy is refused before it
    // writes into the parent's ring (two relaxed loads: detail/process.hpp), a closed one stops.
    if (made_in_.in_forked_child()) [[unlikely]] forked_copy("write / reserve");
    if (closed_) [[unlikely]] return Status::closed;
    const std::uint64_t rec = layout::record_size(payload);
    const std::uint64_t to_end = capacity_ - (tail_ & mask_);  // >= kRecordAlign: tail_ stays aligned
    const std::uint64_t pad = rec > to_end ? to_end : 0;
    if (const Status s = wait_for_space(pad + rec, timeout); s != Status::ok) return s;
    if (pad != 0) {  // its stamp waits for commit_record: a reservation given up leaves it unpublished
        auto& h = layout::record_at(data_, tail_ & mask_);
        // pad = to_end < rec <= header + kMaxRecordLength, so the length fits its u32.
        h.length = static_cast<std::uint32_t>(pad - sizeof(layout::RecordHeader));
        h.tag = 0;
        RINGCAST_CRASH_POINT(publish_padding);
    }
    reserved_pos_ = tail_ + pad;
    return Status::ok;
}

// Z of layout.hpp ("Stamps"): clears the stamp word where a reader that takes the record ending at
// `end` polls next. The word is ours once every held reader is past the previous lap's record that
// may start there: end + header <= min(head) + capacity. Otherwise the slowest held head is exactly
// end - capacity (the reservation made end <= min(head) + capacity, and cursors are multiples of the
// header size): its next record — a record, so a stamp of the previous lap — starts at `end`, and
// is left alone. Unless that head is not at a record boundary (release_fragments refuses such a mark,
// but a kept head is whatever the slot says): then the word is old payload, and one that
// passes for a stamp of end's lap — which no record of the previous lap carries — is cleared anyway,
// so a misplaced head cannot make a caught-up reader of another rank take payload for a record.
inline void Writer::clear_stamp_ahead(std::uint64_t end) noexcept {
    const std::uint64_t word_end = end + sizeof(layout::RecordHeader);
    if (word_end > known_free_end_) known_free_end_ = min_reader_head_acquire() + capacity_;
    auto& word = layout::record_at(data_, end & mask_).stamp;
    if (word_end <= known_free_end_ || layout::stamp_current(word.load(std::memory_order_relaxed), end, lap_shift_))
        word.store(0, std::memory_order_relaxed);
}

// Steps 2..5 of the publish order (header comment of ring.hpp).
// (RINGCAST_CRASH_POINT: the fault tests' crash points, detail/crash_point.hpp; nothing elsewhere.)
inline void Writer::commit_record(layout::RecordKind kind, std::uint64_t payload, std::uint64_t tag) noexcept {
    RINGCAST_CRASH_POINT(publish_1_payload);
    auto& h = layout::record_at(data_, reserved_pos_ & mask_);
    h.length = static_cast<std::uint32_t>(payload);  // payload <= max_payload_ <= kMaxRecordLength: no cut
    h.tag = tag;
    const std::uint64_t end = reserved_pos_ + layout::record_size(payload);
    RINGCAST_CRASH_POINT(publish_2_header);
    // 2b: Z, then the stamps (release: pair with a caught-up reader's acquire load of the stamp at its
    // head, Reader::stamped_at_head; the relaxed 0 of Z is ordered before them too). A padding record
    // in front is stamped after the record it leads to: a reader that takes it finds that record.
    clear_stamp_ahead(end);
    h.stamp.store(layout::make_stamp(kind, reserved_pos_, lap_shift_), std::memory_order_release);
    if (reserved_pos_ != tail_)
        layout::record_at(data_, tail_ & mask_)
            .stamp.store(layout::make_stamp(layout::RecordKind::padding, tail_, lap_shift_), std::memory_order_release);
    tail_ = end;
    RINGCAST_CRASH_POINT(publish_2_stamped);
    // 3 + 4: seq_cst exchange (a release: pairs with the readers' acquire loads of tail), then w2..w3.
    const bool woke = publish_and_notify(line_->tail, tail_, data_site(), line_->wake_calls,
                                         detail::CrashPoint::publish_3_tail);
    RINGCAST_CRASH_POINT(publish_4_readers_woken);
    ahead_.published(woke);  // how far ahead of this publish a wake_ahead() came, and whether it paid
    // 5: the same exchange is w1 for the bell's sleeper too.
    if (bell_.seq != nullptr) {
        notify_sleepers(bell_, *bell_wake_calls_);
        RINGCAST_CRASH_POINT(publish_5_bell);
    }
}

inline Reservation Writer::reserve(std::size_t n, std::chrono::nanoseconds timeout_ns) {
    if (n > max_payload_)
        throw Error(ErrorCode::message_too_large,
                    "reserve(" + std::to_string(n) + ") exceeds the largest contiguous record of this ring (" +
                        std::to_string(max_payload_) + " bytes = capacity/4 - header); use write() for larger messages");
    has_reservation_ = false;
    Timeout timeout(timeout_ns);
    if (stream_broken_) {
        if (const Status s = finish_broken_stream(timeout); s != Status::ok) return {s, {}};
    }
    if (const Status s = reserve_record(n, timeout); s != Status::ok) return {s, {}};
    has_reservation_ = true;
    reserved_size_ = n;
    return {Status::ok, {layout::record_payload(data_, reserved_pos_ & mask_), n}};
}

inline void Writer::commit(std::size_t used, std::uint64_t tag) {
    if (made_in_.in_forked_child()) [[unlikely]] forked_copy("commit()");  // the parent's reservation
    if (!has_reservation_)
        throw Error(ErrorCode::protocol, closed_ ? "commit() after close() (or of a moved-from Writer): the reservation "
                                                   "was dropped, nothing is published"
                                                 : "commit() without a successful reserve()");
    if (used > reserved_size_)
        throw Error(ErrorCode::protocol, "commit(" + std::to_string(used) + ") exceeds the reservation of " +
                                             std::to_string(reserved_size_) + " bytes");
    has_reservation_ = false;
    commit_record(layout::RecordKind::message, used, tag);
    bump_counter(line_->messages);
}

inline Status Writer::finish_broken_stream(Timeout& timeout) {
    if (const Status s = reserve_record(0, timeout); s != Status::ok) return s;
    commit_record(layout::RecordKind::fragment_abort, 0, 0);
    stream_broken_ = false;
    return Status::ok;
}

inline Status Writer::write(std::span<const std::byte> message, std::chrono::nanoseconds timeout_ns, std::uint64_t tag) {
    has_reservation_ = false;
    Timeout timeout(timeout_ns);
    if (stream_broken_) {
        if (const Status s = finish_broken_stream(timeout); s != Status::ok) return s;
    }
    if (message.size() <= max_payload_) {  // the common case: one record, one memcpy
        if (const Status s = reserve_record(message.size(), timeout); s != Status::ok) return s;
        if (!message.empty()) std::memcpy(layout::record_payload(data_, reserved_pos_ & mask_), message.data(), message.size());
        commit_record(layout::RecordKind::message, message.size(), tag);
        bump_counter(line_->messages);
        return Status::ok;
    }
    check_message_size(message.size());
    const std::span<const std::byte> one[1] = {message};
    detail::PartsFill gather{one};
    WriteProgress progress;
    return write_stream(&detail::PartsFill::fill, &gather, message.size(), timeout, tag, progress, false);
}

// A reader refuses a fragmented message whose announced total exceeds kMaxMessage (a corrupt total,
// as far as it can tell): a writer that published the first fragments of one would leave every reader
// calling the segment corrupt at it, for good. Refused before any record of it is reserved.
inline void Writer::check_message_size(std::uint64_t total) const {
    if (total > kMaxMessage)
        throw Error(ErrorCode::message_too_large, "a message of " + std::to_string(total) +
                                                      " bytes exceeds the largest a reader reassembles (" +
                                                      std::to_string(kMaxMessage) + " bytes, 1 TiB)");
}

inline Status Writer::begin_message(Timeout& timeout, WriteProgress* progress, std::uint64_t total, std::uint64_t tag) {
    // Resume only the stream this progress belongs to, and only while it is still the open one.
    const bool resume = progress != nullptr && progress->started() && progress->stream == stream_serial_ && stream_broken_;
    if (resume) {
        // The rest of the same message only: other bytes after its published fragments would be a
        // message readers call corrupt, for good (or a whole record inside the open stream).
        if (progress->total != total || progress->tag != tag)
            throw Error(ErrorCode::invalid_argument,
                        "a write resumed with this WriteProgress is not its message: " + std::to_string(total) +
                            " bytes with tag " + std::to_string(tag) + ", the message it resumes has " +
                            std::to_string(progress->total) + " bytes and tag " + std::to_string(progress->tag) +
                            " (a new message takes a fresh WriteProgress; the open one is withdrawn then)");
        return Status::ok;
    }
    if (progress != nullptr) *progress = {};
    if (stream_broken_) return finish_broken_stream(timeout);
    return Status::ok;
}

inline Status Writer::write_parts(std::span<const std::span<const std::byte>> parts, std::chrono::nanoseconds timeout_ns,
                                  std::uint64_t tag, WriteProgress* progress) {
    has_reservation_ = false;
    Timeout timeout(timeout_ns);
    std::uint64_t total = 0;
    for (const auto& p : parts) total += p.size();
    if (total > max_payload_) check_message_size(total);  // before anything of it, or an owed abort, goes out
    if (const Status s = begin_message(timeout, progress, total, tag); s != Status::ok) return s;
    if (total <= max_payload_) {
        if (const Status s = reserve_record(total, timeout); s != Status::ok) return s;
        std::byte* dst = layout::record_payload(data_, reserved_pos_ & mask_);
        for (const auto& p : parts) {
            if (!p.empty()) std::memcpy(dst, p.data(), p.size());
            dst += p.size();
        }
        commit_record(layout::RecordKind::message, total, tag);
        bump_counter(line_->messages);
        return Status::ok;
    }
    detail::PartsFill gather{parts};
    WriteProgress local;
    return write_stream(&detail::PartsFill::fill, &gather, total, timeout, tag, progress != nullptr ? *progress : local,
                        progress != nullptr);
}

inline Status Writer::write_filled(std::uint64_t total, FillFn fill, void* context, std::chrono::nanoseconds timeout_ns,
                                   std::uint64_t tag, WriteProgress* progress) {
    has_reservation_ = false;
    if (total > max_payload_) check_message_size(total);  // before anything of it, or an owed abort, goes out
    Timeout timeout(timeout_ns);
    if (const Status s = begin_message(timeout, progress, total, tag); s != Status::ok) return s;
    if (total <= max_payload_) {
        if (const Status s = reserve_record(total, timeout); s != Status::ok) return s;
        // A throwing fill leaves the record unpublished: tail_ moves only in commit_record.
        fill(context, {layout::record_payload(data_, reserved_pos_ & mask_), static_cast<std::size_t>(total)}, 0);
        commit_record(layout::RecordKind::message, total, tag);
        bump_counter(line_->messages);
        return Status::ok;
    }
    WriteProgress local;
    return write_stream(fill, context, total, timeout, tag, progress != nullptr ? *progress : local, progress != nullptr);
}

// The fragment path of every write: fragment_first carries the total length in front of its
// payload, then fragment_middle*, fragment_last. Starts at progress.written (0, or where a resumable
// write stopped). On timed_out/cancelled (or an exception such as peer_dead) with fragments out, the
// stream is owed an abort record (stream_broken_) unless the caller may resume it (`resumable`).
// `fill` runs between a fragment's reservation and its commit; if it throws, that fragment stays
// unpublished and the fragments before it are owed an abort record (stream_broken_ is already set).
inline Status Writer::write_stream(FillFn fill, void* context, std::uint64_t total, Timeout& timeout,
                                   std::uint64_t tag, WriteProgress& progress, bool resumable) {
    if (!progress.started()) {
        progress.stream = ++stream_serial_;
        progress.total = total;  // what a resume must bring again (begin_message)
        progress.tag = tag;
    }
    while (progress.written < total) {
        const bool first = progress.written == 0;
        const std::size_t prefix = first ? layout::kFragmentPrefix : 0;
        const std::uint64_t chunk = std::min<std::uint64_t>(total - progress.written, max_payload_ - prefix);
        const bool last = progress.written + chunk == total;
        if (const Status s = reserve_record(prefix + chunk, timeout); s != Status::ok) {
            // Fragments are out: readers must be told to drop them, unless the caller resumes.
            stream_broken_ = !first;
            if (!resumable && !first) progress = {};
            return s;
        }
        std::byte* dst = layout::record_payload(data_, reserved_pos_ & mask_);
        if (first) std::memcpy(dst, &total, sizeof total);
        dst += prefix;
        fill(context, {dst, static_cast<std::size_t>(chunk)}, progress.written);
        commit_record(first ? layout::RecordKind::fragment_first
                            : (last ? layout::RecordKind::fragment_last : layout::RecordKind::fragment_middle),
                      prefix + chunk, tag);
        progress.written += chunk;
        // Readers are mid-stream from the first fragment until the last: any way out of this loop
        // from here on (timeout, cancel, or an exception such as peer_dead) owes them an abort record.
        stream_broken_ = !last;
        if (!last) RINGCAST_CRASH_POINT(fragment_between);
    }
    bump_counter(line_->messages);
    return Status::ok;
}

inline Status Writer::abort_write(WriteProgress& progress, std::chrono::nanoseconds timeout_ns) {
    const bool open = progress.started() && progress.stream == stream_serial_ && stream_broken_;
    if (!open) {  // nothing of it out: nothing to withdraw (a cleanup call, fine in a fork()ed child too)
        progress = {};
        return Status::ok;
    }
    if (made_in_.in_forked_child()) [[unlikely]] forked_copy("abort_write()");  // the parent's open stream
    progress = {};
    Timeout timeout(timeout_ns);
    return finish_broken_stream(timeout);
}

// ---- Reader hot path ------------------------------------------------------------------------------

namespace detail {
// Grows a reassembly buffer to hold `need` bytes (need <= total), keeping its first `filled` bytes.
// Memory follows the fragments that actually arrived (first 1 MiB or the need, then doubling, never
// beyond the announced total): a corrupt or hostile total cannot make the reader allocate it up front.
inline void grow_assembly(std::unique_ptr<std::byte[]>& buffer, std::uint64_t& capacity, std::uint64_t filled,
                          std::uint64_t need, std::uint64_t total) {
    if (need <= capacity && buffer) return;  // (allocated even for need 0: memcpy wants a real pointer)
    const std::uint64_t grown = std::min(total, std::max({need, 2 * capacity, std::uint64_t{1} << 20}));
    auto bigger = std::make_unique_for_overwrite<std::byte[]>(grown);  // no zero-fill of GiBs
    if (filled != 0) std::memcpy(bigger.get(), buffer.get(), filled);
    buffer = std::move(bigger);
    capacity = grown;
}
}  // namespace detail

inline SleepSite Reader::data_site() const noexcept { return data_site_of(segment_, rank_); }
inline SleepSite Reader::space_site() const noexcept {
    auto& s = segment_.space_line();
    return {&s.space_seq, &s.writer_sleeping, 1, 0, nullptr, writer_eventfd_.get()};
}

// Steps 2..3 of the release order (header comment of ring.hpp).
inline void Reader::store_head(std::uint64_t new_head) noexcept {
    RINGCAST_CRASH_POINT(release_1_done);
    // seq_cst exchange (a release: pairs with the writer's acquire loads of heads), then w2..w3.
    publish_and_notify(slot_->head, new_head, space_site(), slot_->wake_calls, detail::CrashPoint::release_2_head);
    RINGCAST_CRASH_POINT(release_3_woken);
}

// A caught-up reader's look at the record's own line (layout.hpp, "Stamps"). acquire: pairs with the
// writer's release store of the stamp (commit_record 2b), so the header and payload written before it
// are visible. True: a record of this lap is complete at head_, published up to cached_tail_ (its
// end). A stamped record whose length cannot be is left to the tail: record_at_head judges it against
// the tail the writer published, and says what is wrong.
inline bool Reader::stamped_at_head() noexcept {
    const std::uint64_t end = stamped_end_at_head();
    if (end == head_) return false;
    cached_tail_ = end;
    return true;
}

// stamped_at_head's look, nothing stored: the end of the stamped record at head_, or head_ if none.
inline std::uint64_t Reader::stamped_end_at_head() const noexcept {
    const std::uint64_t pos = head_ & mask_;
    const auto& h = layout::record_at(static_cast<const std::byte*>(data_), pos);
    const std::uint32_t stamp = h.stamp.load(std::memory_order_acquire);
    if (!layout::stamp_current(stamp, head_, lap_shift_)) return head_;  // 0 (Z) or the previous lap's
    return layout::stamped_record_end(h, stamp, head_, capacity_);
}

// A record at head_ by what this reader holds or by the stamp alone: no load of the tail's line.
inline bool Reader::stamp_look() noexcept { return has_pending_ || head_ < cached_tail_ || stamped_at_head(); }

// Stamp first: while the writer is idle the three loads hit this core's cache; when it publishes, the
// record's line is the one fetched, and the tail's line is not needed for the message.
inline bool Reader::poll_acquire() noexcept {
    if (stamp_look()) return true;
    const bool closed = (segment_.header().flags.load(std::memory_order_acquire) & layout::kFlagClosed) != 0;
    cached_tail_ = line_->tail.load(std::memory_order_acquire);  // pairs with Writer::commit_record
    return head_ < cached_tail_ || closed;
}

// Waits until the writer published past head_, or closed. ok: a record is at head_ (cached_tail_ >
// head_); closed: closed and nothing left.
inline Status Reader::wait_for_data(Timeout& timeout) {
    if (slot_ == nullptr) [[unlikely]] moved_from();  // every read comes here first
    // The record's own line first (no clock read): a reader that comes back for the next message
    // before it is published leaves the tail's line where the writer stores it, and block_until's
    // case 1 takes the same look where a spin follows (the spin's first checkpoint takes the full one).
    if (head_ < cached_tail_ || stamped_at_head()) [[likely]] return Status::ok;
    return wait_for_data_blocking(timeout);  // src/ring.cpp
}

// The header fields are loaded once each (a writer changing them under us cannot make two checks
// disagree); the acquire load of tail or stamp that made cached_tail_ > head_ (poll_acquire, or
// stamped_at_head on the fast paths) made them visible, so the stamp is loaded relaxed here.
inline Reader::RecordAt Reader::record_at_head() const {
    const std::uint64_t pos = head_ & mask_;
    const auto& h = layout::record_at(static_cast<const std::byte*>(data_), pos);
    const std::uint64_t length = h.length;
    const std::uint32_t stamp = h.stamp.load(std::memory_order_relaxed);
    const std::uint32_t kind = layout::stamp_kind(stamp);
    const std::uint64_t tag = h.tag;
    if (!layout::stamp_current(stamp, head_, lap_shift_))
        corrupt("record stamp " + std::to_string(stamp) + " is not one of lap " +
                std::to_string(layout::lap_of(head_, lap_shift_)));
    const std::uint64_t to_end = capacity_ - pos;  // >= one header: head_ is aligned (checked at attach)
    const std::byte* payload = layout::record_payload(static_cast<const std::byte*>(data_), pos);
    if (kind == static_cast<std::uint32_t>(layout::RecordKind::padding)) {
        if (length + sizeof(layout::RecordHeader) != to_end) corrupt("padding record does not reach the ring's end");
        return {kind, length, 0, payload, head_ + to_end};
    }
    if (length > max_payload_) corrupt("record length " + std::to_string(length) + " exceeds the maximum");
    const std::uint64_t end = head_ + layout::record_size(length);
    if (layout::record_size(length) > to_end || end > cached_tail_) corrupt("record extends past the published tail");
    return {kind, length, tag, payload, end};
}

// Stores the message peek() returns and returns it from the value, not from the member: a copy read
// back from pending_ in wider loads than its fields were stored with cannot be forwarded from the
// store buffer (a stall of ~15 cycles per load, two per peek: 10-20 % of a round trip's code, measured
// in one thread).
inline Message Reader::keep_pending(const Message m) noexcept {
    pending_ = m;
    return m;
}

inline Message Reader::peek(std::chrono::nanoseconds timeout_ns) {
    // The parent's rank (and the message it peeked): refused before anything (as in peek_fragment).
    if (attached_in_.in_forked_child()) [[unlikely]] forked_copy("peek()");
    if (has_pending_) return pending_;
    if (streaming_ || fragments_held_) [[unlikely]] refuse_fragment_mix("peek()");
    // The common case inline: a whole message already published at the head (by the tail this
    // reader holds or by its stamp). Everything else — a wait, padding, fragments, a moved-from
    // reader — is peek_blocking's, out of line, which looks again from the start.
    if (slot_ != nullptr && !assembling_ && (head_ < cached_tail_ || stamped_at_head())) [[likely]] {
        const RecordAt rec = record_at_head();
        if (rec.kind == static_cast<std::uint32_t>(layout::RecordKind::message)) [[likely]] {
            has_pending_ = true;
            pending_end_ = rec.end;
            return keep_pending({Status::ok, {rec.payload, rec.length}, rec.tag});
        }
    }
    return peek_blocking(timeout_ns);
}

inline void Reader::release() {
    if (attached_in_.in_forked_child()) [[unlikely]] forked_copy("release()");  // the parent's message
    if (!has_pending_) {
        if (slot_ == nullptr) moved_from();  // (a move takes the pending message along)
        throw Error(ErrorCode::protocol, "release() without a peeked message");
    }
    has_pending_ = false;
    pending_ = {};
    if (slot_->head.load(std::memory_order_relaxed) != pending_end_) {  // relaxed: we are its only storer
        head_ = pending_end_;
        store_head(head_);
    }
    bump_counter(slot_->messages);
}

inline Status Reader::read(std::vector<std::byte>& into, std::chrono::nanoseconds timeout, std::uint64_t* tag) {
    const Message m = peek(timeout);
    if (m.status != Status::ok) return m.status;
    into.assign(m.bytes.begin(), m.bytes.end());
    if (tag != nullptr) *tag = m.tag;
    release();
    return Status::ok;
}

}  // namespace ringcast
