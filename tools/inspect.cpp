// Read-only inspection of ringcast segments (see inspect.hpp).
#include <bit>
#include "inspect.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ringcast/detail/gather_names.hpp"
#include "ringcast/error.hpp"
#include "ringcast/layout.hpp"
#include "ringcast/segment.hpp"

namespace ringcast::cli {

namespace {

using layout::SlotState;

std::string user_name(uid_t uid) {
    passwd pw{};
    passwd* out = nullptr;
    char buf[1024];
    if (::getpwuid_r(uid, &pw, buf, sizeof buf, &out) == 0 && out != nullptr) return out->pw_name;
    return std::to_string(uid);
}

const char* state_name(std::uint32_t s) {
    switch (static_cast<SlotState>(s)) {
        case SlotState::never_attached: return "never_attached";
        case SlotState::attached: return "attached";
        case SlotState::detached: return "detached";
        case SlotState::evicted: return "evicted";
        case SlotState::left: return "left";
    }
    return "invalid";
}

// A read-only mapping, unmapped on scope exit.
struct Mapping {
    void* p = MAP_FAILED;
    std::size_t size = 0;
    ~Mapping() {
        if (p != MAP_FAILED) ::munmap(p, size);
    }
};

std::string open_error(int err) {
    switch (err) {
        case ENOENT: return "does not exist";
        case EACCES:
        case EPERM: return "permission denied (the segment is owner-only unless created with a wider mode)";
        case ELOOP: return "is a symbolic link; not followed";
        default: return std::strerror(err);
    }
}

}  // namespace

bool SegmentInfo::closed() const noexcept { return (flags & layout::kFlagClosed) != 0; }

std::uint32_t SegmentInfo::live_readers() const noexcept {
    std::uint32_t n = 0;
    for (const auto& r : readers) n += r.pid != 0 && r.pid_alive;
    return n;
}

bool SegmentInfo::abandoned() const noexcept {
    if (!error.empty()) return false;  // we cannot tell who uses a segment we cannot read: keep it
    if (!foreign_pid_ns.empty()) return false;  // nor one whose pids name other processes here
    if (creator_alive || (writer_pid != 0 && writer_alive)) return false;
    return live_readers() == 0;
}

// The same judgement as abandoned(), from the same fields, said in words (what Segment::user_of says
// of a mapped image).
std::string SegmentInfo::user() const {
    if (!error.empty()) return {};
    if (!foreign_pid_ns.empty()) return foreign_pid_ns;
    if (creator_alive) return "its creator pid " + std::to_string(creator_pid) + " is alive";
    if (writer_pid != 0 && writer_alive) return "its writer pid " + std::to_string(writer_pid) + " is alive";
    for (const auto& r : readers)
        if (r.pid != 0 && r.pid_alive)
            return "reader rank " + std::to_string(r.rank) + " is attached by live pid " + std::to_string(r.pid);
    return {};
}

SegmentInfo inspect(const std::string& name) {
    SegmentInfo info;
    info.name = name;
    try {
        Segment::validate_name(name);
    } catch (const Error& e) {
        info.error = e.what();
        return info;
    }
    const std::string path = "/" + name;
    const auto take_stat = [&info](const struct stat& st) {
        info.identified = true;
        info.identity = ObjectIdentity{st.st_dev, st.st_ino};
        info.owner_uid = st.st_uid;
        info.owner = user_name(st.st_uid);
        info.file_mode = st.st_mode & 07777;
        info.file_size = static_cast<std::uint64_t>(st.st_size);
    };
    // O_NONBLOCK: a FIFO's read-only open would wait for a writer; fstat below refuses it at once.
    const int fd = ::shm_open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0) {
        const int err = errno;
        info.error = open_error(err);
        info.gone = err == ENOENT;
        // Unreadable, or a symbolic link: the directory entry still says whose it is (rm names its
        // owner when it may not remove it) and which object it is (rm --force removes only that one).
        if (struct stat st {}; err != ENOENT && ::lstat((std::string(kShmDir) + path).c_str(), &st) == 0) take_stat(st);
        return info;
    }
    struct stat st {};
    const int stat_rc = ::fstat(fd, &st);
    const int stat_err = errno;
    if (stat_rc != 0) {
        ::close(fd);
        info.error = std::string("fstat: ") + std::strerror(stat_err);
        return info;
    }
    take_stat(st);
    if (!S_ISREG(st.st_mode) || info.file_size < sizeof(layout::SegmentHeader)) {
        ::close(fd);
        info.error = S_ISDIR(st.st_mode) ? "not a ringcast segment (a directory)"
                     : S_ISREG(st.st_mode) ? "not a ringcast segment (too small to hold a header)"
                                           : "not a ringcast segment (not a regular file)";
        return info;
    }
    Mapping map;
    map.size = static_cast<std::size_t>(info.file_size);
    map.p = ::mmap(nullptr, map.size, PROT_READ, MAP_SHARED, fd, 0);
    const int map_err = errno;
    ::close(fd);
    if (map.p == MAP_FAILED) {
        info.error = std::string("mmap: ") + std::strerror(map_err);
        return info;
    }
    const auto* base = static_cast<const std::byte*>(map.p);
    const auto& h = *reinterpret_cast<const layout::SegmentHeader*>(base);
    info.is_ringcast = h.magic.load(std::memory_order_acquire) == layout::kMagic;
    // validate_image reads the tail, then each head: on a live queue a head can pass the tail it read a
    // moment before. A real inconsistency persists; a race does not, so retry a few times.
    for (int attempt = 0;; ++attempt) {
        try {
            Segment::validate_image(base, map.size);
            break;
        } catch (const Error& e) {
            if (e.code() != ErrorCode::corrupt || attempt >= 20) {
                info.error = e.what();
                return info;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }
    info.abi_version = h.abi_version;
    info.reader_count = h.reader_count;
    info.header_mode = h.mode;
    info.flags = h.flags.load(std::memory_order_acquire);
    info.capacity = h.capacity;
    info.creation_time_ns = h.creation_time_ns;
    info.creator_pid = h.creator_pid;
    info.foreign_pid_ns = foreign_pid_namespace(h);
    info.creator_alive = process_alive(static_cast<pid_t>(h.creator_pid), h.creator_start_time);
    const layout::Owner writer = layout::unpack_owner(h.writer_owner.load(std::memory_order_acquire));
    info.writer_pid = writer.pid;
    info.writer_alive = owner_alive(writer);
    const auto& wl = *reinterpret_cast<const layout::WriterLine*>(base + layout::kWriterLineOffset);
    const auto& sl = *reinterpret_cast<const layout::SpaceLine*>(base + layout::kSpaceLineOffset);
    info.writer_wake_calls = wl.wake_calls.load(std::memory_order_relaxed);
    info.notify_seq = wl.notify_seq.load(std::memory_order_relaxed);
    info.wake_ahead_us = wl.ahead_us.load(std::memory_order_relaxed);
    const auto& sleep = *reinterpret_cast<const layout::ReaderSleepLine*>(base + layout::kReaderSleepLineOffset);
    info.reader_sleepers = 0;  // ranks announcing a sleep (one bit each)
    for (const auto& word : sleep.sleeping)
        info.reader_sleepers += static_cast<std::uint32_t>(std::popcount(word.load(std::memory_order_relaxed)));
    info.space_seq = sl.space_seq.load(std::memory_order_relaxed);
    info.writer_sleeping = static_cast<std::uint32_t>(sl.writer_sleeping.load(std::memory_order_relaxed) & 1);
    info.writer_waits = sl.writer_waits.load(std::memory_order_relaxed);
    // On a live queue every count moves while we read, so the order of the reads decides which way
    // each lag can be off: each rank's message count, then its head, then the tail, then the writer's
    // message count (all acquire, so none moves before the one read ahead of it; all only grow). A
    // rank bumps its count after it moves its head, the writer its count after it moves the tail: read
    // so, what a rank consumed is read no later than what was published, and both lags can only come
    // out too large (by what moved while we read), never one too large and the other too small. The
    // writer count read first and each rank's last made a reader keeping pace show bytes to read and
    // no message (lag 0), or the other way round. lag_bytes is 0 for a head that passed the tail by a
    // record stamped before its tail exchange (ring.hpp).
    const auto* slots = reinterpret_cast<const layout::ReaderSlot*>(base + layout::kReaderSlotsOffset);
    std::vector<std::uint64_t> heads(info.reader_count), consumed(info.reader_count);
    for (std::uint32_t r = 0; r < info.reader_count; ++r) {
        consumed[r] = slots[r].messages.load(std::memory_order_acquire);
        heads[r] = slots[r].head.load(std::memory_order_acquire);
    }
    info.tail = wl.tail.load(std::memory_order_acquire);
    info.messages = wl.messages.load(std::memory_order_acquire);
    for (std::uint32_t r = 0; r < info.reader_count; ++r) {
        const auto& s = slots[r];
        ReaderInfo ri;
        ri.rank = r;
        const layout::Owner owner = layout::unpack_owner(s.owner.load(std::memory_order_acquire));
        const auto state = static_cast<std::uint32_t>(owner.state);
        ri.state = state_name(state);
        ri.pid = owner.pid;
        ri.pid_alive = owner_alive(owner);
        if (state == static_cast<std::uint32_t>(SlotState::attached) && ri.pid != 0 && !ri.pid_alive) ri.state = "dead";
        ri.head = heads[r];
        ri.messages = consumed[r];
        ri.waits = s.waits.load(std::memory_order_relaxed);
        ri.wake_calls = s.wake_calls.load(std::memory_order_relaxed);
        if (owner.state != SlotState::evicted && owner.state != SlotState::left) {
            ri.lag_bytes = info.tail >= ri.head ? info.tail - ri.head : 0;
            ri.lag_messages = info.messages >= ri.messages ? info.messages - ri.messages : 0;
        }
        info.readers.push_back(ri);
    }
    return info;
}

std::vector<SegmentInfo> inspect_listed(const std::vector<std::string>& names) {
    std::vector<SegmentInfo> out;
    out.reserve(names.size());
    for (const auto& n : names)
        if (SegmentInfo s = inspect(n); !s.gone) out.push_back(std::move(s));
    return out;
}

bool may_unlink(uid_t owner) {
    const uid_t me = ::geteuid();
    struct stat dir {};
    if (owner == me || ::stat(kShmDir, &dir) != 0 || (dir.st_mode & S_ISVTX) == 0 || dir.st_uid == me) return true;
    // CAP_FOWNER (bit 3) in the effective set: root's, or granted to this program. Unknown: let the
    // unlink itself say.
    std::FILE* f = std::fopen("/proc/self/status", "re");
    if (f == nullptr) return me == 0;
    char line[256];
    unsigned long long caps = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f) != nullptr)
        found = std::sscanf(line, "CapEff: %llx", &caps) == 1;
    std::fclose(f);
    return found ? (caps & (1ULL << 3)) != 0 : me == 0;
}

RemovalResult remove_if_still(const std::string& name, const ObjectIdentity& judged, bool force) {
    RemovalResult res;
    res.now = inspect(name);
    if (res.now.gone) {
        res.outcome = Removal::gone;
        return res;
    }
    if (!res.now.identified || !(res.now.identity == judged)) {
        res.outcome = Removal::replaced;
        return res;
    }
    if (!force && !res.now.error.empty()) {
        res.outcome = Removal::unreadable;
        return res;
    }
    if (!force && !res.now.abandoned()) {
        res.outcome = Removal::now_in_use;
        return res;
    }
    if (::shm_unlink(("/" + name).c_str()) == 0) {
        res.outcome = Removal::removed;
        return res;
    }
    res.err = errno;
    res.outcome = res.err == ENOENT ? Removal::gone : Removal::failed;
    return res;
}

Listing list_segments(const std::string& prefix) {
    Listing out;
    DIR* dir = ::opendir(kShmDir);
    if (dir == nullptr) throw_system_error("opendir(/dev/shm)", errno);
    const int dfd = ::dirfd(dir);
    while (const dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name == "." || name == ".." || name.compare(0, prefix.size(), prefix) != 0) continue;
        try {
            Segment::validate_name(name);  // ringcast never creates any other name
        } catch (const Error&) {
            continue;
        }
        struct stat st {};
        if (::fstatat(dfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        const bool bell_sized = st.st_size == static_cast<off_t>(sizeof(layout::DoorbellLine));
        if (st.st_size < static_cast<off_t>(sizeof(layout::SegmentHeader)) && !bell_sized) continue;
        const int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            if (errno == EACCES || errno == EPERM) ++out.unreadable;
            continue;
        }
        std::uint64_t magic = 0;
        const ssize_t n = ::pread(fd, &magic, sizeof magic, 0);
        ::close(fd);
        if (n == static_cast<ssize_t>(sizeof magic) && magic == layout::kMagic) out.names.push_back(name);
        else if (bell_sized && read_bell(name)) out.bells.push_back(name);
    }
    ::closedir(dir);
    std::sort(out.names.begin(), out.names.end());
    std::sort(out.bells.begin(), out.bells.end());
    return out;
}

std::optional<BellInfo> inspect_bell(const std::string& name) {
    if (name.size() <= kGatherBellSuffix.size() ||
        name.compare(name.size() - kGatherBellSuffix.size(), kGatherBellSuffix.size(), kGatherBellSuffix) != 0)
        return std::nullopt;
    const std::optional<JudgedBell> read = read_bell(name);
    if (!read) return std::nullopt;
    BellInfo b;
    b.judged = *read;
    b.name = name;
    b.group = name.substr(0, name.size() - kGatherBellSuffix.size());
    b.owner = user_name(read->owner_uid);
    for (std::uint32_t r = 0; r < std::min(read->ranks, layout::kMaxReaders); ++r) {
        struct stat ring {};
        b.rings_left += ::lstat((std::string(kShmDir) + "/" + gather_ring_name(b.group, r)).c_str(), &ring) == 0;
    }
    return b;
}

std::string json_escape(const std::string& s) {
    std::string out = "\"";
    for (const char c : s) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

}  // namespace ringcast::cli
