// Experiment: where does ringcast's round trip exceed the bare floor? 1 writer, 1 reader, pinned.
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <immintrin.h>
#include "ringcast/ring.hpp"
using namespace ringcast;
static int64_t now() { return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static void pin(int c) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(c, &s); sched_setaffinity(0, sizeof s, &s); }
struct alignas(128) Line { std::atomic<uint32_t> seq{0}; uint32_t len=0; std::byte p[64]; };
struct Shared { Line req; Line ack; alignas(128) std::byte data[256]; };
constexpr int N = 200000;
int main(int argc, char** argv) {
  std::string mode = argv[1];
  size_t size = 64; uint64_t cap = argc > 2 ? std::stoull(argv[2]) : (1 << 20);
  bool rc_req = mode == "rc" || mode == "rcreq";
  bool rc_rep = mode == "rc" || mode == "rcrep";
  auto* sh = new (mmap(nullptr, sizeof(Shared), PROT_READ|PROT_WRITE, MAP_SHARED|MAP_ANONYMOUS, -1, 0)) Shared{};
  std::string rq = "hopx-req-" + std::to_string(getpid()), rp = "hopx-rep-" + std::to_string(getpid());
  WriterOptions wo; wo.wait.kind = WaitKind::spin; wo.unlink_on_destroy = false;
  ReaderOptions ro; ro.wait.kind = WaitKind::spin;
  auto w = Writer::create(rq, {.readers = 1, .capacity = cap}, wo);
  auto repseg = Segment::create(rp, {.readers = 1, .capacity = 64 * 1024});
  pid_t pid = fork();
  if (pid == 0) {
    pin(1);
    auto r = Reader::attach(rq, 0, ro);
    auto rw = Writer::open(rp, wo);
    std::vector<std::byte> buf; buf.reserve(256);
    std::byte reply[8]{};
    uint32_t seen = 0;
    for (int i = 0; i < N + 1000; ++i) {
      if (rc_req) { (void)r.read(buf, std::chrono::seconds(10)); }
      else { uint32_t v; while ((v = sh->req.seq.load(std::memory_order_acquire)) == seen) _mm_pause(); seen = v; buf.resize(sh->req.len); memcpy(buf.data(), sh->data, sh->req.len); }
      memcpy(reply, buf.data(), 8);
      if (rc_rep) (void)rw.write({reply, 8}, std::chrono::seconds(10));
      else { memcpy(sh->ack.p, reply, 8); sh->ack.len = 8; sh->ack.seq.store(i + 1, std::memory_order_release); }
    }
    _exit(0);
  }
  pin(0);
  auto rr = Reader::attach(rp, 0, ro);
  std::vector<std::byte> msg(size, std::byte{1});
  std::vector<int64_t> t; t.reserve(N);
  for (int i = 0; i < N + 1000; ++i) {
    int64_t t0 = now();
    if (rc_req) (void)w.write(msg, std::chrono::seconds(10));
    else { memcpy(sh->data, msg.data(), size); sh->req.len = size; sh->req.seq.store(i + 1, std::memory_order_release); }
    if (rc_rep) { auto m = rr.peek(std::chrono::seconds(10)); (void)m; rr.release(); }
    else { while (sh->ack.seq.load(std::memory_order_acquire) != uint32_t(i + 1)) _mm_pause(); }
    int64_t t1 = now();
    if (i >= 1000) t.push_back(t1 - t0);
  }
  waitpid(pid, nullptr, 0);
  std::sort(t.begin(), t.end());
  printf("%-6s p50 %.3f us p90 %.3f\n", mode.c_str(), t[t.size()/2]/1000.0, t[t.size()*9/10]/1000.0);
  Segment::remove(rq); Segment::remove(rp);
}
