// The floor's round trip in one thread: the same stores and loads as FloorSystem, no other core.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>
struct alignas(128) Line { std::atomic<unsigned> seq{0}; unsigned len = 0; std::byte p[64]; };
struct Shared { Line req; Line ack; alignas(128) std::byte data[256]; };
int main() {
  static Shared sh;
  std::vector<std::byte> msg(64, std::byte{1}), buf; buf.reserve(256);
  std::byte reply[8]{};
  const int N = 20000000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i <= N; ++i) {
    std::memcpy(sh.data, msg.data(), 64); sh.req.len = 64; sh.req.seq.store(i, std::memory_order_release);
    while (sh.req.seq.load(std::memory_order_acquire) != unsigned(i)) {}
    buf.resize(sh.req.len); std::memcpy(buf.data(), sh.data, sh.req.len);
    std::memcpy(reply, buf.data(), 8);
    std::memcpy(sh.ack.p, reply, 8); sh.ack.len = 8; sh.ack.seq.store(i, std::memory_order_release);
    while (sh.ack.seq.load(std::memory_order_acquire) != unsigned(i)) {}
    asm volatile("" ::: "memory");
  }
  auto t1 = std::chrono::steady_clock::now();
  printf("floor RTT's steps in one thread: %.1f ns\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / N);
}
