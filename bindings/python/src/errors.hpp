// Exceptions of ringcast._core: the Python exception types, the binding's own C++ exceptions, and the
// translation of those and of ringcast::Error into Python exceptions.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace py = pybind11;

namespace ringcast::python::detail {

// Created by register_exceptions() (module import).
extern PyObject* g_ringcast_error;     // ringcast.RingcastError(Exception)
extern PyObject* g_closed_error;       // ringcast.ClosedError(RingcastError)
extern PyObject* g_peer_dead_error;    // ringcast.PeerDeadError(RingcastError)
extern PyObject* g_stale_reply_error;  // ringcast.StaleReplyError(RingcastError)
extern PyObject* g_segment_error;      // ringcast.SegmentError(RingcastError, ValueError)

struct TimedOut {  // -> TimeoutError
    std::string what;
};
struct Closed {  // -> ClosedError
    std::string what;
};
struct Failure {  // a binding-level failure that is not a core Error (corrupt framing, misuse)
    PyObject* type;
    std::string what;
};

// Creates the exception types as attributes of `m` and installs the translator of TimedOut, Closed,
// Failure and ringcast::Error (by ErrorCode).
void register_exceptions(py::module_& m);

// Sets the Python error for the C++ exception being handled, as pybind11's translators would raise it
// for these calls: a pending Python error (error_already_set) restored, pybind11's own exceptions,
// TimedOut / Closed / Failure / Error as above, the standard exceptions as pybind11's default
// translator maps them (bad_alloc: MemoryError, out_of_range: IndexError, ...; any other RuntimeError).
// For the calls that bypass pybind11's dispatcher (fastcall.hpp); call it inside a catch block.
// (ErrorCode::fell_behind, which remote.cpp's translator raises as FellBehindError, is a remote
// reader's: none of those calls can throw it.)
void raise_current_exception() noexcept;

}  // namespace ringcast::python::detail
