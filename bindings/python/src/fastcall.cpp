#include "fastcall.hpp"

#include <pybind11/stl.h>  // every translation unit sees the same type casters (gil.hpp)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"
#include "gather.hpp"
#include "queue.hpp"

namespace ringcast::python::detail {

namespace {

// One endpoint method as a callable. Not instantiable from Python (no tp_new): made by the fast_*
// functions below, which take the C++ object out of its pybind11 owner once.
using Entry = PyObject* (*)(void* target, PyObject* const* args, Py_ssize_t nargs);

struct FastCall {
    PyObject_HEAD
    vectorcallfunc vectorcall;  // first after the head: tp_vectorcall_offset points here
    PyObject* owner;            // the pybind11 endpoint object: `target` lives as long as it does
    void* target;               // owner's C++ object
    Entry entry;
    const char* method;         // the method's name, for errors and repr
};

PyObject* refuse(const char* method, const std::string& why) {
    // pybind11's words for a refused argument: _args.raise_in_callers_terms matches their start.
    PyErr_Format(PyExc_TypeError, "%s(): incompatible function arguments. %s", method, why.c_str());
    return nullptr;
}

PyObject* call(PyObject* callable, PyObject* const* args, std::size_t nargsf, PyObject* kwnames) {
    auto* self = reinterpret_cast<FastCall*>(callable);
    if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)
        return refuse(self->method, "This fast entry takes positional arguments only.");
    return self->entry(self->target, args, PyVectorcall_NARGS(nargsf));
}

void dealloc(PyObject* o) {
    auto* self = reinterpret_cast<FastCall*>(o);
    Py_CLEAR(self->owner);
    Py_TYPE(o)->tp_free(o);
}

PyObject* repr(PyObject* o) {
    return PyUnicode_FromFormat("<ringcast fast entry %s of %R>", reinterpret_cast<FastCall*>(o)->method,
                                reinterpret_cast<FastCall*>(o)->owner);
}

PyTypeObject g_fast_call_type = [] {
    PyTypeObject t{};
    Py_SET_REFCNT(reinterpret_cast<PyObject*>(&t), 1);  // what PyVarObject_HEAD_INIT sets; a static type is never freed
    t.tp_name = "ringcast._core.FastEntry";
    t.tp_doc = "A step's call (send_object, recv_object, reply_object or collect_objects) of one endpoint,\n"
               "entered without pybind11's dispatcher; positional arguments only.";
    t.tp_basicsize = sizeof(FastCall);
    t.tp_dealloc = dealloc;
    t.tp_repr = repr;
    t.tp_vectorcall_offset = offsetof(FastCall, vectorcall);
    t.tp_call = PyVectorcall_Call;
    t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
    return t;
}();

template <class T>
py::object make(py::object endpoint, const char* method, Entry entry) {
    if (!py::isinstance<T>(endpoint))
        throw py::type_error(std::string("fast_") + method + "() of an object of another class");
    T& target = endpoint.cast<T&>();
    auto* self = PyObject_New(FastCall, &g_fast_call_type);
    if (self == nullptr) throw py::error_already_set();
    self->vectorcall = call;
    self->owner = endpoint.release().ptr();
    self->target = &target;
    self->entry = entry;
    self->method = method;
    return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(self));
}

// ---- arguments, converted as pybind11's casters convert them -------------------------------------

bool count_ok(const char* method, Py_ssize_t n, Py_ssize_t at_least, Py_ssize_t at_most) {
    if (n >= at_least && n <= at_most) return true;
    refuse(method, "It takes " + std::to_string(at_least) + ".." + std::to_string(at_most) +
                       " positional arguments, got " + std::to_string(n) + ".");
    return false;
}

// An int (or anything with __index__; not a float) in 0..2**64-1.
bool u64_arg(const char* method, const char* name, PyObject* o, std::uint64_t& out) {
    if (!PyFloat_Check(o)) {
        if (PyObject* index = PyNumber_Index(o)) {
            out = PyLong_AsUnsignedLongLong(index);
            Py_DECREF(index);
            if (!(out == static_cast<std::uint64_t>(-1) && PyErr_Occurred())) return true;
        }
        PyErr_Clear();
    }
    refuse(method, std::string("Argument '") + name + "' must be an int in 0..2**64-1.");
    return false;
}

// None, or a number (what float() takes).
bool timeout_arg(const char* method, PyObject* o, std::optional<double>& out) {
    if (o == Py_None) {
        out.reset();
        return true;
    }
    const double v = PyFloat_AsDouble(o);
    if (!(v == -1.0 && PyErr_Occurred())) {
        out = v;
        return true;
    }
    PyErr_Clear();
    refuse(method, "Argument 'timeout' must be None or a number.");
    return false;
}

// None, or a sequence of ints in 0..2**32-1 (not str / bytes).
bool ranks_arg(const char* method, PyObject* o, PyGatherCollector::Ranks& out) {
    if (o == Py_None) {
        out.reset();
        return true;
    }
    if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o)) {
        refuse(method, "Argument 'ranks' must be None or a sequence of ints.");
        return false;
    }
    PyObject* seq = PySequence_Fast(o, "ranks");
    if (seq == nullptr) {
        PyErr_Clear();
        refuse(method, "Argument 'ranks' must be None or a sequence of ints.");
        return false;
    }
    std::vector<std::uint32_t> ranks;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    ranks.reserve(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
        std::uint64_t r = 0;
        if (!u64_arg(method, "ranks", PySequence_Fast_GET_ITEM(seq, i), r) || r > UINT32_MAX) {
            Py_DECREF(seq);
            if (!PyErr_Occurred()) refuse(method, "Argument 'ranks' must be None or a sequence of ints.");
            return false;
        }
        ranks.push_back(static_cast<std::uint32_t>(r));
    }
    Py_DECREF(seq);
    out = std::move(ranks);
    return true;
}

PyObject* arg_or_none(PyObject* const* args, Py_ssize_t n, Py_ssize_t i) { return i < n ? args[i] : Py_None; }

// The call itself: a C++ exception becomes its Python one.
template <class F>
PyObject* guarded(F&& f) noexcept {
    try {
        return f();
    } catch (...) {
        raise_current_exception();
        return nullptr;
    }
}

// ---- the entries ------------------------------------------------------------------------------------

PyObject* send_object_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "send_object";
    std::optional<double> timeout;
    if (!count_ok(kMethod, n, 1, 2) || !timeout_arg(kMethod, arg_or_none(args, n, 1), timeout)) return nullptr;
    return guarded([&] { return static_cast<PyWriter*>(target)->send_object(args[0], timeout).release().ptr(); });
}

PyObject* recv_object_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "recv_object";
    std::optional<double> timeout;
    if (!count_ok(kMethod, n, 0, 1) || !timeout_arg(kMethod, arg_or_none(args, n, 0), timeout)) return nullptr;
    return guarded([&] { return static_cast<PyReader*>(target)->recv_object(timeout).release().ptr(); });
}

PyObject* reply_object_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "reply_object";
    std::uint64_t tag = 0;
    std::optional<double> timeout;
    if (!count_ok(kMethod, n, 2, 3) || !u64_arg(kMethod, "tag", args[0], tag) ||
        !timeout_arg(kMethod, arg_or_none(args, n, 2), timeout))
        return nullptr;
    return guarded([&] {
        static_cast<PyGatherWorker*>(target)->reply_object(tag, args[1], timeout);
        return Py_NewRef(Py_None);
    });
}

PyObject* collect_objects_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "collect_objects";
    std::uint64_t tag = 0;
    PyGatherCollector::Ranks ranks;
    std::optional<double> timeout;
    if (!count_ok(kMethod, n, 2, 3) || !u64_arg(kMethod, "tag", args[0], tag) || !ranks_arg(kMethod, args[1], ranks) ||
        !timeout_arg(kMethod, arg_or_none(args, n, 2), timeout))
        return nullptr;
    return guarded([&] {
        return static_cast<PyGatherCollector*>(target)->collect_objects(tag, std::move(ranks), timeout).release().ptr();
    });
}

}  // namespace

void register_fast_calls() {
    // Not a module attribute: its objects come from the endpoints' fast_* methods only.
    if (PyType_Ready(&g_fast_call_type) < 0) throw py::error_already_set();
}

py::object fast_send_object(py::object endpoint) {
    return make<PyWriter>(std::move(endpoint), "send_object", send_object_entry);
}
py::object fast_recv_object(py::object endpoint) {
    return make<PyReader>(std::move(endpoint), "recv_object", recv_object_entry);
}
py::object fast_reply_object(py::object endpoint) {
    return make<PyGatherWorker>(std::move(endpoint), "reply_object", reply_object_entry);
}
py::object fast_collect_objects(py::object endpoint) {
    return make<PyGatherCollector>(std::move(endpoint), "collect_objects", collect_objects_entry);
}

}  // namespace ringcast::python::detail
