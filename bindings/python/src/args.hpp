// Python arguments to core types: timeouts, wait strategies, liveness intervals, buffers.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "ringcast/wait.hpp"

namespace py = pybind11;

namespace ringcast::python::detail {

// None: forever; raises ValueError unless >= 0 (NaN included).
std::chrono::nanoseconds to_timeout(const std::optional<double>& seconds);
// "<seconds> s" or "forever", for timeout messages.
std::string timeout_text(const std::optional<double>& seconds);
// The longest spin_us / spin_max_us taken: one hour (a spin is meant for microseconds to milliseconds;
// the bound keeps the conversion to integer nanoseconds defined).
inline constexpr double kMaxSpinUs = 3600.0 * 1e6;
// The longest liveness interval taken: one day (a dead peer is noticed within two intervals).
inline constexpr double kMaxLivenessS = 86400.0;

// wait: "hybrid", "futex", "spin" or "spin_yield"; the GIL probe is installed as before_sleep. Raises
// ValueError naming spin_us / spin_max_us unless each is finite and in 0..kMaxSpinUs.
WaitOptions wait_options(const std::string& wait, double spin_us, double spin_max_us);
// Raises ValueError unless > 0 and <= kMaxLivenessS (NaN and infinities included).
std::chrono::nanoseconds liveness_from(double seconds);

// A buffer exported by a Python object, released (with the GIL) when destroyed.
class PyBuf {
public:
    explicit PyBuf(py::handle obj) {
        if (PyObject_GetBuffer(obj.ptr(), &view_, PyBUF_C_CONTIGUOUS) != 0) throw py::error_already_set();
    }
    ~PyBuf() { PyBuffer_Release(&view_); }
    PyBuf(const PyBuf&) = delete;
    PyBuf& operator=(const PyBuf&) = delete;
    [[nodiscard]] const std::byte* data() const { return static_cast<const std::byte*>(view_.buf); }
    [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(view_.len); }
    [[nodiscard]] bool readonly() const { return view_.readonly != 0; }

private:
    Py_buffer view_{};
};

}  // namespace ringcast::python::detail
