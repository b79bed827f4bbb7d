// ringcast._core — the C++ half of the Python binding (the package `ringcast` sits on top). This file
// only registers; the code lives by concern:
//   errors.{hpp,cpp}    exception types and the translation of core Errors
//   gil.{hpp,cpp}       the GIL rules, Gil holder, GIL probe, signal checks, Endpoint and its sliced wait
//   args.{hpp,cpp}      timeouts, wait options, liveness intervals, exported buffers
//   framing.{hpp,cpp}   the binding's wire format: writer-side copy out, reader-side reassembly
//   pickling.{hpp,cpp}  pickle.dumps/loads called from C++: the one-call paths (send_object, ...)
//   stamps.{hpp,cpp}    benchmarks only: clock stamps at fixed points of the one-call paths
//   queue.hpp, queue_writer.cpp, queue_reader.cpp   Writer / Reader
//   gather.{hpp,cpp}    GatherCollector (collect, collect_async) / GatherWorker
//   fastcall.{hpp,cpp}  the four calls of a step entered without pybind11's dispatcher
//   events.cpp          eventfd arming of the endpoints for event loops (ringcast.aio)
//   remote.cpp          remote readers, publisher and reply bridge over ZeroMQ (built with ZeroMQ only)
//   gpu.cpp             the separate module ringcast._gpucore (CUDA/HIP), never loaded by `import ringcast`
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <string>

#include "errors.hpp"
#include "fastcall.hpp"
#include "framing.hpp"
#include "gather.hpp"
#include "gil.hpp"
#include "pickling.hpp"
#include "stamps.hpp"
#include "queue.hpp"
#include "ringcast/ring.hpp"

namespace py = pybind11;
namespace ringcast::python { void register_remote(py::module_& m); }  // remote.cpp
namespace ringcast::python { void register_events(py::module_& m); }  // events.cpp

PYBIND11_MODULE(_core, m) {
    using namespace ringcast;
    using namespace ringcast::python;
    using namespace ringcast::python::detail;
    m.doc() =
        "ringcast C++ core binding: the endpoints under the `ringcast` package (use that package).\n\n"
        "Writer/Reader are the two ends of MessageQueue, GatherCollector/GatherWorker those of ReplyGather.\n"
        "Every blocking method takes timeout in seconds (None: forever, 0: poll; negative: ValueError) and\n"
        "never holds the GIL while blocked. liveness_s is the dead-peer check interval: PeerDeadError within\n"
        "two intervals. Errors: TimeoutError, ClosedError, PeerDeadError, StaleReplyError, SegmentError (a\n"
        "segment or data not as ringcast wrote it: foreign, another version, corrupt; also a ValueError),\n"
        "ValueError (bad argument), PermissionError (another user's segment), RuntimeError (one thread per\n"
        "endpoint).\n\n"
        "Constants: MAX_PARTS (parts per message), ABI_VERSION (handles of another one are refused),\n"
        "MIN_CAPACITY (smallest ring, bytes), MAX_READERS (reader ranks per ring), MAIN_THREAD_SLICE_S\n"
        "(main-thread slice of a sleeping wait: how often an idle one wakes), NO_GIL_COPY_BYTES (copies this large drop the GIL),\n"
        "COLLECT_SPIN_MAX_US (a gather collect's default cap on its adaptive spin), SPIN_MAX_US (a C++ reader's\n"
        "and writer's).";

    register_exceptions(m);
    register_remote(m);  // remote.cpp: ZeroMQ remote readers / replies (HAVE_REMOTE = False without ZeroMQ)
    register_events(m);  // events.cpp: wake_fd / arm / disarm for event loops (ringcast.aio)
    register_stamps(m);  // stamps.cpp: _stamps_enable / _stamps_take (benchmarks)
    register_fast_calls();  // fastcall.cpp: the type of the fast_* methods' callables

    init_pickling();
    g_main_thread_ident = py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

    m.attr("MAX_PARTS") = kMaxParts;
    m.attr("ABI_VERSION") = layout::kAbiVersion;
    m.attr("MIN_CAPACITY") = layout::kMinCapacity;
    m.attr("COLLECT_SPIN_MAX_US") = static_cast<double>(kCollectSpinMax.count()) / 1e3;  // gather.hpp says why
    m.attr("SPIN_MAX_US") = static_cast<double>(WaitOptions{}.spin_max.count()) / 1e3;  // C++ readers' and writers'
    m.attr("MAX_READERS") = layout::kMaxReaders;
    m.attr("MAIN_THREAD_SLICE_S") = std::chrono::duration<double>(kMainThreadSlice).count();
    m.attr("NO_GIL_COPY_BYTES") = kNoGilCopy;

    m.def(
        "max_record_payload", [](std::uint64_t capacity) { return layout::max_record_payload(capacity); },
        "max_record_payload(capacity): the largest record a ring of `capacity` bytes holds (capacity/4 - 16).");
    m.def(
        "remove_segment", [](const std::string& name) { return Segment::remove(name); },
        "remove_segment(name): removes the /dev/shm segment `name`; returns whether it existed.\n"
        "Raises ValueError for a bad name, PermissionError for another user's segment.");
    m.def(
        "sweep_abandoned",
        [](const std::string& prefix, bool dry_run) {
            std::vector<AbandonedObject> swept;
            {
                py::gil_scoped_release unlocked;  // a directory walk and a few opens: let others run
                swept = ringcast::sweep_abandoned(prefix, dry_run);
            }
            py::list out;
            for (const auto& o : swept) out.append(py::make_tuple(o.name, o.bytes));
            return out;
        },
        py::arg("prefix") = "", py::arg("dry_run") = false,
        "sweep_abandoned(prefix='', dry_run=False): removes this user's ringcast segments (names starting\n"
        "with prefix) whose creator, writer and readers are all dead, and gather doorbells whose group has\n"
        "no reply ring left (what `ringcast gc` does); returns [(name, bytes)] of what it removed (dry_run:\n"
        "would remove). Never touches other users' or foreign objects. Raises OSError if /dev/shm cannot be\n"
        "listed.");
    m.def(
        "sweep_abandoned_explained",
        [](const std::string& prefix, bool dry_run) {
            std::vector<AbandonedObject> swept;
            std::vector<KeptObject> kept;
            {
                py::gil_scoped_release unlocked;
                swept = ringcast::sweep_abandoned(prefix, dry_run, &kept);
            }
            py::list removed, left;
            for (const auto& o : swept) removed.append(py::make_tuple(o.name, o.bytes));
            for (const auto& k : kept) left.append(py::make_tuple(k.name, k.why));
            return py::make_tuple(removed, left);
        },
        py::arg("prefix") = "", py::arg("dry_run") = false,
        "sweep_abandoned_explained(prefix='', dry_run=False): sweep_abandoned, and what it left: returns\n"
        "([(name, bytes)] removed, [(name, why)] kept) — every object under the prefix that looks like\n"
        "ringcast's and stayed (another user's, not judgeable, in use, a bell of a group with a ring).");
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
        "segment_info(name): the header fields of segment `name` as a dict (readers, capacity,\n"
        "creation_time_ns, creator_pid, writer_pid, closed). Raises ValueError if it does not exist,\n"
        "SegmentError (a ValueError) if it is not a ringcast segment this library can read (foreign,\n"
        "another version, a corrupt header), PermissionError if it belongs to another user or was made in\n"
        "another PID namespace (its pids cannot be judged from here).");
    m.def(
        "gil_probe", [] { return py::make_tuple(g_sleeps.load(), g_sleeps_holding_gil.load()); },
        "(kernel waits entered, of which with the GIL held) since the last reset: the second must stay 0.");
    m.def(
        "gil_probe_reset",
        [] {
            g_sleeps = 0;
            g_sleeps_holding_gil = 0;
        },
        "Resets both counters of gil_probe() to 0.");
    m.def("_set_pickle_functions", &set_pickle_functions, py::arg("dumps"), py::arg("loads"),
          "BENCHMARKS ONLY: the pickle.dumps / pickle.loads stand-ins the one-call paths (send_object,\n"
          "recv_object, reply_object, collect_objects) call, e.g. timed wrappers (the showdown's --trace).");
    m.def(
        "_set_release_gil", [](bool on) { g_release_gil = on; },
        "TEST ONLY: False keeps the GIL while blocked (the negative control of the GIL probe)");

    py::class_<PyWriter>(m, "Writer",
                         "The sending end of a queue (MessageQueue's writer): creates the /dev/shm segment.\n"
                         "One thread at a time (RuntimeError otherwise); shutdown() from any thread.")
        .def(py::init<const std::string&, std::uint32_t, std::uint64_t, std::uint32_t, const std::string&, double, double, double>(),
             py::arg("name"), py::arg("readers"), py::arg("capacity"), py::arg("mode") = 0600,
             py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 2000.0, py::arg("liveness_s") = 1.0,
             "Creates segment `name` for `readers` reader ranks and a ring of `capacity` bytes (a power of two,\n"
             ">= MIN_CAPACITY). wait: 'hybrid', 'futex', 'spin' or 'spin_yield'; spin_us/spin_max_us: the hybrid\n"
             "spin; liveness_s: seconds between dead-reader checks while blocked. Raises ValueError (bad\n"
             "argument, name in use), PermissionError, MemoryError (/dev/shm full), OSError.")
        .def("send", &PyWriter::send, py::arg("parts"), py::arg("timeout") = py::none(),
             "Sends one message made of `parts` (buffer objects, 1..max_parts), each copied straight into the\n"
             "ring; a send interrupted half way is withdrawn. Raises TimeoutError (the slowest reader held the\n"
             "ring), ClosedError, PeerDeadError (a dead reader: rank and pid), ValueError, RuntimeError.")
        .def("send_object", &PyWriter::send_object, py::arg("obj"), py::arg("timeout") = py::none(),
             "enqueue in one call: pickles `obj` (protocol 5; buffers of at least the out-of-band threshold\n"
             "travel as parts of their own) and sends it as send() would; returns None. While a GPU array\n"
             "library is loaded, the device pickler (set_device_pickler) pickles it: if it found device arrays,\n"
             "nothing is sent and the call returns (pickle, out-of-band buffers, pickler) for the GPU path.\n"
             "Raises as send(), and what pickle raises (nothing is sent).")
        .def("fast_send_object", &fast_send_object,
             "send_object as a FastEntry: callable(obj, timeout=None), positional, without pybind11's dispatcher\n"
             "(what MessageQueue.enqueue calls).")
        .def("set_device_pickler", &PyWriter::set_device_pickler, py::arg("factory"), py::arg("libraries"),
             "The pickler send_object uses while a module of `libraries` is loaded: factory(file, protocol=5,\n"
             "buffer_callback=...) -> a pickle.Pickler whose `arrays` lists the device arrays its dump found\n"
             "(and whose abandon(), if any, runs when the dump raises); two buffers fewer out of band than\n"
             "set_out_of_band's. None: off.")
        .def("set_wake_ahead", &PyWriter::set_wake_ahead, py::arg("on"),
             "Whether send_object and wake_ahead() wake sleeping readers before a message is pickled\n"
             "(MessageQueue's wake_ahead). Only with the adaptive hybrid wait: on by default there, never\n"
             "elsewhere.")
        .def_property_readonly("wake_ahead_enabled", &PyWriter::wake_ahead_enabled,
             "Whether wake-ahead is on (set_wake_ahead and the wait).")
        .def("wake_ahead", &PyWriter::wake_ahead,
             "Wakes the readers asleep now, ahead of a message about to be made and sent: they spin for it\n"
             "(about twice as long as recent wake-aheads preceded their message), then sleep again. True if\n"
             "a wake system call was made; False without sleepers, with wake-ahead off, after shutdown, in\n"
             "a forked child.")
        .def("set_out_of_band", &PyWriter::set_out_of_band, py::arg("threshold"), py::arg("max_buffers"),
             "The out-of-band rule of send_object: contiguous buffers of >= threshold bytes, at most max_buffers\n"
             "of them, leave the pickle (defaults 4096 and 0: none).")
        .def("reserve_raw", &PyWriter::reserve_raw, py::arg("size"), py::arg("timeout") = py::none(),
             "acquire_write: a writable memoryview of `size` bytes in the ring, published by commit_raw().\n"
             "Raises TimeoutError, ClosedError, PeerDeadError, ValueError (size > max_reserve), RuntimeError.")
        .def("commit_raw", &PyWriter::commit_raw, py::arg("used") = py::none(), py::arg("publish") = true,
             "Publishes the reserve_raw() reservation (its first `used` bytes; all by default), or drops it\n"
             "with publish=False. Raises RingcastError without a reservation, ValueError if used > size.")
        .def("wait_readers", &PyWriter::wait_readers, py::arg("timeout") = py::none(),
             "Waits (GIL released) until every reader rank has attached once. Raises TimeoutError naming the\n"
             "ranks that never attached, ClosedError.")
        .def("missing_readers", &PyWriter::missing_readers, "The reader ranks (local indices) never attached.")
        .def("shutdown", &PyWriter::shutdown,
             "Closes the queue (readers drain, then get ClosedError), wakes a call blocked in another thread\n"
             "with ClosedError and removes the name. Idempotent; any thread.")
        .def_property_readonly("name", &PyWriter::name, "The segment's /dev/shm name.")
        .def_property_readonly("capacity", &PyWriter::capacity, "The ring's size in bytes.")
        .def_property_readonly("max_reserve", &PyWriter::max_reserve, "The largest record (capacity/4 - 16 bytes).")
        .def_property_readonly("max_parts", &PyWriter::max_parts, "The most parts one send() takes.")
        .def("set_reader_ranks", &PyWriter::set_reader_ranks, py::arg("ranks"),
             "The global rank of each local reader (MessageQueue's local_reader_ranks): a dead reader's\n"
             "PeerDeadError names it beside its index.")
        .def("set_remote_publisher_index", &PyWriter::set_remote_publisher_index, py::arg("index"),
             "The ring rank of the publisher to remote readers (a timed-out enqueue names it as such).")
        .def_property_readonly("reader_count", &PyWriter::reader_count, "Reader ranks of the segment.")
        .def_property_readonly("creation_time_ns", &PyWriter::creation_time_ns,
                               "When the segment was created (tells a stale handle from a re-created name).")
        .def_property_readonly("closed", &PyWriter::closed, "True after shutdown().")
        .def_property_readonly("wake_calls", [](PyWriter& w) { return w.core().wake_calls(); },
                               "futex_wake syscalls this queue's writer made (diagnostics: 0 while no reader sleeps).");

    py::class_<PyReader>(m, "Reader",
                         "The receiving end of a queue (a MessageQueue reader): attaches one reader rank.\n"
                         "A Reader that is destroyed releases its rank: the writer never waits for it again.\n"
                         "One thread at a time (RuntimeError otherwise); shutdown() from any thread.")
        .def(py::init<const std::string&, std::uint32_t, const std::string&, double, double, double>(), py::arg("name"),
             py::arg("rank"), py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 2000.0, py::arg("liveness_s") = 1.0,
             "Attaches reader rank `rank` (a local index) of segment `name`. liveness_s: seconds between\n"
             "checks that the writer lives while blocked. Raises ValueError (no such segment, rank out of\n"
             "range, already attached by a live process or released), SegmentError (not a ringcast segment\n"
             "this library can use), PermissionError.")
        .def("recv", &PyReader::recv, py::arg("timeout") = py::none(),
             "The parts of the next message (bytes/bytearray). Raises TimeoutError, ClosedError (the writer\n"
             "shut down and all was read, or this reader was shut down), PeerDeadError (the writer died),\n"
             "RingcastError (the next message is an acquire_write chunk), SegmentError (corrupt data), RuntimeError.")
        .def("recv_object", &PyReader::recv_object, py::arg("timeout") = py::none(),
             "dequeue in one call: the next message, unpickled once it is out of the ring (one copy);\n"
             "a message with out-of-band parts comes back as a MultipartMessage (its .parts as recv() returns\n"
             "them). Raises as recv(), and what pickle.loads raises (the message is consumed either way).")
        .def("fast_recv_object", &fast_recv_object,
             "recv_object as a FastEntry: callable(timeout=None), positional, without pybind11's dispatcher\n"
             "(what MessageQueue.dequeue calls).")
        .def("recv_many", &PyReader::recv_many, py::arg("into"), py::arg("max_n"), py::arg("timeout") = py::none(),
             "Up to max_n messages: waits for the first as recv() does, then takes whatever else is complete\n"
             "and ready, in the same call; each is appended to the list `into` as (False, parts) as it is taken,\n"
             "so an exception after it (a KeyboardInterrupt) finds it there. Returns how many were appended.\n"
             "Raises as recv(); ValueError if max_n is 0.")
        .def("peek_raw", &PyReader::peek_raw, py::arg("timeout") = py::none(),
             "acquire_read: a read-only memoryview of the next acquire_write chunk, released by release_raw().\n"
             "Raises TimeoutError, ClosedError, PeerDeadError, RingcastError (the next message came from send()).")
        .def("release_raw", &PyReader::release_raw,
             "Consumes the chunk peek_raw() returned. Raises RingcastError without one.")
        .def("check_open", &PyReader::check_open, py::arg("what"),
             "Raises ClosedError once this reader was shut down (RingcastError in a forked child), naming `what`.")
        .def("check_writer_alive", &PyReader::check_writer_alive,
             "Raises PeerDeadError if the writer process is gone (ClosedError after shutdown()).")
        .def("shutdown", &PyReader::shutdown,
             "Wakes a call blocked in another thread (it raises ClosedError); later calls raise ClosedError.\n"
             "The rank is released now (or, while a call of another thread is in progress, as it leaves; an\n"
             "acquire_read chunk keeps it until release_raw). Idempotent; any thread.")
        .def_property_readonly("rank", &PyReader::rank, "This reader's rank (local index).")
        .def_property_readonly("holds_raw_chunk", &PyReader::holds_raw_chunk,
                               "True while a peek_raw() chunk is not released (False in a forked child).")
        .def_property_readonly("name", &PyReader::name, "The segment's /dev/shm name.")
        .def_property_readonly("capacity", &PyReader::capacity, "The ring's size in bytes.")
        .def_property_readonly("creation_time_ns", &PyReader::creation_time_ns, "When the segment was created.")
        .def_property_readonly("waits", &PyReader::waits, "How many times this reader slept in the kernel.")
        .def_property_readonly("spin_max_us", &PyReader::spin_max_us,
                               "The cap on this reader's adaptive spin in µs, as its wait options got it.");

    py::class_<MultipartMessage>(m, "MultipartMessage",
                                 "What Reader.recv_object returns for a message with out-of-band parts.")
        .def(py::init([](py::list parts) { return MultipartMessage{std::move(parts)}; }), py::arg("parts"),
             "Wraps a message's parts (recv_object makes these; Python code has no need to).")
        .def_readonly("parts", &MultipartMessage::parts, "The message's parts, as Reader.recv returns them.");

    py::class_<PyGatherCollector>(m, "GatherCollector",
                                  "The executor side of a ReplyGather: creates one reply ring per worker rank and\n"
                                  "the doorbell, and collects replies with one wait for all ranks.")
        .def(py::init<const std::string&, std::uint32_t, std::uint64_t, std::uint32_t, const std::string&,
                      const std::string&, double, double, double>(),
             py::arg("name"), py::arg("ranks"), py::arg("capacity"), py::arg("mode") = 0600,
             py::arg("method") = "doorbell", py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0,
             py::arg("spin_max_us") = static_cast<double>(kCollectSpinMax.count()) / 1e3,
             py::arg("liveness_s") = 1.0,
             "Creates `ranks` reply rings of `capacity` bytes named `<name>.r<rank>` and `<name>.bell`.\n"
             "method: 'doorbell' or 'futex_waitv' (<= 128 ranks). Raises ValueError, PermissionError, OSError.")
        .def("collect", &PyGatherCollector::collect, py::arg("tag"), py::arg("ranks").none(true), py::arg("timeout") = py::none(),
             "The replies (bytes) tagged `tag` from `ranks` (None: all; []: none), in that order; one wait (GIL released)\n"
             "for the whole set. Raises TimeoutError naming the missing ranks, StaleReplyError (another tag;\n"
             "the good replies taken are kept for the next collect of `tag`), PeerDeadError (a dead worker:\n"
             "rank and pid), ClosedError (a worker closed, or shut down), RuntimeError (a collect is pending).")
        .def("collect_objects", &PyGatherCollector::collect_objects, py::arg("tag"), py::arg("ranks").none(true),
             py::arg("timeout") = py::none(),
             "collect in one call: the replies unpickled; one that comes while others are still awaited is\n"
             "unpickled during the wait. Raises as collect(), and what pickle.loads raises (the first failure in\n"
             "the order of `ranks`, once every reply is in); code run by that unpickling must not use this\n"
             "collector (RuntimeError).")
        .def("fast_collect_objects", &fast_collect_objects,
             "collect_objects as a FastEntry: callable(tag, ranks, timeout=None), positional, without pybind11's\n"
             "dispatcher (what ReplyGather.collect calls).")
        .def("collect_start", &PyGatherCollector::collect_start, py::arg("tag"), py::arg("ranks").none(true),
             py::arg("timeout") = py::none(), py::arg("unpickle") = false,
             "collect_async: starts collect(tag, ranks, timeout) and returns at once; the timeout runs from\n"
             "now. unpickle: the result will be collect_result_objects(): collect_done() polls unpickle the\n"
             "replies that came while others are awaited. Raises RuntimeError if one is pending, ValueError\n"
             "for a bad rank, ClosedError.")
        .def("fast_collect_start", &fast_collect_start,
             "collect_start as a FastEntry: callable(tag, ranks, timeout=None, unpickle=False), positional,\n"
             "without pybind11's dispatcher (what ReplyGather.collect_async calls).")
        .def("fast_collect_is", &fast_collect_is,
             "collect_is as a FastEntry: callable(id), positional (what PendingReplies calls).")
        .def("fast_collect_result_objects", &fast_collect_result_objects,
             "collect_result_objects as a FastEntry: callable(), without pybind11's dispatcher (what\n"
             "PendingReplies.result() calls).")
        .def("collect_done", &PyGatherCollector::collect_done,
             "True once collect_result() will not wait (all replies in, or the collect failed); never waits.")
        .def("collect_result", &PyGatherCollector::collect_result,
             "The started collect's replies, waiting (GIL released) for missing ones; raises what collect()\n"
             "would (TimeoutError, StaleReplyError, PeerDeadError, ClosedError), RuntimeError if none started.")
        .def("collect_result_objects", &PyGatherCollector::collect_result_objects,
             "collect_result(), the replies unpickled.")
        .def("collect_is", &PyGatherCollector::collect_is, py::arg("id"),
             "Whether collect `id` (collect_start's number) is the pending one.")
        .def_property_readonly("last_collect_id", &PyGatherCollector::last_collect_id,
                               "The id of the last collect_start (0: none yet).")
        .def("collect_abandon", &PyGatherCollector::collect_abandon, py::arg("id"),
             "Forgets the pending collect_async (its PendingReplies was dropped); the replies it took stay\n"
             "for the next collect of the tag.")
        .def("shutdown", &PyGatherCollector::shutdown,
             "Wakes a collect blocked in another thread (ClosedError); later calls raise ClosedError; the\n"
             "reply rings are given back (workers replying later never block).")
        .def(
            "never_attached",
            [](PyGatherCollector& c, const std::vector<std::uint32_t>& ranks) { return c.core().never_attached(ranks); },
            py::arg("ranks"),
            "The ranks of `ranks` (empty: all) whose worker never attached (no worker ever claimed the reply\n"
            "ring); one look each, no wait.")
        .def("remove_names", &PyGatherCollector::remove_names,
             "Removes the group's /dev/shm names now (the doorbell, then the reply rings), not when this\n"
             "object goes; what is mapped stays. ReplyGather.close() calls it after shutdown() and the reply\n"
             "bridge's stop.")
        .def_property_readonly("name", &PyGatherCollector::name, "The gather's base name.")
        .def_property_readonly("ranks", &PyGatherCollector::ranks, "The number of worker ranks.")
        .def_property_readonly("kernel_waits", &PyGatherCollector::kernel_waits,
                               "How many times collects slept in the kernel.");

    py::class_<PyGatherWorker>(m, "GatherWorker",
                               "A worker rank of a ReplyGather: the writer of that rank's reply ring.")
        .def(py::init<const std::string&, std::uint32_t, const std::string&, double, double, double>(), py::arg("name"),
             py::arg("rank"), py::arg("wait") = "hybrid", py::arg("spin_us") = 10.0, py::arg("spin_max_us") = 2000.0, py::arg("liveness_s") = 1.0,
             "Attaches worker `rank` of gather `name`. Raises ValueError (no such gather, rank out of range or\n"
             "in use), PermissionError.")
        .def("reply", &PyGatherWorker::reply, py::arg("tag"), py::arg("data"), py::arg("timeout") = py::none(),
             "Sends `data` (a buffer) as the reply to request `tag`; blocks (GIL released) only while the ring\n"
             "is full. Raises TimeoutError, ClosedError, PeerDeadError (the executor died), RuntimeError.")
        .def("reply_object", &PyGatherWorker::reply_object, py::arg("tag"), py::arg("obj"),
             py::arg("timeout") = py::none(),
             "reply in one call: pickles `obj` (protocol 5) and sends it as reply() would. Raises as reply(),\n"
             "and what pickle raises (nothing is sent).")
        .def("fast_reply_object", &fast_reply_object,
             "reply_object as a FastEntry: callable(tag, obj, timeout=None), positional, without pybind11's\n"
             "dispatcher (what ReplyGather.reply calls).")
        .def("close", &PyGatherWorker::close,
             "Closes this rank's reply ring: a collect waiting for it raises ClosedError naming the rank.")
        .def_property_readonly("rank", &PyGatherWorker::rank, "This worker's rank.")
        .def_property_readonly("spin_max_us", &PyGatherWorker::spin_max_us,
                               "The cap of this worker's adaptive spin (its waits for room in the reply ring), in us.");
}
