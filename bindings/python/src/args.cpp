#include "args.hpp"

#include <cstdint>

#include "errors.hpp"
#include "gil.hpp"

namespace ringcast::python::detail {

namespace {

WaitKind parse_wait(const std::string& s) {
    if (s == "hybrid") return WaitKind::hybrid;
    if (s == "futex") return WaitKind::futex;
    if (s == "spin") return WaitKind::spin;
    if (s == "spin_yield") return WaitKind::spin_yield;
    throw Failure{PyExc_ValueError, "wait must be 'hybrid', 'futex', 'spin' or 'spin_yield', got '" + s + "'"};
}

}  // namespace

std::chrono::nanoseconds to_timeout(const std::optional<double>& seconds) {
    if (!seconds) return kForever;
    if (!(*seconds >= 0.0)) throw Failure{PyExc_ValueError, "timeout must be None or >= 0 seconds"};
    if (*seconds >= 1e9) return kForever;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(*seconds * 1e9));
}

std::string timeout_text(const std::optional<double>& seconds) {
    return seconds ? std::to_string(*seconds) + " s" : std::string("forever");
}

WaitOptions wait_options(const std::string& wait, double spin_us, double spin_max_us) {
    if (!(spin_us >= 0.0) || !(spin_max_us >= 0.0))
        throw Failure{PyExc_ValueError, "spin_us and spin_max_us must be >= 0"};
    WaitOptions w;
    w.kind = parse_wait(wait);
    w.spin_for = std::chrono::nanoseconds(static_cast<std::int64_t>(spin_us * 1000.0));
    w.spin_max = std::chrono::nanoseconds(static_cast<std::int64_t>(spin_max_us * 1000.0));
    w.before_sleep = {&gil_probe, nullptr};
    return w;
}

std::chrono::nanoseconds liveness_from(double seconds) {
    if (!(seconds > 0.0)) throw Failure{PyExc_ValueError, "liveness interval must be > 0 seconds"};
    return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

}  // namespace ringcast::python::detail
