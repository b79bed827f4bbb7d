// The gather group (include/ringcast/gather.hpp): doorbell object, collector and worker.
#include "ringcast/gather.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ringcast {

std::string gather_ring_name(std::string_view group, std::uint32_t rank) {
    return std::string(group) + ".r" + std::to_string(rank);
}
std::string gather_bell_name(std::string_view group) { return std::string(group) + ".bell"; }

std::string GatherResult::describe() const {
    std::string s = to_string(status);
    if (!missing.empty()) {
        s += missing.size() == 1 ? " waiting for rank " : " waiting for ranks ";
        for (std::size_t i = 0; i < missing.size(); ++i) s += (i ? ", " : "") + std::to_string(missing[i]);
    }
    return s;
}

// ---- doorbell object ------------------------------------------------------------------------------

DoorbellMapping DoorbellMapping::create(const std::string& name, std::uint32_t ranks, mode_t mode) {
    Segment::validate_name(name);
    const std::string path = "/" + name;
    const int fd = ::shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        if (errno == EEXIST) throw Error(ErrorCode::already_exists, "doorbell '" + name + "' already exists");
        if (errno == EACCES) throw Error(ErrorCode::permission_denied, "permission denied creating '" + name + "'");
        throw_system_error("shm_open", errno);
    }
    if (::fchmod(fd, mode) != 0 || ::ftruncate(fd, sizeof(layout::DoorbellLine)) != 0) {
        const int err = errno;
        ::close(fd);
        ::shm_unlink(path.c_str());
        throw_system_error("ftruncate", err);
    }
    void* p = ::mmap(nullptr, sizeof(layout::DoorbellLine), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) {
        ::shm_unlink(path.c_str());
        throw_system_error("mmap", err);
    }
    auto* line = static_cast<layout::DoorbellLine*>(p);
    line->ranks.store(ranks, std::memory_order_relaxed);
    line->magic.store(layout::kDoorbellMagic, std::memory_order_release);  // publishes the fields above
    return DoorbellMapping(line);
}

DoorbellMapping DoorbellMapping::open(const std::string& name, std::uint32_t ranks) {
    Segment::validate_name(name);
    const int fd = ::shm_open(("/" + name).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == ENOENT) throw Error(ErrorCode::not_found, "gather group doorbell '" + name + "' does not exist");
        if (errno == EACCES) throw Error(ErrorCode::permission_denied, "permission denied opening '" + name + "'");
        throw_system_error("shm_open", errno);
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != sizeof(layout::DoorbellLine)) {
        ::close(fd);
        throw Error(ErrorCode::not_ringcast, "'" + name + "' is not a ringcast doorbell (wrong size)");
    }
    void* p = ::mmap(nullptr, sizeof(layout::DoorbellLine), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    if (p == MAP_FAILED) throw_system_error("mmap", err);
    DoorbellMapping m(static_cast<layout::DoorbellLine*>(p));
    if (m.line_->magic.load(std::memory_order_acquire) != layout::kDoorbellMagic)
        throw Error(ErrorCode::not_ringcast, "'" + name + "' is not a ringcast doorbell (magic)");
    if (ranks != 0 && m.line_->ranks.load(std::memory_order_relaxed) != ranks)
        throw Error(ErrorCode::corrupt, "doorbell '" + name + "' belongs to a group of " +
                                            std::to_string(m.line_->ranks.load()) + " ranks");
    return m;
}

DoorbellMapping::~DoorbellMapping() {
    if (line_ != nullptr) ::munmap(line_, sizeof(layout::DoorbellLine));
}

// ---- collector ------------------------------------------------------------------------------------

GatherCollector GatherCollector::create(std::string_view name, const GatherOptions& options) {
    if (options.ranks < 1 || options.ranks > layout::kMaxReaders)
        throw Error(ErrorCode::invalid_argument, "a gather group needs 1.." + std::to_string(layout::kMaxReaders) +
                                                     " ranks, got " + std::to_string(options.ranks));
    if (options.method == GatherWait::futex_waitv && options.ranks > kFutexWaitvMax)
        throw Error(ErrorCode::invalid_argument, "futex_waitv gathers at most 128 ranks; use the doorbell");
    Segment::validate_name(gather_bell_name(name));  // the longest derived names must be valid too
    Segment::validate_name(gather_ring_name(name, options.ranks - 1));
    GatherCollector c(std::string(name), options,
                      DoorbellMapping::create(gather_bell_name(name), options.ranks, options.mode));
    // From here on the destructor removes whatever was created if a later step throws.
    ReaderOptions ro;
    ro.wait = options.wait;
    ro.liveness_interval = options.liveness_interval;
    c.readers_.reserve(options.ranks);
    for (std::uint32_t r = 0; r < options.ranks; ++r) {
        const std::string ring = gather_ring_name(name, r);
        { auto seg = Segment::create(ring, SegmentOptions{.readers = 1, .capacity = options.capacity, .mode = options.mode}); }
        c.readers_.push_back(Reader::attach(ring, 0, ro));
    }
    return c;
}

GatherCollector::~GatherCollector() {
    if (name_.empty()) return;  // moved from
    for (std::uint32_t r = 0; r < options_.ranks; ++r) {
        try {
            Segment::remove(gather_ring_name(name_, r));
        } catch (...) {
        }
    }
    ::shm_unlink(("/" + gather_bell_name(name_)).c_str());
}

void GatherCollector::cancel() noexcept {
    cancelled_->store(true, std::memory_order_seq_cst);
    auto& b = bell_.line();
    wake_all({&b.doorbell_seq, &b.collector_sleeping, &b.waits});
    for (auto& rd : readers_) wake_all(rd.data_site());  // the futex_waitv path sleeps on these
}

void GatherCollector::check_liveness(std::span<const std::uint32_t> ranks) {
    std::vector<std::uint32_t> which(ranks.begin(), ranks.end());
    if (which.empty())
        for (std::uint32_t r = 0; r < readers_.size(); ++r) which.push_back(r);
    for (std::uint32_t r : which)
        if (r >= readers_.size()) throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(r) + " out of range");
    check_pending_alive(which);
}

// A pending rank whose worker died will never answer: fail naming it (runs every liveness_interval).
void GatherCollector::check_pending_alive(const std::vector<std::uint32_t>& pending) {
    for (std::uint32_t r : pending) {
        try {
            readers_[r].check_writer();
        } catch (const Error& e) {
            throw Error(ErrorCode::peer_dead, "gather '" + name_ + "': worker rank " + std::to_string(r) + ": " + e.what());
        }
    }
}

// One look at every pending ring (tail and closed flag, acquire): true if one has a record or closed.
bool GatherCollector::any_pending_ready(const std::vector<std::uint32_t>& pending) noexcept {
    for (std::uint32_t r : pending)
        if (readers_[r].poll_acquire()) return true;
    return false;
}

WaitOutcome GatherCollector::wait_any(const std::vector<std::uint32_t>& pending, Deadline deadline) {
    const auto any_ready = [&] { return any_pending_ready(pending); };
    if (options_.method == GatherWait::futex_waitv) return wait_any_waitv(pending, deadline);
    auto& b = bell_.line();
    struct IdleCheck {
        GatherCollector* self;
        const std::vector<std::uint32_t>* pending;
    } idle{this, &pending};
    const auto on_idle = [](void* c) {
        auto* ic = static_cast<IdleCheck*>(c);
        ic->self->check_pending_alive(*ic->pending);
    };
    WaitContext ctx{{&b.doorbell_seq, &b.collector_sleeping, &b.waits},
                    deadline,
                    cancelled_.get(),
                    options_.wait.before_sleep,
                    options_.liveness_interval,
                    on_idle,
                    &idle,
                    &reply_waits_};
    const std::uint64_t waits_before = b.waits.load(std::memory_order_relaxed);
    const WaitOutcome o = block_until(options_.wait, ctx, any_ready);
    kernel_waits_ += b.waits.load(std::memory_order_relaxed) - waits_before;
    return o;
}

// The futex_waitv variant of the sleep phase: steps 3a..3f of wait.hpp, over every pending ring.
WaitOutcome GatherCollector::wait_any_waitv(const std::vector<std::uint32_t>& pending, Deadline deadline) {
    const auto any_ready = [&] { return any_pending_ready(pending); };
    const auto cancelled = [&] { return cancelled_->load(std::memory_order_acquire); };
    if (any_ready()) return WaitOutcome::ready;
    if (cancelled()) return WaitOutcome::cancelled;
    if (deadline == kPollOnly) return WaitOutcome::timed_out;
    // Adaptive hybrid: the wait is timed and recorded, as in wait.hpp's block_until(options, ...).
    const Deadline start = Clock::now();
    const bool adaptive = options_.wait.adaptive();
    const auto finish = [&](WaitOutcome o) {
        if (adaptive && o != WaitOutcome::cancelled) reply_waits_.record(Clock::now() - start, options_.wait.spin_max);
        return o;
    };
    // Spin phase of the configured strategy (hybrid: a few µs, or the adaptive budget) before the
    // kernel wait; past spin_for the adaptive spin is polite, as AdaptiveHybridStrategy's.
    if (options_.wait.kind != WaitKind::futex) {
        const auto budget = adaptive ? reply_waits_.budget(options_.wait.spin_for, options_.wait.spin_max)
                                     : options_.wait.spin_for;
        const AdaptiveHybridStrategy polite{options_.wait.spin_for, budget};
        const auto spin_end = options_.wait.kind == WaitKind::hybrid ? start + budget : deadline;
        for (std::uint32_t i = 1;; ++i) {
            if (options_.wait.kind == WaitKind::spin_yield) ::sched_yield(); else cpu_relax();
            if (any_ready()) return finish(WaitOutcome::ready);
            if ((i & 63u) == 0) {
                if (cancelled()) return WaitOutcome::cancelled;
                auto now = Clock::now();
                if (now >= deadline) return finish(WaitOutcome::timed_out);
                if (now >= spin_end) break;
                if (adaptive && !polite.keep_spinning(now - start, now)) break;
            }
        }
    }
    std::vector<FutexWaitvEntry> entries(pending.size());
    auto next_check = Clock::now() + options_.liveness_interval;
    for (;;) {
        for (std::uint32_t r : pending)  // 3a: announce on every ring
            readers_[r].data_site().sleepers->fetch_add(1, std::memory_order_seq_cst);
        std::atomic_thread_fence(std::memory_order_seq_cst);  // 3b: pairs with each worker's w2
        for (std::size_t i = 0; i < pending.size(); ++i) {    // 3c: snapshot every word
            auto* word = readers_[pending[i]].data_site().seq;
            entries[i] = {word->load(std::memory_order_acquire), reinterpret_cast<std::uintptr_t>(word), kFutex2SizeU32, 0};
        }
        const bool ready = any_ready();  // 3d: re-check after announcing
        const bool stop = ready || cancelled();
        FutexWaitResult res = FutexWaitResult::woken;
        if (!stop) {
            if (options_.wait.before_sleep.fn) options_.wait.before_sleep.fn(options_.wait.before_sleep.context);
            ++kernel_waits_;
            res = futex_waitv(entries.data(), static_cast<unsigned>(entries.size()), std::min(deadline, next_check));  // 3e
        }
        for (std::uint32_t r : pending)  // 3f
            readers_[r].data_site().sleepers->fetch_sub(1, std::memory_order_relaxed);
        if (res == FutexWaitResult::unsupported)
            throw Error(ErrorCode::system, "futex_waitv is not supported by this kernel (needs Linux 5.16); use the doorbell");
        if (ready || any_ready()) return finish(WaitOutcome::ready);
        if (cancelled()) return WaitOutcome::cancelled;
        const auto now = Clock::now();
        if (now >= deadline) return finish(WaitOutcome::timed_out);
        if (now >= next_check) {
            check_pending_alive(pending);
            next_check = now + options_.liveness_interval;
        }
    }
}

GatherResult GatherCollector::collect(std::uint64_t tag, std::span<const std::uint32_t> ranks,
                                      std::chrono::nanoseconds timeout) {
    Timeout lazy_deadline(timeout);
    GatherResult result;
    result.replies.resize(readers_.size());
    std::vector<std::uint32_t> pending;
    if (ranks.empty()) {
        for (std::uint32_t r = 0; r < readers_.size(); ++r) pending.push_back(r);
    } else {
        for (std::uint32_t r : ranks) {
            if (r >= readers_.size())
                throw Error(ErrorCode::invalid_argument, "rank " + std::to_string(r) + " out of range (group of " +
                                                             std::to_string(readers_.size()) + ")");
            if (std::find(pending.begin(), pending.end(), r) == pending.end()) pending.push_back(r);
        }
    }
    Status closed_status = Status::ok;
    std::vector<std::uint32_t> closed_ranks;
    for (;;) {
        // Drain every pending rank that has something, in any order, without waiting.
        for (auto it = pending.begin(); it != pending.end();) {
            Reader& rd = readers_[*it];
            const Message m = rd.peek(std::chrono::nanoseconds::zero());
            if (m.status == Status::closed) {
                closed_status = Status::closed;
                closed_ranks.push_back(*it);
                it = pending.erase(it);
                continue;
            }
            if (m.status != Status::ok) {
                ++it;
                continue;
            }
            if (m.tag != tag) {
                const std::uint64_t got = m.tag;
                rd.release();  // consumed: the next collect() starts clean
                throw Error(ErrorCode::stale_reply, "gather '" + name_ + "': rank " + std::to_string(*it) +
                                                        " replied with tag " + std::to_string(got) +
                                                        " while collecting tag " + std::to_string(tag));
            }
            result.replies[*it].emplace(m.bytes.begin(), m.bytes.end());
            rd.release();
            it = pending.erase(it);
        }
        if (pending.empty()) break;
        // ONE wait for the whole pending set.
        const WaitOutcome o = wait_any(pending, lazy_deadline.deadline());
        if (o == WaitOutcome::ready) continue;
        result.status = o == WaitOutcome::cancelled ? Status::cancelled : Status::timed_out;
        result.missing = pending;
        result.missing.insert(result.missing.end(), closed_ranks.begin(), closed_ranks.end());
        std::sort(result.missing.begin(), result.missing.end());
        return result;
    }
    result.status = closed_status;
    result.missing = closed_ranks;
    std::sort(result.missing.begin(), result.missing.end());
    return result;
}

// ---- worker ---------------------------------------------------------------------------------------

GatherWorker GatherWorker::attach(std::string_view name, std::uint32_t rank, const WriterOptions& options) {
    WriterOptions wo = options;
    wo.unlink_on_destroy = false;  // the collector owns the names
    auto bell = DoorbellMapping::open(gather_bell_name(name), 0);
    const std::uint32_t ranks = bell.line().ranks.load(std::memory_order_relaxed);
    if (rank >= ranks)
        throw Error(ErrorCode::invalid_argument, "worker rank " + std::to_string(rank) + " out of range: gather '" +
                                                     std::string(name) + "' has " + std::to_string(ranks) + " ranks");
    return GatherWorker(Writer::open(gather_ring_name(name, rank), wo), std::move(bell), rank);
}

// Right after the reply's seq_cst exchange of tail (Writer::commit_record): w2..w3 of wait.hpp against
// the collector's announce on collector_sleeping (same argument, with the tail exchange as w1).
void GatherWorker::ring_bell() noexcept {
    auto& b = bell_.line();
    notify_sleepers({&b.doorbell_seq, &b.collector_sleeping, &b.waits}, b.rings);
}
void GatherWorker::ring_bell_always() noexcept {
    auto& b = bell_.line();
    wake_all({&b.doorbell_seq, &b.collector_sleeping, &b.waits});
}

Status GatherWorker::reply(std::uint64_t tag, std::span<const std::byte> bytes, std::chrono::nanoseconds timeout) {
    const Status s = writer_.write(bytes, timeout, tag);
    if (s == Status::ok) ring_bell();
    return s;
}

GatherWorker::~GatherWorker() {
    if (!active_) return;  // moved from
    writer_.close();       // the collector sees closed instead of waiting for a reply that never comes
    ring_bell_always();
}

void GatherWorker::commit_reply(std::size_t used, std::uint64_t tag) {
    writer_.commit(used, tag);
    ring_bell();
}

}  // namespace ringcast
