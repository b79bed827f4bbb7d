// Segment creation, opening and validation (see include/ringcast/segment.hpp).
#include "ringcast/segment.hpp"
#include "ringcast/detail/gather_names.hpp"  // the sweep finds a bell's group by these

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <algorithm>
#include <cstddef>

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ringcast/error.hpp"

namespace ringcast {

void throw_system_error(const char* call, int errno_value) {
    throw Error(ErrorCode::system, std::string(call) + " failed: " + std::strerror(errno_value));
}

namespace {
// The start of validate_image's text for a header whose magic is still 0 (reclaim_if_abandoned reads it).
constexpr std::string_view kNoMagicYet = "segment has no ringcast magic";

std::string shm_path(std::string_view name) { return "/" + std::string(name); }
// The same object as a file: where lstat / fstatat see what shm_open(shm_path(name)) opens.
std::string shm_file(std::string_view name) { return "/dev/shm/" + std::string(name); }

std::string human_bytes(std::uint64_t n) {
    char buf[64];
    if (n >= (1ULL << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(n) / double(1ULL << 30));
    else if (n >= (1ULL << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(n) / double(1ULL << 20));
    else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
    return buf;
}

// shm_open of a directory's name fails with EINVAL: what is there says why.
bool is_directory(std::string_view name) {
    struct stat st {};
    return ::lstat(shm_file(name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Why this process may not open what /dev/shm/<name> is, from its owner, group and mode: which of the
// three classes this process falls in, and what that class may do (attaching needs read and write).
bool in_group(gid_t gid) {
    if (::getegid() == gid) return true;
    const int n = ::getgroups(0, nullptr);
    if (n <= 0) return false;
    std::vector<gid_t> groups(static_cast<std::size_t>(n));
    const int got = ::getgroups(n, groups.data());
    return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) != groups.begin() + got;
}

std::string permission_text(std::string_view name) {
    struct stat st {};
    if (::lstat(shm_file(name).c_str(), &st) != 0) return "it is owner-only unless created with a wider mode";
    const unsigned mode = static_cast<unsigned>(st.st_mode & 07777);
    char octal[8];
    std::snprintf(octal, sizeof octal, "%04o", mode);
    const std::string me = std::to_string(::geteuid());
    const std::string owned = "it belongs to uid " + std::to_string(st.st_uid) + ", mode " + octal;
    const auto may = [](unsigned bits) {
        const bool r = (bits & 4) != 0, w = (bits & 2) != 0;
        return r && w ? "may read and write" : r ? "may read but not write" : w ? "may write but not read" : "may not open it";
    };
    std::string why;
    if (st.st_uid == ::geteuid()) {
        why = owned + "; its owner (this process's user) " + may(mode >> 6);
    } else if (in_group(st.st_gid)) {
        why = owned + "; its group " + std::to_string(st.st_gid) + ", which this process (uid " + me + ") is in, " +
              may(mode >> 3);
    } else if ((mode & 0060) != 0) {
        why = owned + ", shared with group " + std::to_string(st.st_gid) + "; this process (uid " + me +
              ") is not in that group, and others " + may(mode);
    } else if ((mode & 0006) == 0) {
        return owned + ", owner-only; this process runs as uid " + me;
    } else {
        why = owned + "; others, as this process (uid " + me + ") is, " + may(mode);
    }
    return why + " (attaching needs read and write)";
}

[[noreturn]] void throw_open_error(int err, std::string_view name, const char* what) {
    switch (err) {
        case ENOENT:
            throw Error(ErrorCode::not_found, "ringcast segment '" + std::string(name) + "' does not exist");
        case EEXIST:
            throw Error(ErrorCode::already_exists,
                        "ringcast segment '" + std::string(name) + "' already exists");
        case EACCES:
        case EPERM:
            throw Error(ErrorCode::permission_denied, "permission denied opening ringcast segment '" +
                                                          std::string(name) + "' (" + permission_text(name) + ")");
        case EINVAL:
        case EISDIR:
            if (is_directory(name))
                throw Error(ErrorCode::not_ringcast, "'" + shm_file(name) +
                                                         "' is a directory, not a ringcast segment; use another name");
            throw_system_error(what, err);
        case ELOOP:
            throw Error(ErrorCode::permission_denied,
                        "ringcast segment '" + std::string(name) + "' is a symbolic link; refusing to follow it");
        default: throw_system_error(what, err);
    }
}

std::uint64_t realtime_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count());
}

}  // namespace

void Segment::validate_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxNameLength)
        throw Error(ErrorCode::invalid_argument, "segment name must be 1.." + std::to_string(kMaxNameLength) +
                                                     " characters, got " + std::to_string(name.size()));
    if (name.front() == '.')
        throw Error(ErrorCode::invalid_argument, "segment name must not start with '.': '" + std::string(name) + "'");
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == '.' || c == '_' || c == '-';
        if (!ok)
            throw Error(ErrorCode::invalid_argument,
                        "segment name may only contain letters, digits, '.', '_' and '-': '" +
                            std::string(name) + "'");
    }
}

std::uint64_t shm_free_bytes() {
    struct statvfs st {};
    if (::statvfs("/dev/shm", &st) != 0) throw_system_error("statvfs(/dev/shm)", errno);
    return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

std::string Segment::user_of(const std::byte* image) {
    using namespace layout;
    const auto& h = *reinterpret_cast<const SegmentHeader*>(image);
    // Another namespace's pids say nothing here: its creator's pid 1 would be our init, alive or not.
    // Kept as in use: a sweep must never remove a live queue of a neighbouring container.
    if (std::string foreign = foreign_pid_namespace(h); !foreign.empty()) return foreign;
    if (process_alive(static_cast<pid_t>(h.creator_pid), h.creator_start_time))
        return "its creator pid " + std::to_string(h.creator_pid) + " is alive";
    const Owner writer = unpack_owner(h.writer_owner.load(std::memory_order_acquire));
    if (owner_alive(writer)) return "its writer pid " + std::to_string(writer.pid) + " is alive";
    const auto* slots = reinterpret_cast<const ReaderSlot*>(image + kReaderSlotsOffset);
    for (std::uint32_t r = 0; r < h.reader_count; ++r) {
        const Owner o = unpack_owner(slots[r].owner.load(std::memory_order_acquire));
        if (owner_alive(o))
            return "reader rank " + std::to_string(r) + " is attached by live pid " + std::to_string(o.pid);
    }
    return {};
}

namespace {
// Prefaulting (create, and Segment::prefault in the processes that will use the ring). A fresh ring is
// walked front to back, and without this every 4 KiB of its first lap costs each process that touches
// it a first-touch fault — the writer and every reader, each page of its own mapping. Measured with
// bench/first_lap.cpp (one writer, one reader, 1.8 KB messages, 16 MiB ring), µs per write + read in
// the first lap against the wrapped ring: populate only, 4.2–5.5 vs 0.18–0.21 on the 2-core CI VM and
// 0.42–0.48 flat on the 16-core machine; with both steps below 0.15–0.26 on the 16-core machine, and
// mostly that on the 2-core VM (some columns 0.6–2 µs: its hypervisor takes first touches back). Two
// steps: MADV_POPULATE_WRITE (Linux 5.14) fills this process's page table without touching the
// contents; then one access per page through this mapping, which the hypervisor of those VMs needs
// before the page is cheap. The creator writes zeros (the object is zero-filled and nobody else has it
// yet: its magic is not published); a user of an opened ring reads one byte per page (never a write:
// peers are using the ring); inspection and gc open without it. Bounded to kPrefaultMaxBytes (the
// 16 MiB Python default ring: create / open 4–8 / 2 ms on the 16-core machine, 23–25 / 20–21 ms on the
// 2-core VM — time the first lap would otherwise spend inside the first ~8000 steps). Failures are
// ignored: it is only a speed-up, and the pages fault in on first touch as before.
constexpr std::size_t kPrefaultMaxBytes = std::size_t{17} << 20;  // a 16 MiB ring and its header lines
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
constexpr std::size_t kTouchStride = 4096;  // one access per base page

void prefault_created(std::byte* base, std::size_t size) noexcept {
    const std::size_t n = std::min(size, kPrefaultMaxBytes);
    (void)::madvise(base, n, MADV_POPULATE_WRITE);
    std::memset(base, 0, n);  // the object is zero-filled already: no content changes
}

void prefault_opened(const std::byte* base, std::size_t size) noexcept {
    const std::size_t n = std::min(size, kPrefaultMaxBytes);
    (void)::madvise(const_cast<std::byte*>(base), n, MADV_POPULATE_WRITE);
    // Relaxed atomic loads: a peer may be writing these bytes; the values are discarded.
    unsigned sink = 0;
    for (std::size_t off = 0; off < n; off += kTouchStride)
        sink += static_cast<unsigned>(std::atomic_ref<const std::byte>(base[off]).load(std::memory_order_relaxed));
    asm volatile("" ::"r"(sink));
}

// Create found `name` taken. If it is our own ringcast segment that nobody uses any more, remove it
// (true: try again). Otherwise throw already_exists saying why the name is kept.
bool reclaim_if_abandoned(std::string_view name, bool allowed) {
    const std::string taken = "ringcast segment '" + std::string(name) + "' already exists";
    std::optional<Segment> seg;
    try {
        seg.emplace(Segment::open(name));
    } catch (const Error& e) {
        if (e.code() == ErrorCode::not_found) return true;  // removed meanwhile: just create
        // `ringcast rm` is advice only to whoever can act on it: not for another user's segment (only
        // its owner or root may remove it), nor for a directory; an object that is not ringcast's it
        // removes only when told --force.
        const bool removable = e.code() != ErrorCode::permission_denied && !is_directory(name);
        const std::string rm = e.code() == ErrorCode::not_ringcast ? "`ringcast rm --force " : "`ringcast rm ";
        // No magic yet: its creator may be making it now, or died making it; only the latter is junk.
        const bool maybe_in_the_making = std::string_view(e.what()).find(kNoMagicYet) != std::string_view::npos;
        throw Error(ErrorCode::already_exists,
                    taken + " and cannot be reclaimed (" + e.what() + ")" +
                        (removable ? std::string(maybe_in_the_making ? "; once its creator is gone, remove it with "
                                                                     : "; remove it with ") +
                                         rm + std::string(name) + "`"
                                   : ""));
    }
    const std::string user = Segment::user_of(seg->base());
    if (!user.empty()) throw Error(ErrorCode::already_exists, taken + " and is in use: " + user);
    // Abandoned, but another user's (readable to us: a group or world mode): a reclaim or a sweep
    // removes only this user's objects, so the name stays taken — said so, not passed off as a race.
    if (struct stat st {}; ::lstat(shm_file(name).c_str(), &st) == 0 && st.st_uid != ::geteuid())
        throw Error(ErrorCode::already_exists,
                    taken + "; nobody uses it any more, but it belongs to uid " + std::to_string(st.st_uid) +
                        " (this process runs as uid " + std::to_string(::geteuid()) +
                        "): only its owner reclaims it; its owner or root can remove it with `ringcast rm " +
                        std::string(name) + "`");
    if (!allowed)
        throw Error(ErrorCode::already_exists, taken + "; nobody uses it any more (`ringcast gc` or `python3 -m "
                                                       "ringcast gc` removes such segments, or set reclaim_abandoned)");
    if (!unlink_if_still_abandoned(name, *seg))
        throw Error(ErrorCode::already_exists, taken + " (another process re-created it just now)");
    return true;
}

// Whether `name` in /dev/shm still leads to the object `judged` (device, inode), owned by this user.
// A reclaimer or a sweep judges an object, then unlinks its name; in between another may have
// unlinked it and created a new object under the name, which must not be taken for the judged one.
bool still_leads_to(std::string_view name, ObjectIdentity judged, bool anyones = false) {
    struct stat now {};
    return ::lstat(shm_file(name).c_str(), &now) == 0 && ObjectIdentity{now.st_dev, now.st_ino} == judged &&
           (anyones || now.st_uid == ::geteuid());
}

// The first word of /dev/shm/<name> (every ringcast object's magic), read without following a link or
// blocking on a FIFO; none when it cannot be read (another user's owner-only object, a short file).
std::optional<std::uint64_t> first_word_at(int dfd, const char* name) {
    const int fd = ::openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::uint64_t word = 0;
    const bool read = ::pread(fd, &word, sizeof word, 0) == static_cast<ssize_t>(sizeof word);
    ::close(fd);
    return read ? std::optional(word) : std::nullopt;
}

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string hex(std::uint64_t v) {
    char text[24];
    std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(v));
    return text;
}
}  // namespace

// Unlinks `name` only if it still leads to the object `seg` maps (its identity, taken when it was
// opened: between judging and unlinking, a racing reclaimer may have unlinked it and created another
// object under the name), ours, and still unused (a reader may have attached since). (The window
// between this last check and the unlink stays: an attach landing exactly there keeps its mapping
// and works; only the name is gone — the same as `ringcast rm` of a segment in use.)
bool unlink_if_still_abandoned(std::string_view name, const Segment& seg) {
    return still_leads_to(name, seg.identity()) && Segment::user_of(seg.base()).empty() &&
           ::shm_unlink(shm_path(name).c_str()) == 0;
}

bool unlink_if_still_this(std::string_view name, const Segment& seg) {
    return still_leads_to(name, seg.identity()) && ::shm_unlink(shm_path(name).c_str()) == 0;
}

std::vector<AbandonedObject> sweep_abandoned(std::string_view prefix, bool dry_run, std::vector<KeptObject>* kept_why) {
    std::vector<AbandonedObject> found;
    const auto keep = [&](std::string_view name, std::string why) {
        if (kept_why != nullptr) kept_why->push_back({std::string(name), std::move(why)});
    };
    DIR* dir = ::opendir("/dev/shm");
    if (dir == nullptr) throw_system_error("opendir(/dev/shm)", errno);
    std::vector<std::pair<std::string, std::uint64_t>> candidates, bells;
    std::vector<std::string> kept;  // ringcast segments left in place (in use, or unreadable)
    std::vector<std::string> vanished;  // abandoned, but removed by another sweep before this one could
    const int dfd = ::dirfd(dir);
    while (const dirent* e = ::readdir(dir)) {
        const std::string_view name = e->d_name;
        if (name.substr(0, prefix.size()) != prefix) continue;
        try {
            Segment::validate_name(name);  // ringcast never creates any other name
        } catch (const Error&) {
            continue;
        }
        struct stat st {};
        if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        const auto bytes = static_cast<std::uint64_t>(st.st_size);
        const bool bell_like = bytes == sizeof(layout::DoorbellLine) && ends_with(name, kGatherBellSuffix);
        if (st.st_uid != ::geteuid()) {  // other users' objects are theirs to sweep
            if (kept_why != nullptr && (bell_like || bytes >= sizeof(layout::SegmentHeader))) {
                // Listed only where it may be ringcast's: its magic says so, or it cannot be read.
                const auto magic = first_word_at(dfd, e->d_name);
                if (!magic || *magic == layout::kMagic || *magic == layout::kDoorbellMagic)
                    keep(name, "another user's (uid " + std::to_string(st.st_uid) + (magic ? "" : ", not readable here") +
                                   "): a sweep removes only this user's (uid " + std::to_string(::geteuid()) + ") objects");
            }
            continue;
        }
        if (bell_like) bells.emplace_back(name, bytes);
        else if (bytes >= sizeof(layout::SegmentHeader)) candidates.emplace_back(name, bytes);
    }
    ::closedir(dir);
    for (const auto& [name, bytes] : candidates) {
        std::optional<Segment> seg;
        try {
            seg.emplace(Segment::open(name));  // foreign, half-created, other versions: throws, kept
        } catch (const Error& e) {
            const bool no_magic_yet = std::string_view(e.what()).find(kNoMagicYet) != std::string_view::npos;
            if (no_magic_yet)
                keep(name, "no ringcast magic yet: its creator is making it, or died making it (then `ringcast rm --force " +
                               std::string(name) + "` removes it)");
            else if (e.code() != ErrorCode::not_ringcast && e.code() != ErrorCode::not_found)
                keep(name, std::string("cannot judge whether it is in use: ") + e.what());
            continue;
        }
        if (const std::string user = Segment::user_of(seg->base()); !user.empty()) {
            kept.push_back(name);
            keep(name, "in use: " + user);
            continue;
        }
        if (!dry_run && !unlink_if_still_abandoned(name, *seg)) {
            // Why it stayed, looked at again: gone (another sweep — every Python queue's creation runs
            // one — removed it first: not kept, and not listed), another object under the name, or used.
            struct stat now {};
            if (::lstat(shm_file(name).c_str(), &now) != 0) {
                vanished.push_back(name);
                continue;
            }
            kept.push_back(name);
            const std::string user = Segment::user_of(seg->base());
            keep(name, ObjectIdentity{now.st_dev, now.st_ino} != seg->identity()
                           ? std::string("made again under the name while the sweep judged it")
                           : "in use by the time the sweep came to it" + (user.empty() ? std::string() : ": " + user));
            continue;
        }
        found.push_back({name, bytes});
    }
    // A gather doorbell "<group>.bell" has no owner of its own: it is abandoned once no reply ring
    // "<group>.r<N>" of its group is left. The collector creates its rings before its bell and
    // removes the bell first (GatherCollector::create, remove_group_names), so a live group's bell
    // always has rings. They are looked for twice: in the listing above, and by name just before the
    // unlink (a ring listed after the directory was read). Only bells whose magic says they are
    // ringcast's are removed.
    for (const auto& [name, bytes] : bells) {
        const std::string group = name.substr(0, name.size() - kGatherBellSuffix.size());
        const std::string rings = gather_ring_prefix(group);
        const auto in_group = [&](const std::string& n) { return n.compare(0, rings.size(), rings) == 0; };
        const auto swept = [&](const std::string& n) {  // removed by this sweep (or, dry, would be)
            return std::any_of(found.begin(), found.end(), [&](const auto& f) { return f.name == n; });
        };
        const std::string group_kept = "doorbell of the gather group '" + group + "', which still has a reply ring";
        if (std::any_of(kept.begin(), kept.end(), in_group)) {
            keep(name, group_kept + " in use");
            continue;
        }
        if (std::any_of(vanished.begin(), vanished.end(), in_group)) continue;  // another sweep takes the group
        bool ring_left = false;
        for (const auto& candidate : candidates)  // (no structured binding: clang 14 cannot capture one)
            ring_left |= in_group(candidate.first) && !swept(candidate.first);
        if (ring_left) {  // a ring we could not judge (foreign, being created): keep its bell
            keep(name, group_kept + " that could not be judged");
            continue;
        }
        const std::optional<JudgedBell> judged = judge_bell(name);
        if (!judged) {
            if (const auto read = read_bell(name))
                keep(name, "another ringcast version's doorbell (ABI " + std::to_string(read->abi_version) +
                               "): a sweep leaves it, `ringcast rm " + name + "` removes it");
            continue;
        }
        std::string ring_now;  // a ring of the group that this sweep neither removed nor (dry run) would
        for (std::uint32_t r = 0; r < std::min(judged->ranks, layout::kMaxReaders) && ring_now.empty(); ++r) {
            std::string ring = gather_ring_name(group, r);
            struct stat st {};
            if (::lstat(shm_file(ring).c_str(), &st) == 0 && !swept(ring)) ring_now = std::move(ring);
        }
        if (!ring_now.empty()) {  // another user's, too small to be a segment when listed, or new
            keep(name, group_kept + ", '" + ring_now + "', that this sweep did not judge");
            continue;
        }
        // Only the bell judged: another sweep may have removed it and a new group made one.
        if (!dry_run && !unlink_bell_if_still(name, *judged)) continue;
        found.push_back({name, bytes});
    }
    return found;
}

std::optional<JudgedBell> read_bell(std::string_view name) {
    // O_NONBLOCK: a FIFO under the name would block a read-only open until some writer opened it (a
    // create or a sweep hung on it); it opens at once, and fstat below says it is no bell.
    const int fd = ::shm_open(shm_path(name).c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) return std::nullopt;
    std::uint64_t magic = 0;
    JudgedBell bell;
    struct stat st {};
    const bool is_bell = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                         static_cast<std::size_t>(st.st_size) == sizeof(layout::DoorbellLine) &&
                         ::pread(fd, &magic, sizeof magic, offsetof(layout::DoorbellLine, magic)) ==
                             static_cast<ssize_t>(sizeof magic) && magic == layout::kDoorbellMagic &&
                         ::pread(fd, &bell.ranks, sizeof bell.ranks, offsetof(layout::DoorbellLine, ranks)) ==
                             static_cast<ssize_t>(sizeof bell.ranks);
    // The creator stores the version fields before the magic (release, DoorbellMapping::create): read
    // after a magic that is set, they are the creator's.
    std::uint32_t layout_hash = 0;
    const bool versioned =
        is_bell &&
        ::pread(fd, &bell.abi_version, sizeof bell.abi_version, offsetof(layout::DoorbellLine, abi_version)) ==
            static_cast<ssize_t>(sizeof bell.abi_version) &&
        ::pread(fd, &layout_hash, sizeof layout_hash, offsetof(layout::DoorbellLine, layout_hash)) ==
            static_cast<ssize_t>(sizeof layout_hash);
    ::close(fd);
    bell.this_version = versioned && bell.abi_version == layout::kAbiVersion && layout_hash == layout::kLayoutHash;
    if (!is_bell) return std::nullopt;
    bell.identity = ObjectIdentity{st.st_dev, st.st_ino};
    bell.owner_uid = st.st_uid;
    bell.mode = st.st_mode & 07777;
    return bell;
}

bool ours_to_reclaim(const JudgedBell& bell) noexcept { return bell.owner_uid == ::geteuid() && bell.this_version; }

std::optional<JudgedBell> judge_bell(std::string_view name) {
    std::optional<JudgedBell> bell = read_bell(name);
    if (bell && !ours_to_reclaim(*bell)) return std::nullopt;
    return bell;
}

bool unlink_bell_if_still(std::string_view name, const JudgedBell& judged, bool anyones) {
    return still_leads_to(name, judged.identity, anyones) && ::shm_unlink(shm_path(name).c_str()) == 0;
}

Segment Segment::create(std::string_view name, const SegmentOptions& options) {
    validate_name(name);
    if (options.readers < 1 || options.readers > layout::kMaxReaders)
        throw Error(ErrorCode::invalid_argument, "reader count must be 1.." +
                                                     std::to_string(layout::kMaxReaders) + ", got " +
                                                     std::to_string(options.readers));
    if (!layout::is_power_of_two(options.capacity) || options.capacity < layout::kMinCapacity ||
        options.capacity > layout::kMaxCapacity)
        throw Error(ErrorCode::invalid_argument,
                    "capacity must be a power of two between 64 KiB and 1 TiB, got " +
                        std::to_string(options.capacity));
    if ((options.mode & ~mode_t{0777}) != 0)
        throw Error(ErrorCode::invalid_argument, "mode may only hold permission bits (0777)");
    if ((options.mode & 0002) != 0)
        throw Error(ErrorCode::invalid_argument, "refusing to create a world-writable segment");
    if ((options.mode & 0600) != 0600)
        throw Error(ErrorCode::invalid_argument, "mode must include owner read/write (0600)");

    const std::uint64_t size = layout::segment_size(options.readers, options.capacity);
    const std::uint64_t free_bytes = shm_free_bytes();
    if (size > free_bytes)
        throw Error(ErrorCode::no_space, "not enough space in /dev/shm for segment '" + std::string(name) +
                                             "': need " + human_bytes(size) + ", free " +
                                             human_bytes(free_bytes));

    if (options.replace_existing) remove(name);
    void* p = nullptr;
    ObjectIdentity identity;
    const auto create_and_map = [&] {
        const ShmObject obj = ShmObject::create(name, size, options.mode);
        p = obj.map();
        identity = obj.identity();
    };
    try {
        create_and_map();
    } catch (const Error& e) {
        if (e.code() != ErrorCode::already_exists || !reclaim_if_abandoned(name, options.reclaim_abandoned)) throw;
        create_and_map();  // a racing creator may win: already_exists
    }
    auto* base = static_cast<std::byte*>(p);
    prefault_created(base, size);
    // ftruncate zero-fills: every atomic starts at 0, every slot is never_attached with head 0.
    auto& h = *reinterpret_cast<layout::SegmentHeader*>(base);
    h.abi_version = layout::kAbiVersion;
    h.layout_hash = layout::kLayoutHash;
    h.capacity = options.capacity;
    h.total_size = size;
    h.reader_count = options.readers;
    h.mode = static_cast<std::uint32_t>(options.mode);
    h.creation_time_ns = realtime_ns();
    h.creator_pid = static_cast<std::uint32_t>(::getpid());
    h.creator_pid_ns = pid_namespace_id();
    h.creator_start_time = process_start_time(::getpid());
    // Publishes the header: pairs with the acquire load of magic in validate_image().
    h.magic.store(layout::kMagic, std::memory_order_release);
    return Segment(std::string(name), base, size, identity);
}

void Segment::validate_image(const std::byte* image, std::size_t size) {
    using namespace layout;
    if (size < sizeof(SegmentHeader))
        throw Error(ErrorCode::not_ringcast, "segment too small (" + std::to_string(size) +
                                                 " bytes) to hold a ringcast header");
    const auto& h = *reinterpret_cast<const SegmentHeader*>(image);
    const std::uint64_t magic = h.magic.load(std::memory_order_acquire);
    if (magic == 0)
        throw Error(ErrorCode::not_ringcast, std::string(kNoMagicYet) + " (not initialised: its creator is "
                                             "still creating it, died while creating it, or it is not ringcast's)");
    if (magic == kDoorbellMagic)  // same offset: each object's magic is its first word
        throw Error(ErrorCode::not_ringcast, "not a queue segment: a ringcast gather's doorbell (the '<group>.bell' "
                                             "of a ReplyGather / GatherCollector); attach a gather through its handle");
    if (magic != kMagic) throw Error(ErrorCode::not_ringcast, "not a ringcast segment (foreign magic)");
    if (h.abi_version != kAbiVersion)
        throw Error(ErrorCode::version_mismatch,
                    "ringcast segment has ABI version " + std::to_string(h.abi_version) + ", this library speaks " +
                        std::to_string(kAbiVersion) + (h.abi_version < kAbiVersion ? " (older segment)" : " (newer segment)"));
    if (h.layout_hash != kLayoutHash)
        throw Error(ErrorCode::version_mismatch, "ringcast segment layout hash differs from this build's "
                                                 "(built with a different ringcast layout)");
    if (h.reader_count < 1 || h.reader_count > kMaxReaders)
        throw Error(ErrorCode::corrupt, "corrupt header: reader count " + std::to_string(h.reader_count));
    if (!is_power_of_two(h.capacity) || h.capacity < kMinCapacity || h.capacity > kMaxCapacity)
        throw Error(ErrorCode::corrupt, "corrupt header: capacity " + std::to_string(h.capacity));
    const std::uint64_t expect = segment_size(h.reader_count, h.capacity);
    if (h.total_size != expect)
        throw Error(ErrorCode::corrupt, "corrupt header: total size " + std::to_string(h.total_size) +
                                            " but readers/capacity imply " + std::to_string(expect));
    if (size < expect)
        throw Error(ErrorCode::corrupt, "segment truncated: " + std::to_string(size) + " bytes, header needs " +
                                            std::to_string(expect));
    if (size > expect)
        throw Error(ErrorCode::corrupt, "segment size " + std::to_string(size) + " does not match header (" +
                                            std::to_string(expect) + ")");
    // Two header words this library only ever writes in these forms: flags holds no bit but closed, and
    // the writer's owner word is 0 (no writer) or an attached owner (Writer's claim). Garbage there
    // would otherwise read as a state: any set bit 0 as "closed by its writer", a random owner as a
    // dead writer to take over from.
    if (const std::uint32_t flags = h.flags.load(std::memory_order_acquire); (flags & ~kFlagClosed) != 0)
        throw Error(ErrorCode::corrupt, "corrupt header: flags " + hex(flags) + " (this version defines bit 0, "
                                        "closed, only)");
    if (const std::uint64_t writer = h.writer_owner.load(std::memory_order_acquire);
        writer != 0 && unpack_owner(writer).state != SlotState::attached)
        throw Error(ErrorCode::corrupt, "corrupt header: writer owner word " + hex(writer) + " (state " +
                                            std::to_string(static_cast<std::uint32_t>(unpack_owner(writer).state)) +
                                            ", where a writer's claim is 'attached')");
    // Cursor sanity: records are kRecordAlign-aligned and never wrap, so every cursor is a multiple
    // of it (an unaligned one would make a reader parse a header across the ring's end and a writer
    // taking over write a padding header past it); a reader can never be ahead of what is published
    // (the tail, and records stamped past it) nor lag the tail by more than the capacity. The segment
    // may be live: the tail is read before and after the heads, so a head that moved past the first
    // tail read is still judged against a tail at least as new (tail_before <= tail_after).
    const auto* wl = reinterpret_cast<const WriterLine*>(image + kWriterLineOffset);
    const auto* slots = reinterpret_cast<const ReaderSlot*>(image + kReaderSlotsOffset);
    const std::uint64_t tail_before = wl->tail.load(std::memory_order_acquire);
    std::vector<std::uint64_t> heads(h.reader_count);
    std::vector<Owner> owners(h.reader_count);
    for (std::uint32_t r = 0; r < h.reader_count; ++r) {
        owners[r] = unpack_owner(slots[r].owner.load(std::memory_order_acquire));
        heads[r] = slots[r].head.load(std::memory_order_acquire);
    }
    const std::uint64_t tail_after = wl->tail.load(std::memory_order_acquire);
    if (!cursor_aligned(tail_before) || !cursor_aligned(tail_after))
        throw Error(ErrorCode::corrupt, "corrupt tail " + std::to_string(tail_after) + ": not a multiple of " +
                                            std::to_string(kRecordAlign));
    if (tail_after >= kMaxCursorAtAttach)  // (heads: at most the published end, below)
        throw Error(ErrorCode::corrupt, "corrupt tail " + std::to_string(tail_after) + ": past 2^63 bytes written");
    // A head may pass the tail by the records a writer stamped before its tail exchange (ring.hpp).
    // Stamps are read after tail_after: a writer that lapped the ring meanwhile has stamped those
    // places anew; its tail, read once more, is then past every head read before it.
    const std::uint64_t published_end = std::max(stamped_end(image + data_offset(h.reader_count), h.capacity, tail_after),
                                                 wl->tail.load(std::memory_order_acquire));
    for (std::uint32_t r = 0; r < h.reader_count; ++r) {
        const auto state = static_cast<std::uint32_t>(owners[r].state);
        if (state >= kSlotStateCount)
            throw Error(ErrorCode::corrupt, "corrupt reader slot " + std::to_string(r) + ": state " + std::to_string(state));
        if (owners[r].state == SlotState::evicted || owners[r].state == SlotState::left) continue;  // head ignored
        if (!cursor_aligned(heads[r]))
            throw Error(ErrorCode::corrupt, "corrupt reader slot " + std::to_string(r) + ": head " +
                                                std::to_string(heads[r]) + " is not a multiple of " +
                                                std::to_string(kRecordAlign));
        if (heads[r] > published_end || (tail_before > heads[r] && tail_before - heads[r] > h.capacity))
            throw Error(ErrorCode::corrupt, "corrupt reader slot " + std::to_string(r) + ": head " +
                                                std::to_string(heads[r]) + " vs tail " + std::to_string(tail_after));
    }
}

Segment Segment::open(std::string_view name) {
    // A creator (ShmObject::create, then the header) may be between its shm_open and its ftruncate
    // (the object is empty) or before its release store of magic (the header is not whole): give it
    // a moment, ~100 ms, in either window. What stays empty or without magic is not a segment.
    constexpr int kCreatorAttempts = 50;
    constexpr auto kCreatorPause = std::chrono::milliseconds(2);
    std::optional<ShmObject> obj;
    for (int attempt = 0;; ++attempt) {
        obj.emplace(ShmObject::open(name));
        if (obj->size() != 0 || attempt >= kCreatorAttempts) break;
        std::this_thread::sleep_for(kCreatorPause);
    }
    const std::size_t size = obj->size();
    if (size < sizeof(layout::SegmentHeader))
        throw Error(ErrorCode::not_ringcast, "segment '" + std::string(name) + "' is too small (" +
                                                 std::to_string(size) + " bytes) to be a ringcast segment");
    void* p = obj->map();
    Segment seg(std::string(name), static_cast<std::byte*>(p), size, obj->identity());
    for (int attempt = 0;; ++attempt) {
        // Judged by the magic as it was BEFORE this look: a creator that stored it while the look ran
        // made the look fail on what it read first ("no magic") though the segment is whole now.
        const bool creator_unfinished = seg.header().magic.load(std::memory_order_acquire) == 0;
        try {
            validate_image(seg.base_, size);
            break;
        } catch (const Error& e) {
            if (!creator_unfinished || attempt >= kCreatorAttempts) {
                throw Error(e.code(), "segment '" + std::string(name) + "': " + e.what());
            }
            std::this_thread::sleep_for(kCreatorPause);
        }
    }
    // Every use of a segment judges its peers by pid (a dead writer, a dead reader to evict, an
    // abandoned name to reclaim, whose eventfd to signal). From another PID namespace those pids name
    // nobody or somebody else: the first liveness check would call live peers dead and evict them.
    // Refused here, where every attach passes, with the cause, instead of a peer_dead later.
    if (const std::string foreign = foreign_pid_namespace(seg.header()); !foreign.empty())
        throw Error(ErrorCode::permission_denied,
                    "segment '" + std::string(name) + "': " + foreign +
                        "; every process of a queue must share one PID namespace (containers: share the "
                        "PID namespace too, not only /dev/shm)");
    return seg;
}

void Segment::prefault() const noexcept {
    if (base_ != nullptr) prefault_opened(base_, size_);
}

ShmObject ShmObject::create(std::string_view name, std::size_t size, mode_t mode) {
    Segment::validate_name(name);
    const std::string path = shm_path(name);
    const int fd = ::shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) throw_open_error(errno, name, "shm_open");
    // From here on the name exists: any failure unlinks it so no half-made object is left behind.
    auto fail = [&](const char* call, int err) {
        ::close(fd);
        ::shm_unlink(path.c_str());
        if (err == ENOSPC)
            throw Error(ErrorCode::no_space, "not enough space in /dev/shm for '" + std::string(name) + "': need " +
                                                 human_bytes(size));
        throw_system_error(call, err);
    };
    if (::fchmod(fd, mode) != 0) fail("fchmod", errno);
    if (::ftruncate(fd, static_cast<off_t>(size)) != 0) fail("ftruncate", errno);
    if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0) fail("posix_fallocate", err);
    struct stat st {};
    if (::fstat(fd, &st) != 0) fail("fstat", errno);
    return ShmObject(std::string(name), fd, size, ObjectIdentity{st.st_dev, st.st_ino}, true);
}

ShmObject ShmObject::open(std::string_view name) {
    Segment::validate_name(name);
    const int fd = ::shm_open(shm_path(name).c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) throw_open_error(errno, name, "shm_open");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw_system_error("fstat", err);
    }
    return ShmObject(std::string(name), fd, static_cast<std::size_t>(st.st_size), ObjectIdentity{st.st_dev, st.st_ino},
                     false);
}

ShmObject::~ShmObject() {
    if (fd_ >= 0) ::close(fd_);
}

void* ShmObject::map() const {
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        if (created_) ::shm_unlink(shm_path(name_).c_str());
        throw_system_error("mmap", err);
    }
    return p;
}

bool Segment::remove(std::string_view name) {
    validate_name(name);
    if (::shm_unlink(shm_path(name).c_str()) == 0) return true;
    if (errno == ENOENT) return false;
    throw_open_error(errno, name, "shm_unlink");
}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)), base_(std::exchange(other.base_, nullptr)), size_(std::exchange(other.size_, 0)),
      identity_(std::exchange(other.identity_, {})) {}

Segment& Segment::operator=(Segment&& other) noexcept {
    if (this != &other) {
        unmap();
        name_ = std::move(other.name_);
        base_ = std::exchange(other.base_, nullptr);
        size_ = std::exchange(other.size_, 0);
        identity_ = std::exchange(other.identity_, {});
    }
    return *this;
}

Segment::~Segment() { unmap(); }

void Segment::unmap() noexcept {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = nullptr;
    size_ = 0;
}

namespace {
// Reads /proc/<pid>/stat: state (field 3) and start time (field 22). False if the process is gone.
bool read_proc_stat(pid_t pid, char& state, std::uint64_t& start_time) noexcept {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
    FILE* f = std::fopen(path, "re");
    if (f == nullptr) return false;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    // Field 2 (comm) may contain spaces and ')': parse from the last ')'.
    const char* p = std::strrchr(buf, ')');
    if (p == nullptr || p[1] != ' ') return false;
    state = p[2];
    int field = 2;
    ++p;
    while (*p != '\0' && field < 22) {
        if (*p == ' ') ++field;
        ++p;
    }
    if (field != 22) return false;
    start_time = std::strtoull(p, nullptr, 10);
    return true;
}
}  // namespace

std::uint32_t pid_namespace_id() noexcept {
    // Read each time (creates, attaches and sweeps only): a child forked after unshare(CLONE_NEWPID)
    // is in another namespace than its parent.
    struct stat st {};
    // Namespace inodes are proc's inode numbers (unsigned int in the kernel): 32 bits hold them.
    return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint32_t>(st.st_ino) : 0;
}

std::string foreign_pid_namespace(const layout::SegmentHeader& h) {
    const std::uint32_t mine = pid_namespace_id();
    if (h.creator_pid_ns == 0 || mine == 0 || h.creator_pid_ns == mine) return {};
    return "it was created in another PID namespace (pid:[" + std::to_string(h.creator_pid_ns) +
           "], this process is in pid:[" + std::to_string(mine) +
           "]): its processes' pids cannot be judged alive or dead from here";
}

std::uint64_t process_start_time(pid_t pid) noexcept {
    char state = 0;
    std::uint64_t start = 0;
    return read_proc_stat(pid, state, start) ? start : 0;
}

bool process_alive(pid_t pid, std::uint64_t start_time) noexcept {
    if (pid <= 0) return false;
    char state = 0;
    std::uint64_t start = 0;
    if (!read_proc_stat(pid, state, start)) return false;
    if (state == 'Z' || state == 'X') return false;  // exited, not yet reaped: dead to us
    return start_time == 0 || (start & layout::kOwnerStartMask) == (start_time & layout::kOwnerStartMask);
}

std::uint64_t my_owner_word(layout::SlotState state) noexcept {
    // Read each time (claims are rare): a fork()ed child has its own pid and start time.
    const pid_t me = ::getpid();
    return layout::pack_owner({state, static_cast<std::uint32_t>(me), process_start_time(me)});
}

}  // namespace ringcast
