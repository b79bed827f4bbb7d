#include "errors.hpp"

#include <exception>
#include <new>
#include <stdexcept>

#include "ringcast/error.hpp"

namespace ringcast::python::detail {

PyObject* g_ringcast_error = nullptr;
PyObject* g_closed_error = nullptr;
PyObject* g_peer_dead_error = nullptr;
PyObject* g_stale_reply_error = nullptr;
PyObject* g_segment_error = nullptr;

namespace {

void translate(std::exception_ptr p) {
    try {
        if (p) std::rethrow_exception(p);
    } catch (const TimedOut& e) {
        PyErr_SetString(PyExc_TimeoutError, e.what.c_str());
    } catch (const Closed& e) {
        PyErr_SetString(g_closed_error, e.what.c_str());
    } catch (const Failure& e) {
        PyErr_SetString(e.type, e.what.c_str());
    } catch (const Error& e) {
        PyObject* type = g_ringcast_error;
        switch (e.code()) {
            case ErrorCode::peer_dead: type = g_peer_dead_error; break;
            case ErrorCode::invalid_argument:
            case ErrorCode::not_found:
            case ErrorCode::already_exists:
            case ErrorCode::rank_in_use:
            case ErrorCode::rank_left:
            case ErrorCode::writer_in_use:
            case ErrorCode::message_too_large: type = PyExc_ValueError; break;
            case ErrorCode::permission_denied: type = PyExc_PermissionError; break;
            case ErrorCode::system: type = PyExc_OSError; break;
            case ErrorCode::no_space: type = PyExc_MemoryError; break;
            case ErrorCode::stale_reply: type = g_stale_reply_error; break;
            // What the segment holds is not what this ringcast can use: one type for every cause, so
            // that a caller tells "bad shared memory" from a bad argument without reading the text.
            case ErrorCode::not_ringcast:
            case ErrorCode::version_mismatch:
            case ErrorCode::corrupt: type = g_segment_error; break;
            case ErrorCode::fell_behind:  // remote.cpp's translator, registered later, raises FellBehindError
            case ErrorCode::protocol: type = g_ringcast_error; break;
        }
        PyErr_SetString(type, e.what());
    }
}

}  // namespace

void raise_current_exception() noexcept {
    try {
        throw;
    } catch (py::error_already_set& e) {
        e.restore();
    } catch (const py::builtin_exception& e) {
        e.set_error();
    } catch (...) {
        try {
            translate(std::current_exception());  // ringcast's own exceptions; rethrows any other
        } catch (const std::bad_alloc& e) {  // the standard ones as pybind11's default translator maps them
            PyErr_SetString(PyExc_MemoryError, e.what());
        } catch (const std::domain_error& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const std::invalid_argument& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const std::length_error& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const std::out_of_range& e) {
            PyErr_SetString(PyExc_IndexError, e.what());
        } catch (const std::range_error& e) {
            PyErr_SetString(PyExc_ValueError, e.what());
        } catch (const std::overflow_error& e) {
            PyErr_SetString(PyExc_OverflowError, e.what());
        } catch (const std::exception& e) {
            PyErr_SetString(PyExc_RuntimeError, e.what());
        } catch (...) {
            PyErr_SetString(PyExc_RuntimeError, "Caught an unknown exception!");
        }
    }
}

void register_exceptions(py::module_& m) {
    g_ringcast_error = PyErr_NewExceptionWithDoc("ringcast.RingcastError", "Base of ringcast's exceptions.",
                                                 PyExc_Exception, nullptr);
    g_closed_error = PyErr_NewExceptionWithDoc("ringcast.ClosedError", "The queue was shut down (and drained).",
                                               g_ringcast_error, nullptr);
    g_peer_dead_error = PyErr_NewExceptionWithDoc(
        "ringcast.PeerDeadError", "The writer or a reader process died.", g_ringcast_error, nullptr);
    m.attr("RingcastError") = py::handle(g_ringcast_error);
    m.attr("ClosedError") = py::handle(g_closed_error);
    m.attr("PeerDeadError") = py::handle(g_peer_dead_error);
    g_stale_reply_error = PyErr_NewExceptionWithDoc(
        "ringcast.StaleReplyError", "A reply carried another request's tag.", g_ringcast_error, nullptr);
    m.attr("StaleReplyError") = py::handle(g_stale_reply_error);
    // Also a ValueError: a foreign or other-version segment was a ValueError before this type
    // existed, and `except ValueError` around an attach keeps catching it.
    py::tuple segment_bases = py::make_tuple(py::handle(g_ringcast_error), py::handle(PyExc_ValueError));
    g_segment_error = PyErr_NewExceptionWithDoc(
        "ringcast.SegmentError", "The shared memory is not a ringcast segment this process can use.",
        segment_bases.ptr(), nullptr);
    m.attr("SegmentError") = py::handle(g_segment_error);
    py::register_exception_translator(&translate);
}

}  // namespace ringcast::python::detail
