// ringcast-first-lap: what a fresh ring's first lap costs against the same ring once it has wrapped.
//
// One writer and one reader (separate mappings of one segment, as two processes have), 1.8 KB
// messages (the executor showdown's step request), written and read in turn; the time per message
// is printed for each sixth of the messages, which span the 16 MiB ring about 1.5 times: the first
// four columns are the first lap, the last ones the wrapped ring. Before segments prefaulted their
// mapping fully (segment.cpp) the first lap cost 4.2-5.5 us per message on the 2-core CI VM against
// 0.18-0.21 wrapped; now the columns agree on the 16-core machine and mostly on the 2-core VM.
// --trials N repeats it with a fresh segment.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "ringcast/ring.hpp"

int main(int argc, char** argv) {
    int trials = 3;
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], "--trials") == 0) trials = std::atoi(argv[i + 1]);
    constexpr std::uint64_t kCapacity = 16u << 20;
    constexpr std::size_t kMessage = 1850;
    constexpr int kPerColumn = 2150;  // 6 columns x 2150 x ~1.9 KB: ~1.5 laps
    const std::string name = "ringcast-first-lap-" + std::to_string(::getpid());
    std::printf("ringcast-first-lap: 1 writer + 1 reader (two mappings), %zu B messages, 16 MiB ring; "
                "us per write+read, by sixth of %d messages (first lap: columns 1-4)\n",
                kMessage, 6 * kPerColumn);
    for (int t = 0; t < trials; ++t) {
        ringcast::SegmentOptions so;
        so.capacity = kCapacity;
        ringcast::WriterOptions wo;
        wo.unlink_on_destroy = true;
        const auto t0 = std::chrono::steady_clock::now();
        ringcast::Writer w = ringcast::Writer::create(name, so, wo);
        const auto t1 = std::chrono::steady_clock::now();
        ringcast::Reader r = ringcast::Reader::attach(name, 0);
        const auto t2 = std::chrono::steady_clock::now();
        std::vector<std::byte> msg(kMessage, std::byte{7}), into;
        std::printf("  trial %d (create %.1f ms, attach %.1f ms):", t + 1,
                    std::chrono::duration<double, std::milli>(t1 - t0).count(),
                    std::chrono::duration<double, std::milli>(t2 - t1).count());
        for (int col = 0; col < 6; ++col) {
            const auto c0 = std::chrono::steady_clock::now();
            for (int i = 0; i < kPerColumn; ++i) {
                if (w.write(msg) != ringcast::Status::ok || r.read(into) != ringcast::Status::ok) {
                    std::fprintf(stderr, "write/read failed\n");
                    return 1;
                }
            }
            std::printf(" %.3f", std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - c0).count() /
                                     kPerColumn);
        }
        std::printf("\n");
    }
    return 0;
}
