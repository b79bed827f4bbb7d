// Shared pieces of the cross-process harness: clocks, CPU accounting, statistics, the transport
// interface every measured system implements, and the driver that runs one configuration.
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <sched.h>
#include <time.h>

namespace rcbench {

// ---- clocks --------------------------------------------------------------------------------------
inline std::int64_t now_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
// CPU time of the whole calling process (all threads): what a reader process costs the machine.
inline std::int64_t process_cpu_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Every blocking step of the harness gives up after this long and fails loudly: a benchmark that
// hangs tells nobody anything.
inline constexpr std::int64_t kStepTimeoutNs = 60'000'000'000;

struct BenchError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---- options and CPUs ----------------------------------------------------------------------------
// A whole number in [lo, hi], written in decimal digits only (no sign, no spaces, nothing after it), or
// nothing: each bench program refuses a bad value in its own words, naming the option.
inline std::optional<std::uint64_t> whole_number(const std::string& text, std::uint64_t lo, std::uint64_t hi) {
    if (text.empty() || !std::all_of(text.begin(), text.end(), [](unsigned char c) { return c >= '0' && c <= '9'; }))
        return std::nullopt;
    errno = 0;
    const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
    if (errno != 0 || v < lo || v > hi) return std::nullopt;  // ERANGE: more digits than a u64 holds
    return v;
}
// Pins the calling thread to `cpu`; false where that CPU cannot be had (not in this process's cpuset,
// offline, out of range).
inline bool pin_to_cpu(int cpu) noexcept {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return ::sched_setaffinity(0, sizeof set, &set) == 0;
}

// ---- statistics ----------------------------------------------------------------------------------
// Nearest-rank percentile of sorted samples.
inline double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) return 0.0;
    const double rank = p / 100.0 * double(sorted.size());
    std::size_t i = rank <= 1.0 ? 0 : static_cast<std::size_t>(rank + 0.999999) - 1;
    return sorted[std::min(i, sorted.size() - 1)];
}
inline double median(std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- messages on the wire ------------------------------------------------------------------------
// Every message starts with a u64 tag (sizes start at 8 B), so transports without a tag field
// (message_queue, ZeroMQ, the floors) carry the same bytes as ringcast.
enum class Kind : std::uint64_t { ping = 1, stream = 2, start = 3, end = 4, quit = 5 };
inline std::uint64_t make_tag(Kind k, std::uint64_t seq) noexcept { return (std::uint64_t(k) << 56) | seq; }
inline Kind tag_kind(std::uint64_t tag) noexcept { return static_cast<Kind>(tag >> 56); }
inline std::uint64_t tag_seq(std::uint64_t tag) noexcept { return tag & ((1ULL << 56) - 1); }

struct ReaderStats {
    std::uint64_t rank = 0;
    std::int64_t cpu_ns = 0;   // process CPU between the phase's start and end messages
    std::int64_t wall_ns = 0;
    std::uint64_t messages = 0;  // stream messages received in the phase
    std::uint64_t bytes = 0;
};
inline constexpr std::size_t kReplyMax = 8 + sizeof(ReaderStats);

// ---- transports ----------------------------------------------------------------------------------
// The writer process's end: broadcast one message to every reader; collect one reply from each.
class WriterEnd {
public:
    virtual ~WriterEnd() = default;
    virtual void broadcast(std::span<const std::byte> message) = 0;
    // Receives exactly one reply from every reader; calls on_reply(reader, bytes) for each.
    virtual void collect(const std::function<void(std::uint32_t, std::span<const std::byte>)>& on_reply) = 0;
};
// A reader process's end: the next message (copied into the reader's own memory, as a consumer that
// keeps the bytes would), and a reply to the writer.
class ReaderEnd {
public:
    virtual ~ReaderEnd() = default;
    virtual std::span<const std::byte> receive() = 0;  // valid until the next receive()
    virtual void reply(std::span<const std::byte> bytes) = 0;
};

// A system under test. The parent calls prepare() before forking, each child make_reader(rank) after
// the fork, the parent make_writer() after the fork, and cleanup() at the end (names unlinked).
class System {
public:
    virtual ~System() = default;
    virtual void prepare(std::size_t max_message, std::uint32_t readers) = 0;
    virtual std::unique_ptr<ReaderEnd> make_reader(std::uint32_t rank) = 0;
    virtual std::unique_ptr<WriterEnd> make_writer() = 0;
    virtual void cleanup() noexcept = 0;
    // Floors hand one buffer back and forth: only lock-step traffic (no streaming phase).
    [[nodiscard]] virtual bool can_stream() const { return true; }
};

struct SystemInfo {
    std::string name;   // e.g. "hybrid", "floor_atomic", "boost_mq"
    std::string group;  // "ringcast", "floor", "peer"
    std::function<std::unique_ptr<System>()> make;
};
std::vector<SystemInfo> all_systems();  // in the order tables list them
const SystemInfo* find_system(const std::string& name);

// ---- one configuration ---------------------------------------------------------------------------
struct PhaseLimits {
    double warmup_s = 0.1;
    double rtt_s = 0.5;
    std::uint64_t rtt_max_iters = 20'000;
    double stream_s = 0.5;
    bool stream = true;
};

struct RunResult {
    std::string system;
    std::size_t size = 0;
    std::uint32_t readers = 0;
    std::vector<double> rtt_ns;  // sorted
    double p50 = 0, p99 = 0, p999 = 0, max = 0;
    // Streaming phase (0 when not run).
    double msgs_per_s = 0, gbytes_per_s = 0;  // GB/s = bytes delivered to EACH reader per second
    // CPU%: 100 = one core busy for the whole phase.
    double writer_cpu_rtt = 0, writer_cpu_stream = 0;
    std::vector<double> reader_cpu_rtt, reader_cpu_stream;
};

struct RunOptions {
    bool pin = false;
};

// Forks `readers` reader processes and measures round trips then streaming. Throws BenchError.
RunResult run_config(const SystemInfo& sys, std::size_t size, std::uint32_t readers, const PhaseLimits& limits,
                     const RunOptions& options);

// Idle CPU of a reader blocked on an empty queue for `seconds`, for several systems concurrently.
// Returns CPU% per system.
std::vector<double> measure_idle(const std::vector<const SystemInfo*>& systems, double seconds);

// Single-core memcpy bandwidth in GB/s for blocks of `size` bytes over a working set of `working_set`.
double memcpy_gbps(std::size_t size, std::size_t working_set, double seconds);

// Pins the calling process to one CPU (modulo the CPUs it may use). No-op when it fails.
void pin_to(unsigned index);

}  // namespace rcbench
