#include "args.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "errors.hpp"
#include "gil.hpp"

namespace ringcast::python::detail {

namespace {

std::string format_double(double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.15g", v);
    return text;
}

WaitKind parse_wait(const std::string& s) {
    if (s == "hybrid") return WaitKind::hybrid;
    if (s == "futex") return WaitKind::futex;
    if (s == "spin") return WaitKind::spin;
    if (s == "spin_yield") return WaitKind::spin_yield;
    throw Failure{PyExc_ValueError, "wait must be 'hybrid', 'futex', 'spin' or 'spin_yield', got '" + s + "'"};
}

// A spin in microseconds, checked before it is converted to integer nanoseconds (a NaN, an infinity or
// a value past int64's range would make that conversion undefined).
std::chrono::nanoseconds spin_from(const char* name, double us) {
    if (!std::isfinite(us) || us < 0.0 || us > kMaxSpinUs)
        throw Failure{PyExc_ValueError, std::string(name) + " must be a number of microseconds in 0.." +
                                            format_double(kMaxSpinUs) + " (one hour), got " + format_double(us)};
    return std::chrono::nanoseconds(static_cast<std::int64_t>(us * 1000.0));
}

}  // namespace

std::chrono::nanoseconds to_timeout(const std::optional<double>& seconds) {
    if (!seconds) return kForever;
    if (!(*seconds >= 0.0)) throw Failure{PyExc_ValueError, "timeout must be None or >= 0 seconds"};
    if (*seconds >= 1e9) return kForever;
    return std::chrono::nanoseconds(static_cast<std::int64_t>(*seconds * 1e9));
}

std::string timeout_text(const std::optional<double>& seconds) {
    if (!seconds) return "forever";
    char text[32];  // as Python writes a float in short: "0.2 s", "1 s" (std::to_string gave "0.200000")
    std::snprintf(text, sizeof text, "%.6g s", *seconds);
    return text;
}

WaitOptions wait_options(const std::string& wait, double spin_us, double spin_max_us) {
    WaitOptions w;
    w.kind = parse_wait(wait);
    w.spin_for = spin_from("spin_us", spin_us);
    w.spin_max = spin_from("spin_max_us", spin_max_us);
    w.before_sleep = {&gil_probe, nullptr};
    return w;
}

std::chrono::nanoseconds liveness_from(double seconds) {
    // NaN and infinities fail the range test; the bound keeps the conversion to nanoseconds defined.
    if (!(seconds > 0.0 && seconds <= kMaxLivenessS))
        throw Failure{PyExc_ValueError, "liveness interval (liveness_interval, liveness_s) must be > 0 and at most " +
                                            format_double(kMaxLivenessS) + " seconds (one day), got " +
                                            format_double(seconds)};
    return std::chrono::nanoseconds(static_cast<std::int64_t>(seconds * 1e9));
}

}  // namespace ringcast::python::detail
