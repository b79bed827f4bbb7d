#include <chrono>
#include <cstdio>
#include <vector>
#include <string>
#include <unistd.h>
#include "ringcast/ring.hpp"
using namespace ringcast;
int main() {
  std::string rq = "st-req-" + std::to_string(getpid()), rp = "st-rep-" + std::to_string(getpid());
  WriterOptions wo; wo.wait.kind = WaitKind::spin;
  ReaderOptions ro; ro.wait.kind = WaitKind::spin;
  auto w = Writer::create(rq, {.readers = 1, .capacity = 1 << 20}, wo);
  auto r = Reader::attach(rq, 0, ro);
  auto rw = Writer::create(rp, {.readers = 1, .capacity = 64 * 1024}, wo);
  auto rr = Reader::attach(rp, 0, ro);
  std::vector<std::byte> msg(64, std::byte{1}), buf; buf.reserve(256);
  std::byte reply[8]{};
  const int N = 2000000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < N; ++i) {
    (void)w.write(msg, std::chrono::seconds(1));
    (void)r.read(buf, std::chrono::seconds(1));
    (void)rw.write({reply, 8}, std::chrono::seconds(1));
    auto m = rr.peek(std::chrono::seconds(1)); (void)m; rr.release();
  }
  auto t1 = std::chrono::steady_clock::now();
  printf("one RTT's calls in one thread: %.1f ns\n", std::chrono::duration<double, std::nano>(t1 - t0).count() / N);
}
