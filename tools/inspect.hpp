// Read-only inspection of ringcast segments for the `ringcast` command.
//
// A segment is opened O_RDONLY and mapped PROT_READ: inspecting never needs (nor takes) write access,
// so `ringcast stat` works on a group-readable segment of another user and cannot disturb a live queue.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

#include "ringcast/segment.hpp"  // JudgedBell

namespace ringcast::cli {

inline constexpr const char* kShmDir = "/dev/shm";

struct ReaderInfo {
    std::uint32_t rank = 0;
    // never_attached, attached, detached, evicted, left, dead (attached, owner gone), invalid (a state
    // word this version does not know)
    std::string state;
    std::uint32_t pid = 0;
    bool pid_alive = false;
    std::uint64_t head = 0;
    std::uint64_t lag_bytes = 0;     // tail - head (0 for evicted ranks)
    std::uint64_t lag_messages = 0;  // messages published - messages this rank consumed
    std::uint64_t messages = 0, waits = 0, wake_calls = 0;
};

struct SegmentInfo {
    std::string name;
    std::string error;  // non-empty: not inspectable (permission, corrupt, foreign); header fields unset
    bool gone = false;  // the name leads nowhere (removed since it was listed): error says so
    bool is_ringcast = false;  // the magic matched (even if the rest is corrupt)
    // The object the name led to when inspected (set whenever it was found, even unreadable): rm
    // removes only this object, never one made under the name since (remove_if_still).
    bool identified = false;
    ObjectIdentity identity;
    // Owner and mode: of the object (also for one we could not read, from the directory entry).
    uid_t owner_uid = 0;
    std::string owner;
    unsigned file_mode = 0;
    std::uint64_t file_size = 0;
    // From the header.
    std::uint32_t abi_version = 0, reader_count = 0, header_mode = 0, flags = 0;
    std::uint64_t capacity = 0, creation_time_ns = 0;
    std::uint32_t creator_pid = 0, writer_pid = 0;
    bool creator_alive = false, writer_alive = false;
    // Non-empty: made in another PID namespace (ringcast::foreign_pid_namespace says so); its pids
    // name other processes here, so every *_alive above is meaningless and it is never abandoned.
    std::string foreign_pid_ns;
    std::uint64_t tail = 0, messages = 0, writer_wake_calls = 0, writer_waits = 0;
    std::uint32_t notify_seq = 0, reader_sleepers = 0, space_seq = 0, writer_sleeping = 0;
    std::uint32_t wake_ahead_us = 0;  // the last wake-ahead's spin hint (WriterLine::ahead_us; 0: none made)
    std::vector<ReaderInfo> readers;

    [[nodiscard]] bool closed() const noexcept;
    [[nodiscard]] std::uint32_t live_readers() const noexcept;
    // Nobody can use it any more: creator, writer and every reader rank's owner are gone.
    [[nodiscard]] bool abandoned() const noexcept;
    // Who still uses it, e.g. "its writer pid 812 is alive"; "" when abandoned() (or not inspectable).
    [[nodiscard]] std::string user() const;
};

// Inspects /dev/shm/<name>. Never throws for a bad segment: fills `error` instead.
[[nodiscard]] SegmentInfo inspect(const std::string& name);
// inspect() of each listed name, leaving out those removed since the listing: a name that went in
// between is no segment any more, not one to show or report as an error.
[[nodiscard]] std::vector<SegmentInfo> inspect_listed(const std::vector<std::string>& names);

// Whether this process may unlink an object of `owner` from /dev/shm. The directory is sticky (1777):
// only the object's owner, the directory's owner, or a process with CAP_FOWNER (root) may.
[[nodiscard]] bool may_unlink(uid_t owner);

// What remove_if_still did.
enum class Removal {
    removed,
    gone,         // the name leads nowhere any more
    replaced,     // the name leads to another object than the one judged (made under the name since)
    now_in_use,   // (not forced) someone attached since it was judged unused
    unreadable,   // (not forced) it cannot be judged any more (now: error)
    failed,       // the unlink failed: err
};
struct RemovalResult {
    Removal outcome = Removal::failed;
    int err = 0;                // failed: the unlink's errno
    SegmentInfo now;            // the object as judged again just before the unlink
};
// Unlinks /dev/shm/<name> only if it still leads to the object `judged` (inspect's identity) and,
// unless `force`, that object is still a readable ringcast segment nobody uses. Between a judgement
// and the unlink, the name may have been removed and a new segment created under it (a writer
// reclaiming the name): a plain unlink would take that new one away from its users. (A window stays
// between this last look and the unlink itself, as no call unlinks a name only if it leads to a given
// inode: an attach landing exactly there keeps its mapping and works, only the name is gone — what
// --force does on purpose; a replacement landing there would lose its name, as with the library's
// own sweep.)
[[nodiscard]] RemovalResult remove_if_still(const std::string& name, const ObjectIdentity& judged, bool force);

// A gather group's doorbell ("<group>.bell", no segment header: layout::DoorbellLine): the group
// it rings for, and how many of the group's reply rings "<group>.r<N>" are there. A live group has
// all of them; a bell with none left is a killed collector's leftover (`gc` removes it).
struct BellInfo {
    JudgedBell judged;  // the object inspected (ranks, owner uid, mode): rm removes only it
    std::string name, group;
    std::string owner;  // judged.owner_uid's name
    std::uint32_t rings_left = 0;
};
// The doorbell under `name` (readable, its size and magic a doorbell's); none otherwise.
[[nodiscard]] std::optional<BellInfo> inspect_bell(const std::string& name);

// Names (starting with `prefix`) of the regular files in /dev/shm that carry the ringcast magic
// (readable by us), the doorbells among the rest, and the number of entries we could not read.
struct Listing {
    std::vector<std::string> names;
    std::vector<std::string> bells;
    std::size_t unreadable = 0;
};
[[nodiscard]] Listing list_segments(const std::string& prefix = {});

[[nodiscard]] std::string json_escape(const std::string& s);

}  // namespace ringcast::cli
