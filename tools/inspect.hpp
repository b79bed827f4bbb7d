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
    std::string state;  // never_attached, attached, detached, evicted, dead (attached, owner gone)
    std::uint32_t pid = 0;
    bool pid_alive = false;
    std::uint64_t head = 0;
    std::uint64_t lag_bytes = 0;     // tail - head (0 for evicted ranks)
    std::uint64_t lag_messages = 0;  // messages published - messages this rank consumed
    std::uint64_t messages = 0, waits = 0, wake_calls = 0;
};

struct SegmentInfo {
    std::string name;
    std::string error;  // non-empty: not inspectable (permission, corrupt, foreign); fields below unset
    bool is_ringcast = false;  // the magic matched (even if the rest is corrupt)
    uid_t owner_uid = 0;
    std::string owner;
    unsigned file_mode = 0;
    std::uint64_t file_size = 0;
    // From the header.
    std::uint32_t abi_version = 0, reader_count = 0, header_mode = 0, flags = 0;
    std::uint64_t capacity = 0, creation_time_ns = 0;
    std::uint32_t creator_pid = 0, writer_pid = 0;
    bool creator_alive = false, writer_alive = false;
    std::uint64_t tail = 0, messages = 0, writer_wake_calls = 0, writer_waits = 0;
    std::uint32_t notify_seq = 0, reader_sleepers = 0, space_seq = 0, writer_sleeping = 0;
    std::uint32_t wake_ahead_us = 0;  // the last wake-ahead's spin hint (WriterLine::ahead_us; 0: none made)
    std::vector<ReaderInfo> readers;

    [[nodiscard]] bool closed() const noexcept;
    [[nodiscard]] std::uint32_t live_readers() const noexcept;
    // Nobody can use it any more: creator, writer and every reader rank's owner are gone.
    [[nodiscard]] bool abandoned() const noexcept;
};

// Inspects /dev/shm/<name>. Never throws for a bad segment: fills `error` instead.
[[nodiscard]] SegmentInfo inspect(const std::string& name);

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
