#include "fastcall.hpp"

#include <pybind11/stl.h>  // every translation unit sees the same type casters (gil.hpp)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#if defined(__GLIBCXX__)
#include <cxxabi.h>  // abi::__forced_unwind
#endif

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
    // Every C++ exception of an entry — its argument parsing's too — becomes its Python one here: none
    // unwinds into CPython's frames (but a thread's cancellation, as in pybind11's dispatcher).
    try {
        if (self->owner == nullptr) {  // cleared by the garbage collector (tp_clear): its target may be gone
            PyErr_Format(PyExc_ReferenceError, "%s(): the endpoint of this fast entry was released", self->method);
            return nullptr;
        }
        if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0)
            return refuse(self->method, "This fast entry takes positional arguments only.");
        return self->entry(self->target, args, PyVectorcall_NARGS(nargsf));
#if defined(__GLIBCXX__)
    } catch (abi::__forced_unwind&) {
        throw;
#endif
    } catch (...) {
        raise_current_exception();
        return nullptr;
    }
}

// The entry holds its endpoint, and a Python subclass of an endpoint may hold the entry: the
// collector must see that edge, or such a cycle (and its shared memory) would never be freed.
int traverse(PyObject* o, visitproc visit, void* arg) {
    Py_VISIT(reinterpret_cast<FastCall*>(o)->owner);
    return 0;
}

int clear(PyObject* o) {
    Py_CLEAR(reinterpret_cast<FastCall*>(o)->owner);
    return 0;
}

void dealloc(PyObject* o) {
    PyObject_GC_UnTrack(o);
    clear(o);
    Py_TYPE(o)->tp_free(o);
}

PyObject* repr(PyObject* o) {
    auto* self = reinterpret_cast<FastCall*>(o);
    if (self->owner == nullptr) return PyUnicode_FromFormat("<ringcast fast entry %s, released>", self->method);
    return PyUnicode_FromFormat("<ringcast fast entry %s of %R>", self->method, self->owner);
}

PyTypeObject g_fast_call_type = [] {
    PyTypeObject t{};
    Py_SET_REFCNT(reinterpret_cast<PyObject*>(&t), 1);  // what PyVarObject_HEAD_INIT sets; a static type is never freed
    t.tp_name = "ringcast._core.FastEntry";
    t.tp_doc = "A step's call of one endpoint (send_object, recv_object, reply_object, collect_objects,\n"
               "collect_start, collect_is or collect_result_objects), entered without pybind11's dispatcher;\n"
               "positional arguments only.";
    t.tp_basicsize = sizeof(FastCall);
    t.tp_dealloc = dealloc;
    t.tp_traverse = traverse;
    t.tp_clear = clear;
    t.tp_repr = repr;
    t.tp_vectorcall_offset = offsetof(FastCall, vectorcall);
    t.tp_call = PyVectorcall_Call;
    t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC;
    return t;
}();

template <class T>
py::object make(py::object endpoint, const char* method, Entry entry) {
    if (!py::isinstance<T>(endpoint))
        throw py::type_error(std::string("fast_") + method + "() of an object of another class");
    T& target = endpoint.cast<T&>();
    auto* self = PyObject_GC_New(FastCall, &g_fast_call_type);
    if (self == nullptr) throw py::error_already_set();
    self->vectorcall = call;
    self->owner = endpoint.release().ptr();
    self->target = &target;
    self->entry = entry;
    self->method = method;
    PyObject_GC_Track(reinterpret_cast<PyObject*>(self));
    return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(self));
}

// ---- arguments, converted as pybind11's casters convert them -------------------------------------

bool count_ok(const char* method, Py_ssize_t n, Py_ssize_t at_least, Py_ssize_t at_most) {
    if (n >= at_least && n <= at_most) return true;
    refuse(method, "It takes " + std::to_string(at_least) + ".." + std::to_string(at_most) +
                       " positional arguments, got " + std::to_string(n) + ".");
    return false;
}

// An integer — an int or anything with __index__ (numpy's integers) — in 0..`max`, for argument
// `name`. Stricter than pybind11's caster, which also took any number with __int__ and truncated it
// (a tag of Fraction(7, 2) became 3): the Python layer's documents say a tag or rank is an int. A type
// or range refusal is pybind11's TypeError (its text built only then: this runs on every step's tag);
// any other error (an __index__ that raised) is raised as is.
bool int_arg(const char* method, const char* name, PyObject* o, std::uint64_t max, std::uint64_t& out) {
    if (PyObject* index = PyNumber_Index(o)) {
        out = PyLong_AsUnsignedLongLong(index);
        Py_DECREF(index);
        if (!(out == static_cast<std::uint64_t>(-1) && PyErr_Occurred()) && out <= max) return true;
    }
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_OverflowError)) return false;
        PyErr_Clear();
    }
    refuse(method, std::string("Argument '") + name + "'" +
                       (max == UINT64_MAX ? " must be an int in 0..2**64-1." : " must be ints in 0..2**32-1."));
    return false;
}

bool u64_arg(const char* method, const char* name, PyObject* o, std::uint64_t& out) {
    return int_arg(method, name, o, UINT64_MAX, out);
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
    // Not a number (or out of a double's range): pybind11's refusal; any other error (a __float__
    // that raised, KeyboardInterrupt) is raised as it is, as int_arg does.
    if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_OverflowError)) return false;
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
    // The Python layer's list of plain ints is read in place: converting an exact int runs no Python
    // code, so nothing can change the list meanwhile. Anything else is read from a tuple of its items
    // taken before any of them is converted — an item's __index__ may change a list while it is read
    // (PySequence_Fast would hand back the list itself); an error while the sequence is read (its
    // __getitem__ raised) is raised as it is.
    py::object snapshot;
    PyObject* items = o;
    bool plain = PyList_CheckExact(o);
    for (Py_ssize_t i = 0; plain && i < PyList_GET_SIZE(o); ++i) plain = PyLong_CheckExact(PyList_GET_ITEM(o, i));
    if (!plain) {
        snapshot = py::reinterpret_steal<py::object>(PySequence_Tuple(o));
        if (!snapshot) return false;
        items = snapshot.ptr();
    }
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(items);  // a list or a tuple
    std::vector<std::uint32_t> ranks;
    ranks.reserve(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i) {
        std::uint64_t r = 0;
        if (!int_arg(method, "ranks", PySequence_Fast_GET_ITEM(items, i), UINT32_MAX, r)) return false;
        ranks.push_back(static_cast<std::uint32_t>(r));
    }
    out = std::move(ranks);
    return true;
}

PyObject* arg_or_none(PyObject* const* args, Py_ssize_t n, Py_ssize_t i) { return i < n ? args[i] : Py_None; }

// True or False (pybind11's bool caster without conversion).
bool bool_arg(const char* method, const char* name, PyObject* o, bool& out) {
    if (o == Py_True || o == Py_False) {
        out = o == Py_True;
        return true;
    }
    refuse(method, std::string("Argument '") + name + "' must be True or False.");
    return false;
}

// ---- the entries ------------------------------------------------------------------------------------

PyObject* send_object_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "send_object";
    std::optional<double> timeout;
    if (!count_ok(kMethod, n, 1, 2) || !timeout_arg(kMethod, arg_or_none(args, n, 1), timeout)) return nullptr;
    return static_cast<PyWriter*>(target)->send_object(args[0], timeout).release().ptr();
}

PyObject* recv_object_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "recv_object";
    std::optional<double> timeout;
    if (!count_ok(kMethod, n, 0, 1) || !timeout_arg(kMethod, arg_or_none(args, n, 0), timeout)) return nullptr;
    return static_cast<PyReader*>(target)->recv_object(timeout).release().ptr();
}

PyObject* reply_object_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "reply_object";
    std::uint64_t tag = 0;
    std::optional<double> timeout;
    if (!count_ok(kMethod, n, 2, 3) || !u64_arg(kMethod, "tag", args[0], tag) ||
        !timeout_arg(kMethod, arg_or_none(args, n, 2), timeout))
        return nullptr;
    static_cast<PyGatherWorker*>(target)->reply_object(tag, args[1], timeout);
    return Py_NewRef(Py_None);
}

PyObject* collect_objects_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "collect_objects";
    std::uint64_t tag = 0;
    PyGatherCollector::Ranks ranks;
    std::optional<double> timeout;
    if (!count_ok(kMethod, n, 2, 3) || !u64_arg(kMethod, "tag", args[0], tag) || !ranks_arg(kMethod, args[1], ranks) ||
        !timeout_arg(kMethod, arg_or_none(args, n, 2), timeout))
        return nullptr;
    return static_cast<PyGatherCollector*>(target)->collect_objects(tag, std::move(ranks), timeout).release().ptr();
}

// collect_async's three: start (before the executor's preparation), then whether it is still this
// collect and its result (after it: the async step's tail).
PyObject* collect_start_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "collect_start";
    std::uint64_t tag = 0;
    PyGatherCollector::Ranks ranks;
    std::optional<double> timeout;
    bool unpickle = false;
    if (!count_ok(kMethod, n, 2, 4) || !u64_arg(kMethod, "tag", args[0], tag) || !ranks_arg(kMethod, args[1], ranks) ||
        !timeout_arg(kMethod, arg_or_none(args, n, 2), timeout) ||
        !bool_arg(kMethod, "unpickle", n > 3 ? args[3] : Py_False, unpickle))
        return nullptr;
    return PyLong_FromUnsignedLongLong(
        static_cast<PyGatherCollector*>(target)->collect_start(tag, std::move(ranks), timeout, unpickle));
}

PyObject* collect_is_entry(void* target, PyObject* const* args, Py_ssize_t n) {
    constexpr const char* kMethod = "collect_is";
    std::uint64_t id = 0;
    if (!count_ok(kMethod, n, 1, 1) || !u64_arg(kMethod, "id", args[0], id)) return nullptr;
    return PyBool_FromLong(static_cast<PyGatherCollector*>(target)->collect_is(id) ? 1 : 0);
}

PyObject* collect_result_objects_entry(void* target, PyObject* const*, Py_ssize_t n) {
    if (!count_ok("collect_result_objects", n, 0, 0)) return nullptr;
    return static_cast<PyGatherCollector*>(target)->collect_result_objects().release().ptr();
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
py::object fast_collect_start(py::object endpoint) {
    return make<PyGatherCollector>(std::move(endpoint), "collect_start", collect_start_entry);
}
py::object fast_collect_is(py::object endpoint) {
    return make<PyGatherCollector>(std::move(endpoint), "collect_is", collect_is_entry);
}
py::object fast_collect_result_objects(py::object endpoint) {
    return make<PyGatherCollector>(std::move(endpoint), "collect_result_objects", collect_result_objects_entry);
}

}  // namespace ringcast::python::detail
