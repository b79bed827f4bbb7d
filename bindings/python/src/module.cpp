// ringcast._core — the C++ half of the Python binding (the package `ringcast` sits on top). This file
// only registers; the code lives by concern:
//   errors.{hpp,cpp}    exception types and the translation of core Errors
//   gil.{hpp,cpp}       the GIL rules, Gil holder, GIL probe, signal checks, Endpoint and its sliced wait
//   args.{hpp,cpp}      timeouts, wait options, liveness intervals, exported buffers
//   framing.{hpp,cpp}   the binding's wire format: writer-side copy out, reader-side reassembly
//   queue.hpp, queue_writer.cpp, queue_reader.cpp   Writer / Reader
//   gather.{hpp,cpp}    GatherCollector (collect, collect_async) / GatherWorker
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <string>

#include "errors.hpp"
#include "framing.hpp"
#include "gather.hpp"
#include "gil.hpp"
#include "queue.hpp"
#include "ringcast/ring.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
    using namespace ringcast;
    using namespace ringcast::python;
    using namespace ringcast::python::detail;
    m.doc() = "ringcast C++ core binding (use the `ringcast` package)";

    register_exceptions(m);

    g_main_thread_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

    m.attr("MAX_PARTS") = kMaxParts;
    m.attr("ABI_VERSION") = layout::kAbiVersion;
    m.attr("MIN_CAPACITY") = layout::kMinCapacity;
    m.attr("MAX_READERS") = layout::kMaxReaders;
    m.attr("MAIN_THREAD_SLICE_S") = std::chrono::duration<double>(kMainThreadSlice).count();
    m.attr("NO_GIL_COPY_BYTES") = kNoGilCopy;

    m.def("max_record_payload", [](std::uint64_t capacity) { return layout::max_record_payload(capacity); });
    m.def("remove_segment", [](const std::string& name) { return Segment::remove(name); });
    m.def(
        "segment_info",
        [](const std::string& name) {
            const Segment seg = Segment::open(name);
            const auto& h = seg.header();
            return py::dict(py::arg("readers") = h.reader_count, py::arg("capacity") = h.capacity,
                            py::arg("creation_time_ns") = h.creation_time_ns, py::arg("creator_pid") = h.creator_pid,
                            py::arg("writer_pid") = layout::unpack_owner(h.writer_owner.load()).pid,
                            py::arg("closed") = (h.flags.load() & layout::kFlagClosed) != 0);
        },
        "Header fields of a segment (raises ValueError if it does not exist or is not ringcast's)");
    m.def(
        "gil_probe", [] { return py::make_tuple(g_sleeps.load(), g_sleeps_holding_gil.load()); },
        "(kernel waits entered, of which with the GIL held) since the last reset");
    m.def("gil_probe_reset", [] {
        g_sleeps = 0;
        g_sleeps_holding_gil = 0;
    });
    m.def(
        "_set_release_gil", [](bool on) { g_release_gil = on; },
        "TEST ONLY: False keeps the GIL while blocked (the negative control of the GIL probe)");

    py::class_<PyWriter>(m, "Writer")
        .def(py::init<const std::string&, std::uint32_t, std::uint64_t, std::uint32_t, const std::string&, double, double, double>(),
             py::arg("name"), py::arg("readers"), py::arg("capacity"), py::arg("mode") = 0600,
             py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 0.0, py::arg("liveness_s") = 1.0)
        .def("send", &PyWriter::send, py::arg("parts"), py::arg("timeout") = py::none())
        .def("reserve_raw", &PyWriter::reserve_raw, py::arg("size"), py::arg("timeout") = py::none())
        .def("commit_raw", &PyWriter::commit_raw, py::arg("used") = py::none(), py::arg("publish") = true)
        .def("wait_readers", &PyWriter::wait_readers, py::arg("timeout") = py::none())
        .def("missing_readers", &PyWriter::missing_readers)
        .def("shutdown", &PyWriter::shutdown)
        .def_property_readonly("name", &PyWriter::name)
        .def_property_readonly("capacity", &PyWriter::capacity)
        .def_property_readonly("max_reserve", &PyWriter::max_reserve)
        .def_property_readonly("max_parts", &PyWriter::max_parts)
        .def_property_readonly("reader_count", &PyWriter::reader_count)
        .def_property_readonly("creation_time_ns", &PyWriter::creation_time_ns)
        .def_property_readonly("closed", &PyWriter::closed);

    py::class_<PyReader>(m, "Reader")
        .def(py::init<const std::string&, std::uint32_t, const std::string&, double, double, double>(), py::arg("name"),
             py::arg("rank"), py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 0.0, py::arg("liveness_s") = 1.0)
        .def("recv", &PyReader::recv, py::arg("timeout") = py::none())
        .def("recv_many", &PyReader::recv_many, py::arg("max_n"), py::arg("timeout") = py::none())
        .def("peek_raw", &PyReader::peek_raw, py::arg("timeout") = py::none())
        .def("release_raw", &PyReader::release_raw)
        .def("check_writer_alive", &PyReader::check_writer_alive)
        .def("shutdown", &PyReader::shutdown)
        .def_property_readonly("rank", &PyReader::rank)
        .def_property_readonly("name", &PyReader::name)
        .def_property_readonly("capacity", &PyReader::capacity)
        .def_property_readonly("creation_time_ns", &PyReader::creation_time_ns)
        .def_property_readonly("waits", &PyReader::waits);

    py::class_<PyGatherCollector>(m, "GatherCollector")
        .def(py::init<const std::string&, std::uint32_t, std::uint64_t, std::uint32_t, const std::string&,
                      const std::string&, double, double, double>(),
             py::arg("name"), py::arg("ranks"), py::arg("capacity"), py::arg("mode") = 0600,
             py::arg("method") = "doorbell", py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 0.0,
             py::arg("liveness_s") = 1.0)
        .def("collect", &PyGatherCollector::collect, py::arg("tag"), py::arg("ranks"), py::arg("timeout") = py::none())
        .def("collect_start", &PyGatherCollector::collect_start, py::arg("tag"), py::arg("ranks"),
             py::arg("timeout") = py::none())
        .def("collect_done", &PyGatherCollector::collect_done)
        .def("collect_result", &PyGatherCollector::collect_result)
        .def("shutdown", &PyGatherCollector::shutdown)
        .def_property_readonly("name", &PyGatherCollector::name)
        .def_property_readonly("ranks", &PyGatherCollector::ranks)
        .def_property_readonly("kernel_waits", &PyGatherCollector::kernel_waits);

    py::class_<PyGatherWorker>(m, "GatherWorker")
        .def(py::init<const std::string&, std::uint32_t, const std::string&, double, double, double>(), py::arg("name"),
             py::arg("rank"), py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 0.0, py::arg("liveness_s") = 1.0)
        .def("reply", &PyGatherWorker::reply, py::arg("tag"), py::arg("data"), py::arg("timeout") = py::none())
        .def("close", &PyGatherWorker::close)
        .def_property_readonly("rank", &PyGatherWorker::rank);
}
