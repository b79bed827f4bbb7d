#include "gil.hpp"

namespace ringcast::python::detail {

// Every endpoint call checks that this process created the endpoint (fork detection: made_in_, a
// kept pid that every fork child finds zeroed, ringcast/detail/process.hpp), not a getpid() call.

std::atomic<std::uint64_t> g_sleeps{0};
std::atomic<std::uint64_t> g_sleeps_holding_gil{0};
std::atomic<bool> g_release_gil{true};

unsigned long g_main_thread_ident = 0;

void gil_probe(void*) {
    g_sleeps.fetch_add(1, std::memory_order_relaxed);
    if (PyGILState_Check()) g_sleeps_holding_gil.fetch_add(1, std::memory_order_relaxed);
}

bool in_main_thread() { return PyThread_get_thread_ident() == g_main_thread_ident; }

void check_signals(Gil& gil) {
    gil.acquire();
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

Endpoint::Endpoint(std::chrono::nanoseconds liveness) : liveness_(liveness) {}

void Endpoint::check_usable(const char* what) const {
    if (made_in_.in_forked_child())
        throw Failure{g_ringcast_error,
                      made_in_.copy_refusal(what, "this endpoint",
                                            "Make an endpoint of this process's own (readers and workers attach from the Handle)")};
    if (shut_.load(std::memory_order_acquire)) throw Closed{std::string(what) + ": " + shut_text_};
}

bool Endpoint::forked_child() const { return made_in_.in_forked_child(); }

}  // namespace ringcast::python::detail
