// Pickling inside the binding: the one-call paths of a step (Writer.send_object, Reader.recv_object,
// GatherWorker.reply_object, GatherCollector.collect_objects) pickle and unpickle here, so enqueue,
// dequeue, reply and collect each cross from Python into C++ once per message and build no
// intermediate Python objects (no parts list, no closure, no list of received parts).
//
// The rules are those of ringcast/_pickling.py's dumps_out_of_band (one protocol, two implementations:
// the Python one serves custom picklers — the vLLM plug-in's, the GPU path's — this one the default):
//  * protocol 5; contiguous buffers of at least `threshold` bytes, at most `max_buffers` of them,
//    leave the pickle (out of band) and are copied from the object straight into the ring; a whole
//    `bytes` object travels as itself (the reader rebuilds a bytes, not a bytearray);
//  * a bytes/bytearray/memoryview of at least `threshold` bytes passed as the message itself is
//    wrapped in a PickleBuffer first (the C pickler writes those in-band before any hook runs).
// All functions need the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>

namespace py = pybind11;

namespace ringcast::python::detail {

// Looks up pickle.dumps / pickle.loads / pickle.PickleBuffer once (module import).
void init_pickling();
// Benchmarks only (the showdown's --trace): the dumps and loads called from here instead of pickle's,
// same signatures (a timing wrapper around them).
void set_pickle_functions(py::object dumps, py::object loads);

// What a protocol-5 pickle of one object is on the wire: the pickle, then its out-of-band buffers.
struct Pickled {
    py::bytes data;
    py::list out_of_band;  // empty in the common case (no large contiguous buffer in the object)
};

// pickle.dumps(obj, 5, buffer_callback=<the rule above>). Raises what pickle raises.
[[nodiscard]] Pickled dumps_out_of_band(py::handle obj, std::size_t threshold, std::size_t max_buffers);

// The same with a pickler of the caller's: `factory(file, protocol=5, buffer_callback=...)` makes a
// pickle.Pickler (a subclass with hooks: the GPU path's device pickler finds device arrays through
// reducer_override) whose file is a collector of this file (no BytesIO). `reuse`, if not None, is
// one such pickler made earlier by the same factory and now idle: its dump() is called instead of
// making one (making a Python subclass's pickler costs about as much as a small message's pickling).
// The memo is cleared after every dump (no reference to the object is kept; a later dump cannot
// refer to this one's objects). Returns the pickler too: its hooks' findings are its attributes.
// Raises what the factory and the pickling raise; if anything fails from the dump on, the pickler's
// abandon() (if it has one) is called first, to give back what its hooks took.
struct PickledWith {
    Pickled pickled;
    py::object pickler;
};
[[nodiscard]] PickledWith dumps_with_pickler(py::object reuse, py::handle factory, py::handle obj,
                                             std::size_t threshold, std::size_t max_buffers);

// pickler.abandon() if it has one (the GPU path's gives back what describing device arrays took);
// an error it raises is dropped. For a caller that fails after dumps_with_pickler returned.
void abandon_pickler(py::handle pickler) noexcept;

// pickle.dumps(obj, 5): in-band only (replies: small by design, one part).
[[nodiscard]] py::bytes dumps_in_band(py::handle obj);

// pickle.loads(data) of a bytes-like object.
[[nodiscard]] py::object loads(py::handle data);

}  // namespace ringcast::python::detail
