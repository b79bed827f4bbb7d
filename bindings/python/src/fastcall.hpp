// The calls of a step without pybind11's dispatcher: Writer.send_object, Reader.recv_object,
// GatherWorker.reply_object and GatherCollector.collect_objects (and collect_async's collect_start,
// collect_is, collect_result_objects), each as a callable object that CPython calls through vectorcall
// straight into the C++ method.
//
// Why: pybind11's dispatcher (overload records, argument vectors, type-caster lookups, its keep-alive
// frame) touches far more code and data per call than a C function. Warm, it costs ~0.1-0.3 us; after
// the caller has run other code for a while — a worker's reply after its step's work, the executor's
// enqueue after its scheduling — its lines are no longer cached: on the 2-core VM a no-op pybind11
// call took ~0.9 us there against ~0.2 us for a plain CPython C function, and a worker's reply after
// 1 ms of work entered its C++ method 0.81-1.33 us after the Python call, 0.48-0.66 us through this
// path (bench_step_split.py, 3 alternated rounds). These calls sit on a step's critical path;
// everything else keeps pybind11.
//
// Contract: the callable is made once per endpoint (`Writer.fast_send_object()` and so on), keeps
// the pybind11 object alive (and is seen by the garbage collector: an endpoint subclass holding its
// entry is freed), and takes positional arguments only; a bad argument is refused with
// TypeError("<method>(): incompatible function arguments. ..."), the text pybind11 gives (the Python
// layer names the bad argument from it: _args.raise_in_callers_terms). A tag or rank must be an
// integer (__index__), where pybind11 took any number and truncated it. Exceptions become the Python
// exceptions pybind11's translators would raise (raise_current_exception()).
// Thread-safety: as the methods' own (one thread per endpoint, checked inside them).
#pragma once

#include <pybind11/pybind11.h>

namespace py = pybind11;

namespace ringcast::python::detail {

// Readies the callables' type (module import).
void register_fast_calls();

// The endpoint's method as a callable: `endpoint` is the pybind11 object of that class.
[[nodiscard]] py::object fast_send_object(py::object endpoint);     // (obj, timeout=None)
[[nodiscard]] py::object fast_recv_object(py::object endpoint);     // (timeout=None)
[[nodiscard]] py::object fast_reply_object(py::object endpoint);    // (tag, obj, timeout=None)
[[nodiscard]] py::object fast_collect_objects(py::object endpoint); // (tag, ranks, timeout=None)
// collect_async's: collect_start (tag, ranks, timeout=None, unpickle=False), collect_is (id) and
// collect_result_objects () — the async step's tail, after the executor's preparation.
[[nodiscard]] py::object fast_collect_start(py::object endpoint);
[[nodiscard]] py::object fast_collect_is(py::object endpoint);
[[nodiscard]] py::object fast_collect_result_objects(py::object endpoint);

}  // namespace ringcast::python::detail
