// Run by Fork.WhereTheKernelRefusesTheWipedPageAForkChildIsStillRefused (api_misuse_test.cpp) under a
// seccomp filter that refuses madvise(MADV_WIPEONFORK), as an older kernel or a sandbox does: this
// library's initialisation then keeps the pid in its static fallback word, and only the
// pthread_atfork handler (process.cpp) tells a fork() child that it is not its parent. Exit codes
// (none of them a sanitizer's: ASan and UBSan exit 1, LSan 23, TSan 66):
//   0, 2, 3, 5  what the child's write came to (fork_child.hpp); 0 only if the parent's ring is as it was
//   4  fork() or waitpid() failed, or the child was killed
//   6  the child was refused, but the parent's ring was not as it should be after
//   10 the wiped page was granted (the filter did not hold: nothing here tests the fallback)
//   64 usage
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include "fork_child.hpp"
#include "ringcast/detail/process.hpp"
#include "ringcast/ring.hpp"

using namespace ringcast;
using namespace std::chrono_literals;

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s SEGMENT_NAME\n", argv[0]);
        return 64;
    }
    if (detail::pid_word_wiped_in_fork_children()) return 10;
    const std::string name = argv[1];
    auto w = Writer::create(name, SegmentOptions{.readers = 1, .capacity = 64 << 10});
    auto r = Reader::attach(name, 0);
    const std::byte payload[10]{};
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    if (child == 0) ::_exit(test::write_through_parents_writer(w, parent));
    if (child < 0) return 4;
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return 4;
    int code = WEXITSTATUS(status);
    if (r.peek(0ns).status != Status::timed_out) code = code == 0 ? 6 : code;  // the child's message is there
    if (w.write(payload, 1s, 1) != Status::ok || r.peek(1s).tag != 1u) code = code == 0 ? 6 : code;
    return code;  // the writer unlinks the name as it goes (the test's ScopedName would too)
}
