// ringcast/segment.hpp — create / open / remove a named POSIX shared-memory segment holding one queue.
//
// Creation is O_CREAT|O_EXCL|O_NOFOLLOW with an explicit fchmod (umask cannot widen or narrow the
// requested mode), owner-only 0600 by default. The space is reserved with posix_fallocate so a full
// /dev/shm is reported at create time rather than as a SIGBUS on first touch. Opening validates the
// header (magic, ABI version, layout hash) and every size field against the real size of the object
// before any pointer into it is formed. The creator and every process that uses the ring (prefault())
// populate the mapping's first 16 MiB: a fresh ring's first lap would otherwise pay a page fault per
// 4 KiB in every process (segment.cpp says what it measured).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "ringcast/layout.hpp"

namespace ringcast {

struct SegmentOptions {
    std::uint32_t readers = 1;              // number of reader ranks, 1..layout::kMaxReaders
    std::uint64_t capacity = 1ULL << 20;    // data ring bytes: power of two, >= 64 KiB
    mode_t mode = 0600;                     // permission bits of the shm object
    bool replace_existing = false;          // unlink a same-named segment first (owner only)
    // A same-named segment of ours that nobody uses any more — its creator, writer and every reader
    // dead (killed processes leave their segments behind) — is removed and the name reused. Off: such
    // a name is Error(already_exists) naming `ringcast gc`.
    bool reclaim_abandoned = true;
};

// Which object a name led to when it was opened or created (its file's device and inode): a name
// can be unlinked and taken by another object meanwhile, an open object's identity cannot change.
struct ObjectIdentity {
    dev_t dev = 0;
    ino_t ino = 0;
    [[nodiscard]] bool operator==(const ObjectIdentity&) const noexcept = default;
};

// An open POSIX shm object: the one shm_open / size / mmap / errno path of every ringcast object
// (queue segments and gather doorbells). Errors name the object and the real cause (not_found,
// already_exists, permission_denied, a symbolic link, no_space, system naming the call).
// Thread-safety: none needed (a short-lived local of create/open).
class ShmObject {
public:
    // O_CREAT|O_EXCL|O_NOFOLLOW, fchmod(mode) (umask neither widens nor narrows it), ftruncate(size),
    // posix_fallocate (a full /dev/shm is an error now, not a SIGBUS later). Any failure unlinks it.
    [[nodiscard]] static ShmObject create(std::string_view name, std::size_t size, mode_t mode);
    [[nodiscard]] static ShmObject open(std::string_view name);  // read-write, O_NOFOLLOW
    ShmObject(ShmObject&& o) noexcept
        : name_(std::move(o.name_)), fd_(std::exchange(o.fd_, -1)), size_(o.size_), identity_(o.identity_),
          created_(o.created_) {}
    ShmObject& operator=(ShmObject&&) = delete;
    ShmObject(const ShmObject&) = delete;
    ShmObject& operator=(const ShmObject&) = delete;
    ~ShmObject();
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] ObjectIdentity identity() const noexcept { return identity_; }
    // MAP_SHARED read-write mapping of the whole object; stays valid after this object is closed. A
    // failure unlinks an object this process just created.
    [[nodiscard]] void* map() const;

private:
    ShmObject(std::string name, int fd, std::size_t size, ObjectIdentity identity, bool created) noexcept
        : name_(std::move(name)), fd_(fd), size_(size), identity_(identity), created_(created) {}
    std::string name_;
    int fd_ = -1;
    std::size_t size_ = 0;
    ObjectIdentity identity_{};
    bool created_ = false;
};

// Thread-safety: a Segment is a mapping; moving/destroying it is not thread-safe, everything inside the
// mapping is accessed through atomics by ring.hpp.
class Segment {
public:
    Segment() = default;
    Segment(Segment&& other) noexcept;
    Segment& operator=(Segment&& other) noexcept;
    Segment(const Segment&) = delete;
    Segment& operator=(const Segment&) = delete;
    ~Segment();

    // Throws Error: invalid_argument, already_exists (naming who still uses the name), permission_denied,
    // no_space, system.
    [[nodiscard]] static Segment create(std::string_view name, const SegmentOptions& options);
    // Throws Error: invalid_argument, not_found, permission_denied, not_ringcast, version_mismatch,
    // corrupt, system.
    [[nodiscard]] static Segment open(std::string_view name);
    // Fills this process's page tables for the mapping's first 16 MiB, reading one byte per page
    // (segment.cpp says why and what it measured). create() does it itself; a process that will use
    // an opened ring (a reader, a writer reopening) calls it — inspection and gc do not.
    void prefault() const noexcept;
    // Removes the name; mappings stay valid until unmapped. Returns false if it did not exist.
    static bool remove(std::string_view name);
    // Validates a name: 1..kMaxNameLength chars of [A-Za-z0-9._-], not starting with '.'. Throws
    // invalid_argument.
    static void validate_name(std::string_view name);
    static constexpr std::size_t kMaxNameLength = 200;  // well under NAME_MAX (255) with "/dev/shm/"

    [[nodiscard]] bool valid() const noexcept { return base_ != nullptr; }
    [[nodiscard]] const std::string& name() const noexcept { return name_; }
    [[nodiscard]] std::byte* base() const noexcept { return base_; }
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    // The object this mapping is of (see ObjectIdentity): unlink_if_still_abandoned compares it with
    // what the name leads to now.
    [[nodiscard]] ObjectIdentity identity() const noexcept { return identity_; }

    [[nodiscard]] layout::SegmentHeader& header() const noexcept {
        return *reinterpret_cast<layout::SegmentHeader*>(base_);
    }
    [[nodiscard]] layout::WriterLine& writer_line() const noexcept {
        return *reinterpret_cast<layout::WriterLine*>(base_ + layout::kWriterLineOffset);
    }
    [[nodiscard]] layout::ReaderSleepLine& reader_sleep_line() const noexcept {
        return *reinterpret_cast<layout::ReaderSleepLine*>(base_ + layout::kReaderSleepLineOffset);
    }
    [[nodiscard]] layout::SpaceLine& space_line() const noexcept {
        return *reinterpret_cast<layout::SpaceLine*>(base_ + layout::kSpaceLineOffset);
    }
    [[nodiscard]] layout::ReaderSlot& reader_slot(std::uint32_t rank) const noexcept {
        return reinterpret_cast<layout::ReaderSlot*>(base_ + layout::kReaderSlotsOffset)[rank];
    }
    [[nodiscard]] std::byte* data() const noexcept {
        return base_ + layout::data_offset(header().reader_count);
    }

    // The header's closed flag (acquire: what the writer published before close() is visible).
    [[nodiscard]] bool closed_acquire() const noexcept {
        return (header().flags.load(std::memory_order_acquire) & layout::kFlagClosed) != 0;
    }
    // Whether a writer ever had this ring: closed (close() sets the flag for good), or a writer's
    // claim word set (Writer::create/open set it; ~Writer clears it only after its close, and a writer
    // that died unclosed leaves it). A gather's reply ring: whether its worker ever attached.
    [[nodiscard]] bool writer_ever_attached() const noexcept {
        return closed_acquire() || header().writer_owner.load(std::memory_order_acquire) != 0;
    }

    // Who still uses a segment image: "" when nobody (creator, writer and every reader dead or gone),
    // else e.g. "reader rank 3 is attached by live pid 812". The image must be a valid one.
    [[nodiscard]] static std::string user_of(const std::byte* image);
    // Validates a mapped image (used by open() and by the fuzzer): throws Error describing the first
    // inconsistency. `size` is the real size of the image.
    static void validate_image(const std::byte* image, std::size_t size);

private:
    Segment(std::string name, std::byte* base, std::size_t size, ObjectIdentity identity) noexcept
        : name_(std::move(name)), base_(base), size_(size), identity_(identity) {}
    void unmap() noexcept;

    std::string name_;
    std::byte* base_ = nullptr;
    std::size_t size_ = 0;
    ObjectIdentity identity_{};
};

// One object removed (or, dry run, to be removed) by sweep_abandoned().
struct AbandonedObject {
    std::string name;
    std::uint64_t bytes = 0;  // its size in /dev/shm
};

// An object sweep_abandoned() left in place, and why (the rule that kept it, in a user's words).
struct KeptObject {
    std::string name;
    std::string why;  // e.g. "in use: its writer pid 812 is alive"
};

// Removes every ringcast object of this user whose name starts with `prefix` and that nobody uses any
// more: segments whose creator, writer and every reader are dead (Segment::user_of), and gather
// doorbells whose group has no reply ring left. Killed processes leave their segments behind by
// nature; `ringcast gc` and Python's MessageQueue/ReplyGather (unless told not to) call this.
// Other users' objects, foreign objects, segments still being created or made by another ringcast
// version are never touched. dry_run: only lists. Thread-safe; safe against concurrent sweeps and
// creators (an object is unlinked only if it is still the one judged, see unlink_if_still_abandoned).
// Throws Error(system) if /dev/shm cannot be listed.
// `kept` (when given) receives every object under the prefix that looks like ringcast's (a segment's size
// and a valid name; a doorbell's size and suffix) and was left, with why: another user's, no magic yet
// (being created, or its creator died doing so), not usable (its error: another version, corrupt, ...),
// in use, made again under the name meanwhile, or a bell whose group still has a ring. Objects the
// magic shows are not ringcast's are not listed, nor those another sweep removed meanwhile.
[[nodiscard]] std::vector<AbandonedObject> sweep_abandoned(std::string_view prefix = {}, bool dry_run = false,
                                                           std::vector<KeptObject>* kept = nullptr);
// Unlinks `name` if it still leads to the object `seg` maps (Segment::identity), owned by us and
// unused. True if unlinked.
bool unlink_if_still_abandoned(std::string_view name, const Segment& seg);
// Unlinks `name` if it still leads to the object `seg` maps and is ours, used or not: what a creator
// removes when it is done, never a newer object made under the name since. True if unlinked.
bool unlink_if_still_this(std::string_view name, const Segment& seg);

// A gather doorbell ("<group>.bell") as found under `name`: a regular file with a doorbell's size and
// magic, readable by us; its identity, rank count, owner, mode and the ABI it was made with (another
// ringcast version's bell has the same size and magic). None: gone, unreadable, foreign.
struct JudgedBell {
    ObjectIdentity identity;
    std::uint32_t ranks = 0;
    uid_t owner_uid = 0;
    mode_t mode = 0;
    std::uint32_t abi_version = 0;
    bool this_version = false;  // ABI version and layout hash are this library's
};
[[nodiscard]] std::optional<JudgedBell> read_bell(std::string_view name);
// This user's bell of this version: what a sweep or a create may remove (another version's objects
// are never touched, as sweep_abandoned leaves their segments).
[[nodiscard]] bool ours_to_reclaim(const JudgedBell& bell) noexcept;
// read_bell, only where ours_to_reclaim.
[[nodiscard]] std::optional<JudgedBell> judge_bell(std::string_view name);
// Unlinks `name` if it still leads to the bell `judged` (never a newer object made under the name)
// and, unless `anyones`, it is this user's (what a sweep or a create may remove; `ringcast rm`, a
// person's choice, passes anyones: root may remove another user's bell, as it may any segment).
bool unlink_bell_if_still(std::string_view name, const JudgedBell& judged, bool anyones = false);

// Free bytes available to us in the filesystem backing POSIX shm (/dev/shm).
[[nodiscard]] std::uint64_t shm_free_bytes();

// This process's PID namespace: the inode of /proc/self/ns/pid, 0 if it cannot be read. A pid stored
// in a segment names a process only in its creator's namespace (SegmentHeader::creator_pid_ns): seen
// from another one it is nobody, or somebody else, so liveness cannot be judged across namespaces.
[[nodiscard]] std::uint32_t pid_namespace_id() noexcept;
// Why a segment's pids cannot be judged from this process (it was made in another PID namespace), or
// empty if they can (the same namespace, or either side's is unknown: judged as before the field).
[[nodiscard]] std::string foreign_pid_namespace(const layout::SegmentHeader& h);

// pid + start time (clock ticks since boot, /proc/<pid>/stat field 22): a pid-reuse-safe identity.
[[nodiscard]] std::uint64_t process_start_time(pid_t pid) noexcept;  // 0 if the process is gone
// start_time 0: unknown, judged by the pid alone. Compared modulo 2^39 (layout.hpp, owner words).
[[nodiscard]] bool process_alive(pid_t pid, std::uint64_t start_time) noexcept;
// Our own owner word for a role, in `state`.
[[nodiscard]] std::uint64_t my_owner_word(layout::SlotState state) noexcept;
// Is the holder named by an owner word alive? pid 0 (nobody) is not.
[[nodiscard]] inline bool owner_alive(const layout::Owner& o) noexcept {
    return o.pid != 0 && process_alive(static_cast<pid_t>(o.pid), o.start_time);
}

}  // namespace ringcast
