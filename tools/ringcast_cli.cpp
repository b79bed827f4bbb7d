// ringcast — inspect and clean up ringcast segments.
//
//   ringcast ls [--json] [--prefix P]   every ringcast segment (and gather doorbell) in /dev/shm that we
//                                    can read: owner, size, readers, liveness (the unreadable counted)
//   ringcast stat NAME [--json]      header, tail, each rank's head and lag, states, counters (a
//                                    doorbell: its group and the group's reply rings left)
//   ringcast rm NAME [--force]       remove a segment's name (mapped processes keep their mapping); one in
//                                    use, one whose use cannot be judged (another version's, corrupt), or
//                                    not ringcast's, only with --force
//   ringcast gc [--dry-run] [--prefix P]  remove this user's segments whose creator, writer and readers
//                                    are all dead; name each one kept and why
//
// `--prefix=P` is the same as `--prefix P`; `--` ends the options (a name may start with '-').
// Exit status: 0 success, 1 a failure the message explains (a failed write of the output too), 2 bad
// usage.
#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <unistd.h>

#include "inspect.hpp"
#include "ringcast/error.hpp"
#include "ringcast/layout.hpp"
#include "ringcast/segment.hpp"

namespace {

using ringcast::cli::BellInfo;
using ringcast::cli::SegmentInfo;

constexpr const char* kUsage =
    "usage: ringcast <command> [options]\n"
    "\n"
    "  ls [--json] [--prefix P]      list the ringcast segments and gather doorbells in /dev/shm that this\n"
    "                                user can read (names starting with P; the others are counted)\n"
    "  stat NAME [--json]            show a segment: header, tail, each reader's head, lag, state, counters\n"
    "                                (a doorbell: its gather group and the group's reply rings left)\n"
    "  rm NAME [--force]             remove a segment or doorbell nobody uses (--force: even one in use, one\n"
    "                                whose use cannot be judged, or one that is not ringcast's; only its\n"
    "                                owner or root may remove it)\n"
    "  gc [--dry-run] [--prefix P]   remove this user's segments whose creator, writer and readers are all\n"
    "                                dead; names each one kept and why\n"
    "\n"
    "--prefix=P works as --prefix P; `--` ends the options, for a NAME starting with '-'.\n";

int usage_error(const std::string& why) {
    std::fprintf(stderr, "ringcast: %s\n\n%s", why.c_str(), kUsage);
    return 2;
}

// printf into a string (names are up to 200 characters, so no fixed buffer).
[[gnu::format(printf, 1, 2)]] std::string format(const char* fmt, ...) {
    std::va_list args, again;
    va_start(args, fmt);
    va_copy(again, args);
    const int n = std::vsnprintf(nullptr, 0, fmt, args);
    va_end(args);
    std::string out(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
    std::vsnprintf(out.data(), out.size() + 1, fmt, again);
    va_end(again);
    return out;
}

std::string human(std::uint64_t n) {
    char buf[32];
    if (n >= (1ULL << 30)) std::snprintf(buf, sizeof buf, "%.1fG", double(n) / double(1ULL << 30));
    else if (n >= (1ULL << 20)) std::snprintf(buf, sizeof buf, "%.1fM", double(n) / double(1ULL << 20));
    else if (n >= (1ULL << 10)) std::snprintf(buf, sizeof buf, "%.1fK", double(n) / double(1ULL << 10));
    else std::snprintf(buf, sizeof buf, "%llu", static_cast<unsigned long long>(n));
    return buf;
}

std::string mode_str(unsigned m) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", m);
    return buf;
}

std::string utc_time(std::uint64_t ns) {
    const std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000ULL);
    std::tm tm{};
    ::gmtime_r(&t, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return buf;
}

std::string pid_str(std::uint32_t pid, bool alive) {
    if (pid == 0) return "-";
    return std::to_string(pid) + (alive ? " (alive)" : " (dead)");
}

// ---- ls -----------------------------------------------------------------------------------------

// Prints rows (the first is the header) in columns as wide as their widest cell, separated by one
// space; right_aligned[i] aligns column i to the right (numbers). The last column is not padded.
void print_table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right_aligned) {
    std::vector<std::size_t> width(right_aligned.size(), 0);
    for (const auto& row : rows)
        for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size(); ++i) {
            const std::string pad(i + 1 == row.size() && !right_aligned[i] ? 0 : width[i] - row[i].size(), ' ');
            if (i != 0) line += ' ';
            line += right_aligned[i] ? pad + row[i] : row[i] + pad;
        }
        std::printf("%s\n", line.c_str());
    }
}

// A doorbell's state in a word or three: what `gc` and `rm` go by.
std::string bell_state(const BellInfo& b) {
    return "doorbell of '" + b.group + "', " + std::to_string(b.rings_left) + "/" + std::to_string(b.judged.ranks) +
           " reply rings" + (b.rings_left == 0 ? " (abandoned)" : "") +
           (b.judged.this_version ? "" : ", ABI " + std::to_string(b.judged.abi_version) + " (another ringcast version's)");
}

// Why this process cannot unlink an object of `owner`: the sticky /dev/shm, not a file mode.
std::string only_owner_may(uid_t owner, const std::string& owner_name) {
    const std::string who = owner == 0 ? std::string("only root, its owner,")
                                       : format("only its owner (uid %u%s) or root", static_cast<unsigned>(owner),
                                                owner_name == std::to_string(owner) ? "" : (", " + owner_name).c_str());
    return format("%s may remove it (/dev/shm is a sticky directory; this process runs as uid %u)", who.c_str(),
                  static_cast<unsigned>(::geteuid()));
}

void note_unreadable(const ringcast::cli::Listing& listing, const char* consequence) {
    if (listing.unreadable != 0)
        std::fprintf(stderr, "ringcast: %zu entr%s in /dev/shm could not be read (permission denied)%s\n",
                     listing.unreadable, listing.unreadable == 1 ? "y" : "ies", consequence);
}

int cmd_ls(bool json, const std::string& prefix) {
    const auto listing = ringcast::cli::list_segments(prefix);
    const std::vector<SegmentInfo> infos = ringcast::cli::inspect_listed(listing.names);
    std::vector<BellInfo> bells;
    for (const auto& n : listing.bells)
        if (auto b = ringcast::cli::inspect_bell(n)) bells.push_back(std::move(*b));
    if (json) {
        // One entry per object, in name order as the table's rows: a group's bell beside its rings.
        std::vector<std::pair<std::string, std::string>> entries;
        for (const auto& b : bells)
            entries.emplace_back(b.name, format("{\"name\": %s, \"owner\": %s, \"uid\": %u, \"mode\": \"%s\", \"size\": %llu, "
                                                "\"abi_version\": %u, \"doorbell_of\": %s, \"ranks\": %u, "
                                                "\"rings_left\": %u, \"abandoned\": %s}",
                                                ringcast::cli::json_escape(b.name).c_str(), ringcast::cli::json_escape(b.owner).c_str(),
                                                static_cast<unsigned>(b.judged.owner_uid), mode_str(b.judged.mode).c_str(),
                                                static_cast<unsigned long long>(sizeof(ringcast::layout::DoorbellLine)),
                                                b.judged.abi_version, ringcast::cli::json_escape(b.group).c_str(), b.judged.ranks,
                                                b.rings_left, b.rings_left == 0 ? "true" : "false"));
        for (const auto& s : infos) {
            std::string e = format("{\"name\": %s, \"owner\": %s, \"uid\": %u, \"mode\": \"%s\", \"size\": %llu",
                                   ringcast::cli::json_escape(s.name).c_str(), ringcast::cli::json_escape(s.owner).c_str(),
                                   static_cast<unsigned>(s.owner_uid), mode_str(s.file_mode).c_str(),
                                   static_cast<unsigned long long>(s.file_size));
            if (!s.error.empty())
                e += ", \"error\": " + ringcast::cli::json_escape(s.error) + "}";
            else
                e += format(", \"capacity\": %llu, \"readers\": %u, \"live_readers\": %u, \"creator_pid\": %u, "
                            "\"creator_alive\": %s, \"writer_pid\": %u, \"writer_alive\": %s, \"closed\": %s, "
                            "\"abandoned\": %s}",
                            static_cast<unsigned long long>(s.capacity), s.reader_count, s.live_readers(), s.creator_pid,
                            s.creator_alive ? "true" : "false", s.writer_pid, s.writer_alive ? "true" : "false",
                            s.closed() ? "true" : "false", s.abandoned() ? "true" : "false");
            if (!s.foreign_pid_ns.empty())  // the pids and *_alive above are another namespace's
                e.insert(e.size() - 1, ", \"other_pid_namespace\": " + ringcast::cli::json_escape(s.foreign_pid_ns));
            entries.emplace_back(s.name, std::move(e));
        }
        std::sort(entries.begin(), entries.end());
        std::printf("[");
        for (std::size_t i = 0; i < entries.size(); ++i) std::printf("%s\n  %s", i ? "," : "", entries[i].second.c_str());
        std::printf("%s]\n", entries.empty() ? "" : "\n");
    } else {
        // Column widths come from the data (names are up to 200 characters): every row lines up.
        std::vector<std::vector<std::string>> rows{{"NAME", "OWNER", "MODE", "SIZE", "RING", "READERS", "CREATOR",
                                                    "WRITER", "STATE"}};
        for (const auto& s : infos) {
            if (!s.error.empty()) {
                rows.push_back({s.name, s.owner, mode_str(s.file_mode), human(s.file_size), "-", "-", "-", "-",
                                "error: " + s.error});
                continue;
            }
            rows.push_back({s.name, s.owner, mode_str(s.file_mode), human(s.file_size), human(s.capacity),
                            std::to_string(s.live_readers()) + "/" + std::to_string(s.reader_count),
                            pid_str(s.creator_pid, s.creator_alive), pid_str(s.writer_pid, s.writer_alive),
                            !s.foreign_pid_ns.empty() ? "other pid namespace"
                                : s.abandoned()           ? "abandoned"
                                                          : (s.closed() ? "closed" : "open")});
        }
        for (const auto& b : bells)
            rows.push_back({b.name, b.owner, mode_str(b.judged.mode), human(sizeof(ringcast::layout::DoorbellLine)), "-", "-", "-", "-", bell_state(b)});
        std::sort(rows.begin() + 1, rows.end());  // a group's bell beside its rings
        print_table(rows, {false, false, false, true, true, false, false, false, false});
    }
    note_unreadable(listing, ": not listed");
    return 0;
}

// ---- stat ---------------------------------------------------------------------------------------

int stat_bell(const BellInfo& b, bool json) {
    if (json) {
        std::printf("{\n  \"name\": %s,\n  \"owner\": %s,\n  \"uid\": %u,\n  \"mode\": \"%s\",\n  \"size\": %llu,\n"
                    "  \"abi_version\": %u,\n  \"doorbell_of\": %s,\n  \"ranks\": %u,\n  \"rings_left\": %u,\n"
                    "  \"abandoned\": %s\n}\n",
                    ringcast::cli::json_escape(b.name).c_str(), ringcast::cli::json_escape(b.owner).c_str(),
                    static_cast<unsigned>(b.judged.owner_uid), mode_str(b.judged.mode).c_str(),
                    static_cast<unsigned long long>(sizeof(ringcast::layout::DoorbellLine)), b.judged.abi_version,
                    ringcast::cli::json_escape(b.group).c_str(), b.judged.ranks, b.rings_left,
                    b.rings_left == 0 ? "true" : "false");
        return 0;
    }
    std::printf("doorbell  %s (/dev/shm/%s): the gather group '%s' of %u ranks rings its collector here\n",
                b.name.c_str(), b.name.c_str(), b.group.c_str(), b.judged.ranks);
    std::printf("owner     %s (uid %u), mode %s\n", b.owner.c_str(), static_cast<unsigned>(b.judged.owner_uid),
                mode_str(b.judged.mode).c_str());
    if (!b.judged.this_version)
        std::printf("version   ABI %u: another ringcast version's (this one speaks %u); `gc` leaves it, `rm` removes it\n",
                    b.judged.abi_version, ringcast::layout::kAbiVersion);
    std::printf("rings     %u of the group's %u reply rings are there%s\n", b.rings_left, b.judged.ranks,
                b.rings_left != 0            ? " (`ringcast stat` on each shows its state)"
                : b.judged.this_version ? ": its collector is gone (`ringcast gc` removes the bell)"
                                        : ": its collector is gone");
    return 0;
}

int cmd_stat(const std::string& name, bool json) {
    if (const auto bell = ringcast::cli::inspect_bell(name)) return stat_bell(*bell, json);
    const SegmentInfo s = ringcast::cli::inspect(name);
    if (!s.error.empty()) {
        std::fprintf(stderr, "ringcast: segment '%s': %s\n", name.c_str(), s.error.c_str());
        return 1;
    }
    using ull = unsigned long long;
    if (json) {
        std::printf("{\n  \"name\": %s,\n  \"owner\": %s,\n  \"uid\": %u,\n  \"mode\": \"%s\",\n  \"size\": %llu,\n",
                    ringcast::cli::json_escape(s.name).c_str(), ringcast::cli::json_escape(s.owner).c_str(),
                    static_cast<unsigned>(s.owner_uid), mode_str(s.file_mode).c_str(), static_cast<ull>(s.file_size));
        std::printf("  \"abi_version\": %u,\n  \"capacity\": %llu,\n  \"reader_count\": %u,\n  \"created\": \"%s\",\n",
                    s.abi_version, static_cast<ull>(s.capacity), s.reader_count, utc_time(s.creation_time_ns).c_str());
        std::printf("  \"creator_pid\": %u,\n  \"creator_alive\": %s,\n  \"writer_pid\": %u,\n  \"writer_alive\": %s,\n"
                    "  \"closed\": %s,\n  \"abandoned\": %s,\n",
                    s.creator_pid, s.creator_alive ? "true" : "false", s.writer_pid, s.writer_alive ? "true" : "false",
                    s.closed() ? "true" : "false", s.abandoned() ? "true" : "false");
        if (!s.foreign_pid_ns.empty())
            std::printf("  \"other_pid_namespace\": %s,\n", ringcast::cli::json_escape(s.foreign_pid_ns).c_str());
        std::printf("  \"tail\": %llu,\n  \"messages\": %llu,\n  \"writer_wake_calls\": %llu,\n  \"writer_waits\": %llu,\n"
                    "  \"notify_seq\": %u,\n  \"reader_sleepers\": %u,\n  \"space_seq\": %u,\n  \"writer_sleeping\": %u,\n"
                    "  \"wake_ahead_us\": %u,\n",
                    static_cast<ull>(s.tail), static_cast<ull>(s.messages), static_cast<ull>(s.writer_wake_calls),
                    static_cast<ull>(s.writer_waits), s.notify_seq, s.reader_sleepers, s.space_seq, s.writer_sleeping,
                    s.wake_ahead_us);
        std::printf("  \"readers\": [");
        for (std::size_t i = 0; i < s.readers.size(); ++i) {
            const auto& r = s.readers[i];
            std::printf("%s\n    {\"rank\": %u, \"state\": \"%s\", \"pid\": %u, \"pid_alive\": %s, \"head\": %llu, "
                        "\"lag_bytes\": %llu, \"lag_messages\": %llu, \"messages\": %llu, \"waits\": %llu, "
                        "\"wake_calls\": %llu}",
                        i ? "," : "", r.rank, r.state.c_str(), r.pid, r.pid_alive ? "true" : "false",
                        static_cast<ull>(r.head), static_cast<ull>(r.lag_bytes), static_cast<ull>(r.lag_messages),
                        static_cast<ull>(r.messages), static_cast<ull>(r.waits), static_cast<ull>(r.wake_calls));
        }
        std::printf("\n  ]\n}\n");
        return 0;
    }
    std::printf("segment   %s (/dev/shm/%s)\n", s.name.c_str(), s.name.c_str());
    std::printf("owner     %s (uid %u), mode %s\n", s.owner.c_str(), static_cast<unsigned>(s.owner_uid),
                mode_str(s.file_mode).c_str());
    std::printf("size      %llu bytes, ring %llu bytes, %u reader rank%s, ABI %u\n", static_cast<ull>(s.file_size),
                static_cast<ull>(s.capacity), s.reader_count, s.reader_count == 1 ? "" : "s", s.abi_version);
    if (!s.foreign_pid_ns.empty())  // its pids are another namespace's: "(dead)" below would be a guess
        std::printf("pid ns    %s; every pid below is a pid there\n", s.foreign_pid_ns.c_str());
    std::printf("created   %s by pid %s\n", utc_time(s.creation_time_ns).c_str(), pid_str(s.creator_pid, s.creator_alive).c_str());
    std::printf("writer    %s%s%s\n", pid_str(s.writer_pid, s.writer_alive).c_str(), s.closed() ? ", closed" : "",
                s.abandoned() ? ", abandoned (everyone is gone)" : "");
    std::printf("tail      %llu bytes published, %llu messages\n", static_cast<ull>(s.tail), static_cast<ull>(s.messages));
    std::printf("wakes     writer: %llu wake calls, %llu waits for space (sleeping now: %u); readers asleep now: %u\n",
                static_cast<ull>(s.writer_wake_calls), static_cast<ull>(s.writer_waits), s.writer_sleeping, s.reader_sleepers);
    if (s.wake_ahead_us != 0)  // the writer wakes sleeping readers before it pickles (Writer::wake_ahead)
        std::printf("ahead     last wake-ahead hint %u us (how long a reader woken ahead of a message spins for it,\n"
                    "          within that reader's own spin bounds)\n", s.wake_ahead_us);
    else
        std::printf("ahead     no wake-ahead made\n");
    std::printf("\n%-5s %-15s %-16s %14s %12s %10s %10s %10s %10s\n", "RANK", "STATE", "PID", "HEAD", "LAG BYTES",
                "LAG MSGS", "MESSAGES", "WAITS", "WAKES");
    for (const auto& r : s.readers)
        std::printf("%-5u %-15s %-16s %14llu %12llu %10llu %10llu %10llu %10llu\n", r.rank, r.state.c_str(),
                    pid_str(r.pid, r.pid_alive).c_str(), static_cast<ull>(r.head), static_cast<ull>(r.lag_bytes),
                    static_cast<ull>(r.lag_messages), static_cast<ull>(r.messages), static_cast<ull>(r.waits),
                    static_cast<ull>(r.wake_calls));
    return 0;
}

// ---- rm / gc ------------------------------------------------------------------------------------

int rm_bell(const BellInfo& b, bool force) {
    // --force cannot help here: said first, and without offering it.
    if (!ringcast::cli::may_unlink(b.judged.owner_uid)) {
        std::fprintf(stderr, "ringcast: cannot remove '%s': %s\n", b.name.c_str(),
                     only_owner_may(b.judged.owner_uid, b.owner).c_str());
        return 1;
    }
    if (b.rings_left != 0 && !force) {
        std::fprintf(stderr,
                     "ringcast: refusing to remove '%s': it is the doorbell of gather group '%s', which still has %u of "
                     "its %u reply rings (its collector may be alive; without the bell its workers cannot attach) "
                     "(use --force to remove it anyway)\n",
                     b.name.c_str(), b.group.c_str(), b.rings_left, b.judged.ranks);
        return 1;
    }
    // Only the bell inspected (its rings counted above): a collector may have removed it and a new
    // group made one since, whose rings this count never saw.
    errno = 0;
    if (!ringcast::unlink_bell_if_still(b.name, b.judged, /*anyones=*/true)) {
        std::fprintf(stderr, "ringcast: cannot remove '%s': %s\n", b.name.c_str(),
                     errno == EPERM || errno == EACCES ? only_owner_may(b.judged.owner_uid, b.owner).c_str()
                                                       : "it changed or went since it was inspected");
        return 1;
    }
    std::printf("removed %s\n", b.name.c_str());
    return 0;
}

int cmd_rm(const std::string& name, bool force) {
    if (const auto bell = ringcast::cli::inspect_bell(name)) return rm_bell(*bell, force);
    const SegmentInfo s = ringcast::cli::inspect(name);
    if (s.gone) {
        std::fprintf(stderr, "ringcast: segment '%s' does not exist\n", name.c_str());
        return 1;
    }
    if (!s.identified) {  // not even its directory entry could be read: nothing to judge nor to remove safely
        std::fprintf(stderr, "ringcast: cannot remove '%s': %s\n", name.c_str(), s.error.c_str());
        return 1;
    }
    // --force cannot help here: said first, and without offering it.
    if (!ringcast::cli::may_unlink(s.owner_uid)) {
        std::fprintf(stderr, "ringcast: cannot remove '%s': %s\n", name.c_str(), only_owner_may(s.owner_uid, s.owner).c_str());
        return 1;
    }
    if (!s.error.empty()) {
        if (!force) {
            // Its magic says ringcast's, but the header does not validate (another ringcast version's,
            // or corrupt): who uses it cannot be read from it, so it may well be in use.
            if (s.is_ringcast)
                std::fprintf(stderr,
                             "ringcast: refusing to remove '%s': cannot judge whether it is in use: %s; --force removes "
                             "it anyway\n",
                             name.c_str(), s.error.c_str());
            else
                std::fprintf(stderr, "ringcast: refusing to remove '%s': %s (use --force to remove it anyway)\n",
                             name.c_str(), s.error.c_str());
            return 1;
        }
        if (s.is_ringcast)
            std::fprintf(stderr,
                         "ringcast: note: whether '%s' is in use cannot be judged (%s); if it is, its users keep their "
                         "mapping, new attaches will fail\n",
                         name.c_str(), s.error.c_str());
    } else if (!s.abandoned()) {
        if (!force) {
            std::fprintf(stderr,
                         "ringcast: refusing to remove '%s': it is in use (%s); they would keep their mapping, but new "
                         "attaches would fail (use --force to remove it anyway)\n",
                         name.c_str(), s.user().c_str());
            return 1;
        }
        std::fprintf(stderr, "ringcast: note: '%s' is in use (%s); they keep their mapping, new attaches will fail\n",
                     name.c_str(), s.user().c_str());
    }
    // Only the object judged above: the name may lead to a new segment by now (one made under it since,
    // e.g. by a writer reclaiming it), which this judgement never saw.
    const ringcast::cli::RemovalResult r = ringcast::cli::remove_if_still(name, s.identity, force);
    using ringcast::cli::Removal;
    switch (r.outcome) {
        case Removal::removed: std::printf("removed %s\n", name.c_str()); return 0;
        case Removal::gone:
            std::fprintf(stderr, "ringcast: segment '%s' does not exist any more (removed meanwhile)\n", name.c_str());
            return 1;
        case Removal::replaced:
            std::fprintf(stderr,
                         "ringcast: not removing '%s': the name now leads to another object than the one inspected "
                         "(created under the name since); run rm again to judge that one\n",
                         name.c_str());
            return 1;
        case Removal::now_in_use:
            std::fprintf(stderr,
                         "ringcast: refusing to remove '%s': it is in use now (%s) (use --force to remove it anyway)\n",
                         name.c_str(), r.now.user().c_str());
            return 1;
        case Removal::unreadable:
            std::fprintf(stderr,
                         "ringcast: refusing to remove '%s': cannot judge whether it is in use any more: %s; --force "
                         "removes it anyway\n",
                         name.c_str(), r.now.error.c_str());
            return 1;
        case Removal::failed: break;
    }
    std::fprintf(stderr, "ringcast: cannot remove '%s': %s\n", name.c_str(),
                 r.err == EPERM || r.err == EACCES ? only_owner_may(r.now.owner_uid, r.now.owner).c_str()
                                                   : std::strerror(r.err));
    return 1;
}

// Why gc leaves a segment (the library's sweep decided; this says which of its rules kept it).
std::string kept_reason(const SegmentInfo& s) {
    if (s.owner_uid != ::geteuid())
        return format("another user's (uid %u): gc removes only this user's (uid %u) segments, and only its owner or "
                      "root may remove it (`ringcast rm %s`)",
                      static_cast<unsigned>(s.owner_uid), static_cast<unsigned>(::geteuid()), s.name.c_str());
    if (!s.error.empty()) return "cannot judge whether it is in use: " + s.error;
    if (!s.foreign_pid_ns.empty()) return "cannot judge whether it is in use: " + s.foreign_pid_ns;
    if (!s.abandoned()) return "in use: " + s.user();
    return "in use by the time gc came to it (a process attached or re-created it meanwhile)";
}

std::string kept_reason(const BellInfo& b) {
    if (b.judged.owner_uid != ::geteuid())
        return format("another user's doorbell (uid %u): gc removes only this user's (uid %u), and only its owner or "
                      "root may remove it (`ringcast rm %s`)",
                      static_cast<unsigned>(b.judged.owner_uid), static_cast<unsigned>(::geteuid()), b.name.c_str());
    if (!b.judged.this_version)
        return format("another ringcast version's doorbell (ABI %u): gc leaves it, `ringcast rm %s` removes it",
                      b.judged.abi_version, b.name.c_str());
    if (b.rings_left != 0)
        return format("doorbell of '%s', whose group still has %u of its %u reply rings", b.group.c_str(), b.rings_left,
                      b.judged.ranks);
    return "its group had a reply ring when gc came to it";
}

int cmd_gc(bool dry_run, const std::string& prefix) {
    // The judging and removal are the library's own sweep, the one Python's queues run at creation (one
    // rule for "nobody uses it any more"); inspected here before it only to say why each object it keeps
    // is kept. Objects removed between the listing and their inspection are no longer there to keep.
    const auto listing = ringcast::cli::list_segments(prefix);
    const std::vector<SegmentInfo> infos = ringcast::cli::inspect_listed(listing.names);
    std::vector<BellInfo> bells;
    for (const auto& n : listing.bells)
        if (auto b = ringcast::cli::inspect_bell(n)) bells.push_back(std::move(*b));
    std::vector<ringcast::AbandonedObject> swept;
    try {
        swept = ringcast::sweep_abandoned(prefix, dry_run);
    } catch (const ringcast::Error& e) {
        std::fprintf(stderr, "ringcast: %s\n", e.what());
        return 1;
    }
    const auto was_swept = [&](const std::string& n) {
        return std::any_of(swept.begin(), swept.end(), [&](const auto& o) { return o.name == n; });
    };
    std::uint64_t bytes = 0;
    for (const auto& o : swept) {
        std::printf("%s %s\n", dry_run ? "would remove" : "removed", o.name.c_str());
        bytes += o.bytes;
    }
    std::vector<std::pair<std::string, std::string>> kept;  // name, why
    for (const auto& s : infos)
        if (!was_swept(s.name)) kept.emplace_back(s.name, kept_reason(s));
    for (const auto& b : bells)
        if (!was_swept(b.name)) kept.emplace_back(b.name, kept_reason(b));
    std::sort(kept.begin(), kept.end());
    for (const auto& [name, why] : kept) std::printf("kept %s: %s\n", name.c_str(), why.c_str());
    std::printf("%zu %s, %zu kept (%s of /dev/shm %s)\n", swept.size(), dry_run ? "to remove" : "removed", kept.size(),
                human(bytes).c_str(), dry_run ? "to free" : "freed");
    note_unreadable(listing, ": not judged (other users' objects are theirs to remove)");
    return 0;
}

int run(const std::vector<std::string>& args) {
    if (args.empty()) return usage_error("no command given");
    const std::string cmd = args[0];
    if (cmd == "-h" || cmd == "--help" || cmd == "help") {
        std::printf("%s", kUsage);
        return 0;
    }
    bool json = false, force = false, dry_run = false;
    std::string prefix;
    std::vector<std::string> positional;
    bool options_done = false;  // after `--`: a segment name may start with '-'
    for (std::size_t i = 1; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (options_done) positional.push_back(a);
        else if (a == "--") options_done = true;
        else if (a == "-h" || a == "--help") {  // `ringcast ls --help`: asked for, so not an error
            std::printf("%s", kUsage);
            return 0;
        }
        else if (a == "--json" && (cmd == "ls" || cmd == "stat")) json = true;
        else if (a == "--force" && cmd == "rm") force = true;
        else if (a == "--dry-run" && cmd == "gc") dry_run = true;
        else if (a.rfind("--prefix=", 0) == 0 && (cmd == "ls" || cmd == "gc")) prefix = a.substr(9);
        else if (a == "--prefix" && (cmd == "ls" || cmd == "gc")) {
            // The next word is an option, not a prefix: `gc --prefix --dry-run` taking "--dry-run" as its
            // prefix ran a real gc. A prefix starting with '-' is written --prefix=-P.
            if (i + 1 == args.size() || (!args[i + 1].empty() && args[i + 1][0] == '-'))
                return usage_error("--prefix needs a value" +
                                   (i + 1 == args.size() ? std::string()
                                                         : " (got the option '" + args[i + 1] +
                                                               "'; a prefix starting with '-' is written --prefix=" +
                                                               args[i + 1] + ")"));
            prefix = args[++i];
        }
        else if (!a.empty() && a[0] == '-')
            return usage_error("unknown option '" + a + "' for '" + cmd + "'" +
                               (cmd == "stat" || cmd == "rm" ? " (a NAME starting with '-' goes after `--`)" : ""));
        else positional.push_back(a);
    }
    try {
        if (cmd == "ls" || cmd == "gc") {
            if (!positional.empty()) return usage_error("'" + cmd + "' takes no name");
            return cmd == "ls" ? cmd_ls(json, prefix) : cmd_gc(dry_run, prefix);
        }
        if (cmd == "stat" || cmd == "rm") {
            if (positional.size() != 1) return usage_error("'" + cmd + "' takes exactly one segment name");
            try {
                ringcast::Segment::validate_name(positional[0]);
            } catch (const ringcast::Error& e) {
                std::fprintf(stderr, "ringcast: %s\n", e.what());
                return 1;
            }
            return cmd == "stat" ? cmd_stat(positional[0], json) : cmd_rm(positional[0], force);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ringcast: %s\n", e.what());
        return 1;
    }
    return usage_error("unknown command '" + cmd + "'");
}

}  // namespace

int main(int argc, char** argv) {
    const int rc = run(std::vector<std::string>(argv + 1, argv + argc));
    // Output lost (a full disk, a closed pipe's reader gone, /dev/full) is a failure: a script reading
    // `ls --json` or the names `gc` removed would otherwise take an empty or cut answer for the truth.
    errno = 0;
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
        std::fprintf(stderr, "ringcast: write error: %s\n", std::strerror(errno != 0 ? errno : EIO));
        return rc != 0 ? rc : 1;
    }
    return rc;
}
