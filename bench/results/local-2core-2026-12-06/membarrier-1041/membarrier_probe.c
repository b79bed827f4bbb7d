// What a sleeper's asymmetric fence would cost: membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), the
// call a waiter would make before sleeping if publishers used a plain release store instead of the
// seq_cst exchange (w1 of wait.hpp). Times the call with N forked processes spinning on other CPUs
// (registered: the parent registers before fork, and fork keeps the registration), 10,000 calls.
#include <linux/membarrier.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }
static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
    const int spinners = argc > 1 ? atoi(argv[1]) : 0;
    const int calls = 10000;
    if (!(membarrier(MEMBARRIER_CMD_QUERY) & MEMBARRIER_CMD_GLOBAL_EXPEDITED)) {
        puts("MEMBARRIER_CMD_GLOBAL_EXPEDITED not supported");
        return 1;
    }
    if (membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) {
        perror("register");
        return 1;
    }
    pid_t kids[256];
    for (int i = 0; i < spinners && i < 256; ++i) {
        kids[i] = fork();
        if (kids[i] == 0) {
            volatile unsigned long x = 0;
            for (;;) ++x;
        }
    }
    usleep(200000);
    const double t0 = now_us();
    for (int i = 0; i < calls; ++i) membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
    const double t1 = now_us();
    printf("spinners=%d membarrier(GLOBAL_EXPEDITED) %.2f us per call (%d calls)\n", spinners, (t1 - t0) / calls, calls);
    for (int i = 0; i < spinners && i < 256; ++i) kill(kids[i], SIGKILL);
    while (wait(NULL) > 0) {}
    return 0;
}
