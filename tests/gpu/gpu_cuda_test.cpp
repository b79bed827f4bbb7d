// The GPU path on a real GPU, with real processes: a writer publishes from device buffers, reader
// processes (this binary re-executed with --role, never a fork of a CUDA process) copy each message
// to their own device buffer or read it in place (zero-copy) and verify a device-side checksum.
// Every case skips with the probe's reason printed where no GPU is usable.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "kernels.hpp"
#include "ringcast/gpu/capabilities.hpp"
#include "ringcast/gpu/device_reader.hpp"
#include "ringcast/gpu/device_writer.hpp"
#include "test_util.hpp"

extern char** environ;

using namespace ringcast;
using namespace ringcast::gpu;
using namespace std::chrono_literals;

namespace {

#define CU(call)                                                                                   \
    do {                                                                                           \
        const cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                                   \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            std::abort();                                                                          \
        }                                                                                          \
    } while (0)

#define REQUIRE_GPU()                                                                  \
    do {                                                                               \
        const Capabilities caps_ = probe(cuda());                                      \
        if (!caps_.usable) GTEST_SKIP() << "no usable GPU: " << caps_.summary();       \
        std::printf("[ info ] %s\n", caps_.summary().c_str());                         \
    } while (0)

constexpr std::size_t kMaxMessage = 64ull << 20;

std::uint64_t device_checksum(const void* p, std::size_t n, unsigned long long* d_sum, cudaStream_t s) {
    CU(cudaMemsetAsync(d_sum, 0, sizeof *d_sum, s));
    CU(static_cast<cudaError_t>(kernels::checksum(p, n, d_sum, s)));
    unsigned long long h = 0;
    CU(cudaMemcpyAsync(&h, d_sum, sizeof h, cudaMemcpyDeviceToHost, s));
    CU(cudaStreamSynchronize(s));
    return h;
}

void device_fill(void* p, std::size_t n, std::uint64_t seed, cudaStream_t s) {
    CU(static_cast<cudaError_t>(kernels::fill(p, n, seed, s)));
}

// Sizes log-uniform in [1 KiB, 64 MiB]: every order of magnitude equally often, so small messages and
// the fragment path (beyond the ring's record limit) are both exercised many times.
std::size_t random_size(std::mt19937_64& rng) {
    std::uniform_real_distribution<double> u(std::log(1024.0), std::log(double(kMaxMessage)));
    return static_cast<std::size_t>(std::exp(u(rng)));
}

// ---- reader role (a separate process) ----------------------------------------------------------
// modes: copy (receive into a device buffer), peek (kernels read the ring in place where possible),
// regen (receive, and compare with the content regenerated from the tag's seed).
int reader_role(const std::string& name, std::uint32_t rank, const std::string& mode, long expected) {
    ReaderOptions ro;
    ro.create_timeout = 30s;
    Reader r = Reader::attach(name, rank, ro);
    DeviceReader dr(r, cuda());
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void* buf = nullptr;
    void* regen = nullptr;
    unsigned long long* d_sum = nullptr;
    CU(cudaMalloc(&buf, kMaxMessage));
    CU(cudaMalloc(&regen, kMaxMessage));
    CU(cudaMalloc(reinterpret_cast<void**>(&d_sum), sizeof *d_sum));
    long count = 0, mismatches = 0, zero_copy = 0;
    std::uint64_t bytes = 0;
    for (;;) {
        std::uint64_t got_sum = 0, want = 0;
        std::size_t size = 0;
        if (mode == "peek") {
            const DevicePeek p = dr.peek(120s);
            if (p.status == Status::closed) break;
            if (p.status != Status::ok) return 3;
            const void* src = p.device_bytes;
            if (src != nullptr) {
                ++zero_copy;
            } else {  // a reassembled (fragmented) message: not in the registered ring
                CU(cudaMemcpyAsync(buf, p.host_bytes.data(), p.host_bytes.size(), cudaMemcpyHostToDevice, s));
                src = buf;
            }
            size = p.host_bytes.size();
            got_sum = device_checksum(src, size, d_sum, s);
            want = p.tag;
            dr.release_after(s);
        } else {
            const Received got = dr.receive(buf, kMaxMessage, s, 120s);
            if (got.status == Status::closed) break;
            if (got.status != Status::ok) return 3;
            size = got.size;
            got_sum = device_checksum(buf, size, d_sum, s);
            want = got.tag;
            if (mode == "regen") {
                device_fill(regen, size, got.tag, s);
                want = device_checksum(regen, size, d_sum, s);
            }
        }
        if (got_sum != want) {
            if (mismatches < 5) std::fprintf(stderr, "rank %u: message %ld (%zu bytes) checksum %llx, expected %llx\n",
                                              rank, count, size, (unsigned long long)got_sum, (unsigned long long)want);
            ++mismatches;
        }
        ++count;
        bytes += size;
    }
    std::printf("[ info ] reader rank %u (%s): %ld messages, %.2f GB, %ld zero-copy, %ld mismatches\n", rank,
                mode.c_str(), count, double(bytes) / 1e9, zero_copy, mismatches);
    CU(cudaFree(buf));
    CU(cudaFree(regen));
    CU(cudaFree(d_sum));
    return mismatches == 0 && count == expected ? 0 : 1;
}

pid_t spawn_reader(const std::string& name, std::uint32_t rank, const std::string& mode, long expected) {
    std::vector<std::string> args = {"/proc/self/exe", "--role", "reader", name, std::to_string(rank), mode,
                                     std::to_string(expected)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), environ) != 0) return -1;
    return pid;
}

int wait_exit(pid_t pid) {
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct DeviceBuffers {
    void* a = nullptr;
    void* b = nullptr;
    unsigned long long* sum = nullptr;
    cudaStream_t s{};
    DeviceBuffers() {
        CU(cudaMalloc(&a, kMaxMessage));
        CU(cudaMalloc(&b, kMaxMessage));
        CU(cudaMalloc(reinterpret_cast<void**>(&sum), sizeof *sum));
        CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    }
    ~DeviceBuffers() {
        cudaStreamDestroy(s);
        cudaFree(a);
        cudaFree(b);
        cudaFree(sum);
    }
};

long env_count(const char* var, long fallback) {
    const char* v = std::getenv(var);
    return v != nullptr ? std::atol(v) : fallback;
}

}  // namespace

// The acceptance test: 10,000 messages of random sizes (1 KiB - 64 MiB, random contents made
// on the device), two reader processes (one copies into its device buffer, one reads the ring in place
// where it can), each verifying the device-side checksum the writer computed (carried in the tag).
TEST(GpuCuda, TenThousandRandomMessagesTwoReaderProcesses) {
    REQUIRE_GPU();
    const long count = env_count("RINGCAST_GPU_MESSAGES", 10000);
    ringcast::test::ScopedName name("gpu-10k");
    SegmentOptions so;
    so.readers = 2;
    so.capacity = 64ull << 20;  // records up to 16 MiB: larger messages take the fragment path
    WriterOptions wo;
    wo.liveness_interval = 1s;
    Writer w = Writer::create(name, so, wo);
    const pid_t copy_reader = spawn_reader(name.str(), 0, "copy", count);
    const pid_t peek_reader = spawn_reader(name.str(), 1, "peek", count);
    ASSERT_GT(copy_reader, 0);
    ASSERT_GT(peek_reader, 0);
    std::uint64_t bytes = 0;
    long fragmented = 0;
    const auto t0 = std::chrono::steady_clock::now();
    {
        DeviceWriter dw(w, cuda());
        DeviceBuffers d;
        std::mt19937_64 rng(20261201);
        for (long k = 0; k < count; ++k) {
            const std::size_t n = random_size(rng);
            device_fill(d.a, n, rng(), d.s);
            const std::uint64_t sum = device_checksum(d.a, n, d.sum, d.s);
            ASSERT_EQ(dw.publish(d.a, n, d.s, 120s, sum), Status::ok) << "message " << k;
            bytes += n;
            fragmented += n > w.max_reserve();
        }
    }
    w.close();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ info ] writer: %ld messages (%ld fragmented), %.2f GB in %.2f s\n", count, fragmented,
                double(bytes) / 1e9, secs);
    EXPECT_EQ(wait_exit(copy_reader), 0);
    EXPECT_EQ(wait_exit(peek_reader), 0);
}

// publish_async: copies in flight while the caller goes on; commit only at the next call once landed.
// The reader regenerates each message's content from its tag (the seed) and compares.
TEST(GpuCuda, AsyncPublishPipelinesAndNeverPublishesUnlandedBytes) {
    REQUIRE_GPU();
    const long count = 2000;
    ringcast::test::ScopedName name("gpu-async");
    SegmentOptions so;
    so.capacity = 16ull << 20;
    Writer w = Writer::create(name, so);
    const pid_t reader = spawn_reader(name.str(), 0, "regen", count);
    ASSERT_GT(reader, 0);
    {
        DeviceWriter dw(w, cuda());
        DeviceBuffers d;
        std::mt19937_64 rng(7);
        long polled_pending = 0;
        for (long k = 0; k < count; ++k) {
            const std::size_t n = 1024 + rng() % (1 << 20);
            const std::uint64_t seed = rng();
            void* buf = (k % 2) ? d.b : d.a;
            device_fill(buf, n, seed, d.s);  // stream order: after the previous copy out of this buffer
            ASSERT_EQ(dw.publish_async(buf, n, d.s, 60s, seed), Status::ok);
            polled_pending += !dw.poll();
        }
        ASSERT_EQ(dw.flush(60s), Status::ok);
        std::printf("[ info ] async: %ld of %ld polls found the copy still in flight\n", polled_pending, count);
    }
    w.close();
    EXPECT_EQ(wait_exit(reader), 0);
}

// Messages far larger than the ring: up to 64 MiB through a 4 MiB ring (records of 1 MiB), so the reader
// must release records while the writer still produces the message. The reader process receives each
// record by its own DMA into its offset of the device buffer and checks the device-side checksum.
TEST(GpuCuda, MessagesFarLargerThanTheRingGoRecordByRecord) {
    REQUIRE_GPU();
    const long count = 40;
    ringcast::test::ScopedName name("gpu-small-ring");
    SegmentOptions so;
    so.capacity = 4ull << 20;
    Writer w = Writer::create(name, so);
    const pid_t reader = spawn_reader(name.str(), 0, "copy", count);
    ASSERT_GT(reader, 0);
    std::uint64_t bytes = 0;
    const auto t0 = std::chrono::steady_clock::now();
    {
        DeviceWriter dw(w, cuda());
        DeviceBuffers d;
        std::mt19937_64 rng(14);
        for (long k = 0; k < count; ++k) {
            const std::size_t n = (4ull << 20) + rng() % ((64ull << 20) - (4ull << 20));
            device_fill(d.a, n, rng(), d.s);
            const std::uint64_t sum = device_checksum(d.a, n, d.sum, d.s);
            ASSERT_EQ(dw.publish(d.a, n, d.s, 120s, sum), Status::ok) << "message " << k;
            bytes += n;
        }
    }
    w.close();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(wait_exit(reader), 0);
    std::printf("[ info ] %ld messages of 4-64 MiB through a 4 MiB ring: %.2f GB in %.2f s (%.2f GB/s, fill and "
                "checksum kernels included)\n", count, double(bytes) / 1e9, secs, double(bytes) / 1e9 / secs);
}

// On a real GPU: refusals decided before any copy leave a fragmented message for the next receive.
TEST(GpuCuda, FragmentedReceiveRefusalsLeaveTheMessage) {
    REQUIRE_GPU();
    ringcast::test::ScopedName name("gpu-frag-refuse");
    SegmentOptions so;
    so.capacity = 1 << 20;  // 3 MiB below: 13 records, more than the ring holds
    Writer w = Writer::create(name, so);
    Reader r = Reader::attach(name, 0);
    DeviceBuffers d;
    const std::size_t n = 3 << 20;
    device_fill(d.a, n, 99, d.s);
    const std::uint64_t sum = device_checksum(d.a, n, d.sum, d.s);
    std::thread writer([&] {
        cudaStream_t ws;
        CU(cudaStreamCreateWithFlags(&ws, cudaStreamNonBlocking));
        {
            DeviceWriter dw(w, cuda());
            EXPECT_EQ(dw.publish(d.a, n, ws, 60s, 7), Status::ok);
        }
        CU(cudaStreamDestroy(ws));
    });
    {
        DeviceReader dr(r, cuda());
        std::vector<std::byte> host(n);
        try {
            (void)dr.receive(host.data(), host.size(), d.s, 30s);
            ADD_FAILURE() << "a host destination was accepted";
        } catch (const DeviceError& e) {
            EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
        }
        try {
            (void)dr.receive(d.b, n - 1, d.s, 30s);
            ADD_FAILURE() << "a too small destination was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::message_too_large) << e.what();
        }
        CU(cudaMemsetAsync(d.b, 0, n, d.s));
        const Received got = dr.receive(d.b, n, d.s, 30s);
        ASSERT_EQ(got.status, Status::ok);
        EXPECT_EQ(got.size, n);
        EXPECT_EQ(got.tag, 7u);
        EXPECT_EQ(device_checksum(d.b, n, d.sum, d.s), sum);
    }
    writer.join();
}

TEST(GpuCuda, HostSourceIsRefusedAndRegistrationIsPerMapping) {
    REQUIRE_GPU();
    ringcast::test::ScopedName name("gpu-errors");
    Writer w = Writer::create(name, SegmentOptions{});
    DeviceWriter dw(w, cuda());
    EXPECT_TRUE(dw.registration().contains(w.segment().data(), w.capacity()));
    std::vector<std::byte> host(128);
    try {
        (void)dw.publish(host.data(), host.size(), nullptr);
        ADD_FAILURE() << "host source accepted";
    } catch (const DeviceError& e) {
        EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    }
    // The same mapping registered twice in one process: a clear error, not a silent double count.
    try {
        auto again = HostRegistration::of(cuda(), w.segment());
        ADD_FAILURE() << "a second registration of the same mapping succeeded";
    } catch (const DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find("already registered"), std::string::npos) << e.what();
    }
}

int main(int argc, char** argv) {
    if (argc >= 7 && std::string(argv[1]) == "--role" && std::string(argv[2]) == "reader") {
        try {
            return reader_role(argv[3], static_cast<std::uint32_t>(std::atoi(argv[4])), argv[5], std::atol(argv[6]));
        } catch (const std::exception& e) {
            std::fprintf(stderr, "reader: %s\n", e.what());
            return 2;
        }
    }
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
