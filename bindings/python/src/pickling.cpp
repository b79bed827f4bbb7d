#include "pickling.hpp"

#include <cstdint>
#include <string>

namespace ringcast::python::detail {

namespace {

// Module-lifetime references, taken once at import and never released (the interpreter owns the
// pickle module for as long as this module can be called).
PyObject* g_dumps = nullptr;                // pickle.dumps
PyObject* g_loads = nullptr;                // pickle.loads
PyObject* g_pickle_buffer = nullptr;        // pickle.PickleBuffer
PyObject* g_protocol5 = nullptr;            // 5
PyObject* g_callback_kwnames = nullptr;     // ("buffer_callback",)
PyObject* g_out_of_band_callback = nullptr;  // the buffer_callback below, as a Python callable

// The callback has no per-call Python object to carry its state (creating one per message would cost
// what this file saves), so the state of the dumps in progress is this thread's: set by a Scoped
// below for the duration of one pickle.dumps call, restored after it (a __reduce__ that enqueues on
// another queue pickles inside our pickling: the inner call sees its own state, ours comes back).
// That needs nested calls to end in reverse order, as calls on one thread's stack do; a greenlet that
// switched to another enqueue inside a __reduce__ and came back in another order would break it (no
// such use is known; the state is only read inside the dumps call that set it).
struct OutOfBandState {
    std::size_t threshold;
    std::size_t max_buffers;
    PyObject* list;  // borrowed: Pickled::out_of_band
};
thread_local OutOfBandState* t_state = nullptr;

// Points a thread-local state slot at `state` for one pickling call; the state before comes back
// after it (a nested call's own, then ours).
template <class State>
class Scoped {
public:
    Scoped(State*& slot, State* state) : slot_(slot), saved_(slot) { slot_ = state; }
    ~Scoped() { slot_ = saved_; }
    Scoped(const Scoped&) = delete;
    Scoped& operator=(const Scoped&) = delete;

private:
    State*& slot_;
    State* saved_;
};

// buffer_callback(pb) -> True: keep the buffer in the pickle; False: it travels out of band (appended).
PyObject* out_of_band_callback(PyObject*, PyObject* pb) {
    OutOfBandState* s = t_state;
    if (s == nullptr || static_cast<std::size_t>(PyList_GET_SIZE(s->list)) >= s->max_buffers) Py_RETURN_TRUE;
    PyObject* raw = PyObject_CallMethod(pb, "raw", nullptr);  // a flat 'B' memoryview; BufferError if strided
    if (raw == nullptr) {
        if (!PyErr_ExceptionMatches(PyExc_BufferError)) return nullptr;
        PyErr_Clear();
        Py_RETURN_TRUE;
    }
    if (!PyMemoryView_Check(raw)) {  // only a stand-in pickler passes something else than a PickleBuffer
        PyErr_Format(PyExc_TypeError, "buffer_callback: raw() returned %.100s, not a memoryview", Py_TYPE(raw)->tp_name);
        Py_DECREF(raw);
        return nullptr;
    }
    const Py_buffer* view = PyMemoryView_GET_BUFFER(raw);
    if (static_cast<std::size_t>(view->len) < s->threshold) {
        Py_DECREF(raw);
        Py_RETURN_TRUE;
    }
    PyObject* owner = view->obj;
    PyObject* part = (owner != nullptr && PyBytes_CheckExact(owner) && PyBytes_GET_SIZE(owner) == view->len) ? owner : raw;
    const int appended = PyList_Append(s->list, part);
    Py_DECREF(raw);
    if (appended != 0) return nullptr;
    Py_RETURN_FALSE;
}

PyMethodDef g_callback_def = {"_ringcast_out_of_band", out_of_band_callback, METH_O, nullptr};

// dumps_with_pickler's file: the C pickler calls its write() with what it made — once, at the end of
// dump(), for a pickle under its 64 KiB frame target; more often for a larger one, and with a payload
// of 64 KiB or more written as itself. The pieces are kept here (thread-local, saved and restored
// around a nested dump as the out-of-band state is): a bytes piece by reference, anything else (a memoryview of
// a buffer in the object) copied at once.
struct SinkState {
    py::object first;  // the common case: the whole pickle, one bytes object
    py::object more;   // a list of the pieces after it, made on the second write (null until then)
};
thread_local SinkState* t_sink = nullptr;

PyObject* sink_write(PyObject*, PyObject* piece) {
    SinkState* s = t_sink;
    if (s == nullptr) {
        PyErr_SetString(PyExc_RuntimeError, "ringcast's pickle collector written outside a dump");
        return nullptr;
    }
    PyObject* kept = PyBytes_CheckExact(piece) ? Py_NewRef(piece) : PyBytes_FromObject(piece);
    if (kept == nullptr) return nullptr;
    const Py_ssize_t n = PyBytes_GET_SIZE(kept);
    if (!s->first) {
        s->first = py::reinterpret_steal<py::object>(kept);
    } else {
        if (!s->more) {
            PyObject* list = PyList_New(0);  // not py::list(): its throw would cross the C pickler's frames
            if (list == nullptr) {
                Py_DECREF(kept);
                return nullptr;
            }
            s->more = py::reinterpret_steal<py::object>(list);
        }
        const int appended = PyList_Append(s->more.ptr(), kept);
        Py_DECREF(kept);
        if (appended != 0) return nullptr;
    }
    return PyLong_FromSsize_t(n);
}

PyMethodDef g_sink_write_def = {"write", sink_write, METH_O, nullptr};
PyObject* g_sink = nullptr;              // an object whose write is sink_write (types.SimpleNamespace)
PyObject* g_pickler_kwnames = nullptr;   // ("protocol", "buffer_callback")
PyObject* g_dump_name = nullptr;         // "dump"
PyObject* g_clear_memo_name = nullptr;   // "clear_memo"

PyObject* call_or_throw(PyObject* result) {
    if (result == nullptr) throw py::error_already_set();
    return result;
}

// What dumps returned, as bytes: the callers read it with PyBytes_AS_STRING (a stand-in dumps set by
// set_pickle_functions could return anything).
py::bytes bytes_or_throw(PyObject* result) {
    auto out = py::reinterpret_steal<py::object>(call_or_throw(result));
    if (!PyBytes_CheckExact(out.ptr()))
        throw py::type_error(std::string("pickle.dumps returned ") + Py_TYPE(out.ptr())->tp_name + ", not bytes");
    return py::reinterpret_steal<py::bytes>(out.release());
}

}  // namespace

void init_pickling() {
    py::module_ pickle = py::module_::import("pickle");
    g_dumps = py::object(pickle.attr("dumps")).release().ptr();
    g_loads = py::object(pickle.attr("loads")).release().ptr();
    g_pickle_buffer = py::object(pickle.attr("PickleBuffer")).release().ptr();
    g_protocol5 = py::int_(5).release().ptr();
    g_callback_kwnames = py::make_tuple("buffer_callback").release().ptr();
    g_out_of_band_callback = call_or_throw(PyCFunction_New(&g_callback_def, nullptr));
    py::object write = py::reinterpret_steal<py::object>(call_or_throw(PyCFunction_New(&g_sink_write_def, nullptr)));
    g_sink = py::module_::import("types").attr("SimpleNamespace")(py::arg("write") = write).release().ptr();
    g_pickler_kwnames = py::make_tuple("protocol", "buffer_callback").release().ptr();
    g_dump_name = py::str("dump").release().ptr();
    g_clear_memo_name = py::str("clear_memo").release().ptr();
}

void set_pickle_functions(py::object dumps, py::object loads) {
    Py_XDECREF(g_dumps);
    Py_XDECREF(g_loads);
    g_dumps = dumps.release().ptr();
    g_loads = loads.release().ptr();
}

namespace {

// What is pickled for `obj`: itself, or a PickleBuffer of it when it is a bytes/bytearray of at least
// `threshold` bytes (the C pickler writes those in-band before any hook runs), and always for a
// memoryview, which pickle cannot pickle at all (a PickleBuffer of it is pickled as its bytes; the
// out-of-band rule then compares its size in bytes, not its length in items).
py::object message_to_pickle(py::handle obj, std::size_t threshold) {
    PyTypeObject* type = Py_TYPE(obj.ptr());
    const bool wrap = type == &PyMemoryView_Type ||
                      ((type == &PyBytes_Type || type == &PyByteArray_Type) &&
                       static_cast<std::size_t>(Py_SIZE(obj.ptr())) >= threshold);
    if (wrap) return py::reinterpret_steal<py::object>(call_or_throw(PyObject_CallOneArg(g_pickle_buffer, obj.ptr())));
    return py::reinterpret_borrow<py::object>(obj);
}

}  // namespace

Pickled dumps_out_of_band(py::handle obj, std::size_t threshold, std::size_t max_buffers) {
    Pickled p;
    const py::object message = message_to_pickle(obj, threshold);
    OutOfBandState state{threshold, max_buffers, p.out_of_band.ptr()};
    Scoped<OutOfBandState> scope(t_state, &state);
    PyObject* args[] = {message.ptr(), g_protocol5, g_out_of_band_callback};
    p.data = bytes_or_throw(PyObject_Vectorcall(g_dumps, args, 2, g_callback_kwnames));
    return p;
}

PickledWith dumps_with_pickler(py::object reuse, py::handle factory, py::handle obj, std::size_t threshold,
                               std::size_t max_buffers) {
    PickledWith out;
    const py::object message = message_to_pickle(obj, threshold);
    OutOfBandState state{threshold, max_buffers, out.pickled.out_of_band.ptr()};
    Scoped<OutOfBandState> scope(t_state, &state);
    SinkState sink;
    Scoped<SinkState> collecting(t_sink, &sink);
    if (reuse && !reuse.is_none()) {
        out.pickler = std::move(reuse);
    } else {
        PyObject* make[] = {g_sink, g_protocol5, g_out_of_band_callback};
        out.pickler = py::reinterpret_steal<py::object>(call_or_throw(PyObject_Vectorcall(factory.ptr(), make, 1, g_pickler_kwnames)));
    }
    // From the dump on, a failure gives back what the pickler's hooks took (abandon_pickler).
    try {
        PyObject* dump[] = {out.pickler.ptr(), message.ptr()};
        Py_DECREF(call_or_throw(PyObject_VectorcallMethod(g_dump_name, dump, 2, nullptr)));
        PyObject* clear[] = {out.pickler.ptr()};
        Py_DECREF(call_or_throw(PyObject_VectorcallMethod(g_clear_memo_name, clear, 1, nullptr)));
        if (!sink.first) throw py::type_error("the pickler wrote nothing (a dump without output)");
        if (!sink.more) {
            out.pickled.data = py::reinterpret_steal<py::bytes>(sink.first.release());
        } else {
            if (PyList_Insert(sink.more.ptr(), 0, sink.first.ptr()) != 0) throw py::error_already_set();
            out.pickled.data = bytes_or_throw(PyObject_CallMethod(py::bytes().ptr(), "join", "O", sink.more.ptr()));
        }
    } catch (...) {
        abandon_pickler(out.pickler);
        throw;
    }
    return out;
}

void abandon_pickler(py::handle pickler) noexcept {
    PyObject *type_, *value, *trace;
    PyErr_Fetch(&type_, &value, &trace);  // the error being raised, if still set, stays the one raised
    if (PyObject* abandon = PyObject_GetAttrString(pickler.ptr(), "abandon")) {
        Py_XDECREF(PyObject_CallNoArgs(abandon));
        Py_DECREF(abandon);
    }
    PyErr_Clear();
    PyErr_Restore(type_, value, trace);
}

py::bytes dumps_in_band(py::handle obj) {
    PyObject* args[] = {obj.ptr(), g_protocol5};
    return bytes_or_throw(PyObject_Vectorcall(g_dumps, args, 2, nullptr));
}

py::object loads(py::handle data) {
    return py::reinterpret_steal<py::object>(call_or_throw(PyObject_CallOneArg(g_loads, data.ptr())));
}

}  // namespace ringcast::python::detail
