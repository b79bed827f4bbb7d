#include "pickling.hpp"

#include <cstdint>

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
// what this file saves), so the state of the dumps in progress is this thread's: set by OutOfBand
// below for the duration of one pickle.dumps call, restored after it (a __reduce__ that enqueues on
// another queue pickles inside our pickling: the inner call sees its own state, ours comes back).
struct OutOfBandState {
    std::size_t threshold;
    std::size_t max_buffers;
    PyObject* list;  // borrowed: Pickled::out_of_band
};
thread_local OutOfBandState* t_state = nullptr;

class OutOfBand {
public:
    explicit OutOfBand(OutOfBandState* s) : saved_(t_state) { t_state = s; }
    ~OutOfBand() { t_state = saved_; }
    OutOfBand(const OutOfBand&) = delete;
    OutOfBand& operator=(const OutOfBand&) = delete;

private:
    OutOfBandState* saved_;
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

PyObject* call_or_throw(PyObject* result) {
    if (result == nullptr) throw py::error_already_set();
    return result;
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
}

void set_pickle_functions(py::object dumps, py::object loads) {
    Py_XDECREF(g_dumps);
    Py_XDECREF(g_loads);
    g_dumps = dumps.release().ptr();
    g_loads = loads.release().ptr();
}

Pickled dumps_out_of_band(py::handle obj, std::size_t threshold, std::size_t max_buffers) {
    Pickled p;
    py::object message = py::reinterpret_borrow<py::object>(obj);
    PyTypeObject* type = Py_TYPE(obj.ptr());
    if (type == &PyBytes_Type || type == &PyByteArray_Type || type == &PyMemoryView_Type) {
        const Py_ssize_t len = PyObject_Size(obj.ptr());  // as Python's len(): a memoryview counts items
        if (len < 0) throw py::error_already_set();
        if (static_cast<std::size_t>(len) >= threshold)
            message = py::reinterpret_steal<py::object>(call_or_throw(PyObject_CallOneArg(g_pickle_buffer, obj.ptr())));
    }
    OutOfBandState state{threshold, max_buffers, p.out_of_band.ptr()};
    OutOfBand scope(&state);
    PyObject* args[] = {message.ptr(), g_protocol5, g_out_of_band_callback};
    p.data = py::reinterpret_steal<py::bytes>(call_or_throw(PyObject_Vectorcall(g_dumps, args, 2, g_callback_kwnames)));
    return p;
}

py::bytes dumps_in_band(py::handle obj) {
    PyObject* args[] = {obj.ptr(), g_protocol5};
    return py::reinterpret_steal<py::bytes>(call_or_throw(PyObject_Vectorcall(g_dumps, args, 2, nullptr)));
}

py::object loads_in_place(std::span<const std::byte> bytes) {
    // PyMemoryView_FromMemory wants a char* even for a read-only view (PyBUF_READ: Python cannot write).
    PyObject* view = call_or_throw(PyMemoryView_FromMemory(
        const_cast<char*>(reinterpret_cast<const char*>(bytes.data())), static_cast<Py_ssize_t>(bytes.size()),
        PyBUF_READ));
    PyObject* result = PyObject_CallOneArg(g_loads, view);
    // CPython's unpickler holds its input only while loads() runs and hands it to no user code (its
    // bytes/bytearray opcodes copy), so normally this function holds the last reference. Should
    // anything else hold one, release() makes every later access raise ValueError instead of reading
    // a record the caller frees next; if even that is refused (a live export of the view), the
    // message cannot be delivered safely and that is the error raised.
    if (Py_REFCNT(view) > 1) {
        PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
        PyErr_Fetch(&type, &value, &trace);  // loads' own error, if any: no call may run with it set
        PyObject* released = PyObject_CallMethod(view, "release", nullptr);
        if (released == nullptr) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(trace);
            Py_XDECREF(result);
            Py_DECREF(view);
            throw py::error_already_set();  // BufferError from release(): names the live export
        }
        Py_DECREF(released);
        PyErr_Restore(type, value, trace);
    }
    Py_DECREF(view);
    return py::reinterpret_steal<py::object>(call_or_throw(result));
}

py::object loads(py::handle data) {
    return py::reinterpret_steal<py::object>(call_or_throw(PyObject_CallOneArg(g_loads, data.ptr())));
}

}  // namespace ringcast::python::detail
