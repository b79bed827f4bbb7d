// ringcast/error.hpp — how ringcast reports results and failures.
//
// Two channels, on purpose:
//  * Status: the expected outcomes of a blocking call (ok, timed out, closed, cancelled). They are
//    returned, [[nodiscard]], because a caller must branch on them on the hot path.
//  * Error (an exception): bad input or a broken environment — foreign/old/truncated segment,
//    oversize message, duplicate rank, permission denied, no space in /dev/shm, dead peer. Each
//    carries an ErrorCode a program can switch on and a message a human can act on.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ringcast {

enum class [[nodiscard]] Status : std::uint8_t {
    ok,         // the operation completed
    timed_out,  // the deadline passed first (or a signal ended the wait: WaitOptions::end_on_signal);
                // nothing was consumed or published by this call
    closed,     // the writer closed the queue and this reader has drained everything before the close
    cancelled,  // another thread called cancel() on this endpoint
};

[[nodiscard]] constexpr const char* to_string(Status s) noexcept {
    switch (s) {
        case Status::ok: return "ok";
        case Status::timed_out: return "timed out";
        case Status::closed: return "closed";
        case Status::cancelled: return "cancelled";
    }
    return "?";
}

enum class ErrorCode : std::uint8_t {
    invalid_argument,   // a size, rank, name or option the caller passed is unusable
    not_found,          // no segment of that name
    already_exists,     // create(): a segment of that name exists
    permission_denied,  // the segment belongs to someone else / mode forbids us
    no_space,           // /dev/shm lacks the room for the segment
    not_ringcast,       // the segment is not a ringcast segment (foreign magic)
    version_mismatch,   // a ringcast segment of an older or newer ABI
    corrupt,            // a header or record field is inconsistent with the segment
    rank_in_use,        // the rank is attached by a live process
    writer_in_use,      // another live process is the writer
    message_too_large,  // reserve(n) beyond the largest contiguous record
    protocol,           // API misuse (commit without reserve, release without peek, ...)
    peer_dead,          // the writer or a reader died
    stale_reply,        // a reply carried another request's tag
    system,             // an unexpected system call failure; message names the call and errno
    rank_left,          // the rank was released by a clean detach (ReaderOptions::keep_place was false)
    fell_behind,        // a remote reader missed messages (past the high-water mark, or joined late)
};

class Error : public std::runtime_error {
public:
    Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
    [[nodiscard]] ErrorCode code() const noexcept { return code_; }

private:
    ErrorCode code_;
};

// Ends every peer_dead message: a killed process never removes its segments, and the user who meets
// the death is the one who can sweep them.
inline constexpr const char* kDeadPeerHint =
    " (killed processes leave their segments in /dev/shm: `ringcast gc`, or `python3 -m ringcast gc`, removes "
    "those nobody uses any more)";

// peer_dead from a writer: a reader process died holding its rank (Writer's dead-reader check), with the
// rank's index in the ring and the pid as data — for a caller that knows its readers by other names
// (the Python binding's local_reader_ranks), which retells it without taking the message apart.
class ReaderDiedError : public Error {
public:
    ReaderDiedError(std::uint32_t rank_index, std::int64_t pid)
        : Error(ErrorCode::peer_dead, text("reader rank " + std::to_string(rank_index) + " (pid " + std::to_string(pid) + ")")),
          rank_index_(rank_index),
          pid_(pid) {}
    [[nodiscard]] std::uint32_t rank_index() const noexcept { return rank_index_; }
    [[nodiscard]] std::int64_t pid() const noexcept { return pid_; }
    // The message, its reader named by `who` ("reader rank 1 (pid 4242)").
    [[nodiscard]] static std::string text(const std::string& who) {
        return who + " died without releasing; the writer cannot make progress" + kDeadPeerHint;
    }

private:
    std::uint32_t rank_index_;
    std::int64_t pid_;
};

// Throws Error(system) naming the call and strerror(errno_value).
[[noreturn]] void throw_system_error(const char* call, int errno_value);

}  // namespace ringcast
