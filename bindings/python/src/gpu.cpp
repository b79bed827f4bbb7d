// ringcast._gpucore — the C++ half of the Python GPU path (the package side is ringcast/_gpu.py). A
// module of its own, built only when the GPU interop is (cmake/gpu.cmake): `import ringcast` never
// loads a GPU runtime; _gpu.py imports this module the first time a device array is sent or received.
//
// It exposes the library's primitives, not a second copy of them: the registration of the mapping that
// holds a raw chunk (HostRegistration, once per queue), and one copy into / out of a raw chunk that
// returns only after the copy's completion event (CopyCompletion) — so MessageQueue commits a chunk
// only after its bytes landed and releases one only after the device read it. The GIL is released
// while a copy is waited for.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ringcast/gpu/capabilities.hpp"
#include "ringcast/gpu/copy.hpp"
#include "ringcast/gpu/registration.hpp"

namespace py = pybind11;
using namespace ringcast;
using namespace ringcast::gpu;

namespace {

const Runtime& runtime_named(const std::string& backend) {
    if (backend == "cuda") return cuda();
    if (backend == "hip") return hip();
    throw py::value_error("backend must be 'cuda' or 'hip', got '" + backend + "'");
}

void* as_pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

// The mapping of one queue endpoint, registered in this process, and the event its copies complete on.
// keepalive: the endpoint object (ringcast._core.Writer/Reader) that owns the mapping — held so the
// mapping cannot be unmapped while registered (the registration goes first, in this destructor).
class Registration {
public:
    Registration(std::uintptr_t address_in_mapping, int device, py::object keepalive, const std::string& backend)
        : keepalive_(std::move(keepalive)) {
        const Runtime& rt = runtime_named(backend);
        registration_.emplace(HostRegistration::of_mapping_containing(rt, as_pointer(address_in_mapping), device));
        copy_.emplace(rt);
    }
    ~Registration() { close(); }
    void close() {
        if (copy_) {
            py::gil_scoped_release nogil;
            copy_.reset();  // waits for a copy still in flight
            registration_.reset();
        }
        keepalive_ = py::none();
    }
    [[nodiscard]] bool contains(std::uintptr_t p, std::size_t n) const {
        return registration_ && registration_->contains(as_pointer(p), n);
    }
    // device -> raw chunk (writer) or raw chunk -> device (reader); returns once the copy completed.
    void copy(std::uintptr_t dst, std::uintptr_t src, std::size_t n, bool to_ring, std::uintptr_t stream) {
        if (!copy_) throw py::value_error("the registration was closed");
        const std::uintptr_t ring = to_ring ? dst : src;
        if (!registration_->contains(as_pointer(ring), n))
            throw py::value_error("the ring side of the copy lies outside the registered mapping");
        const Runtime& rt = registration_->runtime();
        bool is_device = false;
        check(rt, rt.pointer_is_device(as_pointer(to_ring ? src : dst), &is_device), "PointerGetAttributes");
        if (!is_device)
            throw DeviceError(Reason::runtime, 0, std::string(rt.name) + ": the device side of the copy is not device memory",
                              ErrorCode::invalid_argument);
        py::gil_scoped_release nogil;
        copy_->start(as_pointer(dst), as_pointer(src), n, to_ring ? CopyKind::device_to_host : CopyKind::host_to_device,
                     as_pointer(stream));
        copy_->wait();
    }
    [[nodiscard]] std::uintptr_t base() const { return reinterpret_cast<std::uintptr_t>(registration_->base()); }
    [[nodiscard]] std::size_t size() const { return registration_->size(); }
    [[nodiscard]] bool mapped() const { return registration_->mapped(); }

private:
    py::object keepalive_;
    std::optional<HostRegistration> registration_;
    std::optional<CopyCompletion> copy_;
};

}  // namespace

PYBIND11_MODULE(_gpucore, m) {
    m.doc() = "ringcast GPU interop primitives (use ringcast's MessageQueue; ringcast/_gpu.py drives these).";
    // Leaked on purpose: a static py::object would be destroyed after the interpreter finalized.
    static auto* device_error = new py::exception<DeviceError>(m, "DeviceError", PyExc_RuntimeError);
    // Local: a global translator would also catch ringcast::Error thrown by ringcast._core (pybind11
    // shares translators between modules) and change its exception types.
    py::register_local_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const DeviceError& e) {
            PyErr_SetString(device_error->ptr(), (std::string(e.what()) + " [" + to_string(e.reason()) + "]").c_str());
        } catch (const Error& e) {
            PyErr_SetString(e.code() == ErrorCode::invalid_argument ? PyExc_ValueError : PyExc_RuntimeError, e.what());
        }
    });
    m.def("built", [](const std::string& backend) { return backend == "cuda" ? cuda_built() : hip_built(); },
          py::arg("backend") = "cuda", "Whether this build has the backend ('cuda' or 'hip').");
    m.def(
        "probe",
        [](int device, const std::string& backend) {
            const Capabilities c = probe(runtime_named(backend), device);
            return py::dict(py::arg("usable") = c.usable, py::arg("reason") = c.usable ? "" : to_string(c.why_not),
                            py::arg("why_not") = c.why_not_text, py::arg("device_count") = c.device_count,
                            py::arg("device_name") = c.device_name, py::arg("driver_version") = c.driver_version,
                            py::arg("runtime_version") = c.runtime_version,
                            py::arg("can_map_host_memory") = c.can_map_host_memory, py::arg("summary") = c.summary());
        },
        py::arg("device") = 0, py::arg("backend") = "cuda",
        "probe(device=0, backend='cuda'): the capabilities as a dict; never raises for a missing driver or device\n"
        "(usable=False, reason='no driver' / 'no device', why_not names the runtime error).");
    m.def(
        "buffer_address",
        [](const py::buffer& b) {
            const py::buffer_info info = b.request();
            return reinterpret_cast<std::uintptr_t>(info.ptr);
        },
        "buffer_address(buffer): the address of a contiguous buffer (a raw chunk's memoryview).");
    py::class_<Registration>(m, "Registration",
                             "The registered mapping of one queue endpoint in this process, and its copies.")
        .def(py::init<std::uintptr_t, int, py::object, const std::string&>(), py::arg("address"), py::arg("device"),
             py::arg("keepalive"), py::arg("backend") = "cuda",
             "Registers the whole mapping that contains `address` (Portable; Mapped where supported). Raises\n"
             "DeviceError naming the cause: no driver, no device, registration unsupported.")
        .def("copy", &Registration::copy, py::arg("dst"), py::arg("src"), py::arg("n"), py::arg("to_ring"),
             py::arg("stream"),
             "Copies n bytes device -> ring (to_ring) or ring -> device on `stream` (a cudaStream_t as int) and\n"
             "returns once the copy's completion event fired (GIL released meanwhile).")
        .def("contains", &Registration::contains, py::arg("address"), py::arg("n"))
        .def("close", &Registration::close, "Unregisters (waits for a copy in flight). Idempotent.")
        .def_property_readonly("base", &Registration::base)
        .def_property_readonly("size", &Registration::size)
        .def_property_readonly("mapped", &Registration::mapped);
}
