#include "framing.hpp"

#include <algorithm>
#include <cstring>

namespace ringcast::python::detail {

// ---- writer side -----------------------------------------------------------------------------------
OutgoingMessage::OutgoingMessage(const py::sequence& parts, std::size_t nparts) {
    std::vector<bool> is_bytes;
    bufs_.reserve(nparts);
    for (auto item : parts) {
        bufs_.push_back(std::make_unique<PyBuf>(item));
        // A read-only part comes back as bytes, as pickle writes a read-only buffer in-band: a
        // memoryview of bytes (or of a read-only array) is then the same type below and above the
        // out-of-band threshold (a read-only memoryview over a bytearray above it before). Pickle's
        // out-of-band loader keeps a read-only bytes buffer as it is; what it rebuilds (a read-only
        // numpy array, say) is read-only either way.
        is_bytes.push_back(PyBytes_CheckExact(item.ptr()) != 0 || bufs_.back()->readonly());
    }

    // Stream header.
    header_.resize(8 + 8 * nparts);
    const std::uint32_t magic = kFrameMagic, n32 = static_cast<std::uint32_t>(nparts);
    std::memcpy(header_.data(), &magic, 4);
    std::memcpy(header_.data() + 4, &n32, 4);
    total_ = header_.size();
    for (std::size_t i = 0; i < nparts; ++i) {
        const std::uint64_t len = bufs_[i]->size();
        const std::uint64_t word = len | (is_bytes[i] ? kPartIsBytes : 0);
        std::memcpy(header_.data() + 8 + 8 * i, &word, 8);
        total_ += len;
    }
    // The sources, in stream order.
    src_.reserve(nparts + 1);
    src_.emplace_back(header_.data(), header_.size());
    for (auto& b : bufs_) src_.emplace_back(b->data(), b->size());
}

void OutgoingMessage::copy_next(Gil& gil, std::byte* dst, std::size_t n) {
    std::size_t doff = 0;
    while (doff < n) {
        const std::size_t k = std::min(n - doff, src_[si_].second - soff_);
        copy_bytes(gil, dst + doff, src_[si_].first + soff_, k);
        doff += k;
        soff_ += k;
        if (soff_ == src_[si_].second) {
            ++si_;
            soff_ = 0;
        }
    }
    // Skip empty parts so the cursor never points at an exhausted source.
    while (si_ < src_.size() && src_[si_].second == 0) ++si_;
}

// ---- reader side -----------------------------------------------------------------------------------
void Reassembly::corrupt(const std::string& why) const { throw Error(ErrorCode::corrupt, where_ + ": " + why); }

void Reassembly::drop() {
    objs_.clear();  // decrefs: callers hold the GIL
    dst_.clear();
    active_ = false;
}

std::vector<py::object> Reassembly::take() {
    active_ = false;
    dst_.clear();
    return std::move(objs_);
}

void Reassembly::scatter(Gil& gil, const std::byte* p, std::size_t n) {
    if (n > remaining_) corrupt("message longer than its header announced");
    remaining_ -= n;
    const std::size_t skip = static_cast<std::size_t>(std::min<std::uint64_t>(n, header_left_));
    header_left_ -= skip;
    p += skip;
    n -= skip;
    while (n > 0) {
        while (di_ < dst_.size() && doff_ == dst_[di_].second) {
            ++di_;
            doff_ = 0;
        }
        if (di_ == dst_.size()) corrupt("message bytes beyond its parts");
        const std::size_t k = std::min(n, dst_[di_].second - doff_);
        copy_bytes(gil, dst_[di_].first + doff_, p, k);
        doff_ += k;
        p += k;
        n -= k;
    }
}

void Reassembly::start(Gil& gil, const Message& m, Frame f) {
    const std::size_t n = m.bytes.size();
    std::uint32_t magic = 0, nparts = 0;
    if (n < 8) corrupt("record too short for a message header");
    std::memcpy(&magic, m.bytes.data(), 4);
    std::memcpy(&nparts, m.bytes.data() + 4, 4);
    if (magic != kFrameMagic) corrupt("bad message magic (not written by ringcast's Python writer)");
    if (nparts == 0 || nparts > kMaxParts || 8 + 8ull * nparts > n) corrupt("bad part count " + std::to_string(nparts));
    std::vector<std::uint64_t> lens(nparts);
    std::vector<bool> is_bytes(nparts);
    std::uint64_t total = 8 + 8ull * nparts;
    for (std::uint32_t i = 0; i < nparts; ++i) {
        std::memcpy(&lens[i], m.bytes.data() + 8 + 8 * i, 8);
        is_bytes[i] = (lens[i] & kPartIsBytes) != 0;
        lens[i] &= ~kPartIsBytes;
        if (lens[i] > kMaxMessage || total + lens[i] > kMaxMessage) corrupt("absurd part length");
        total += lens[i];
    }
    if (f == Frame::whole ? total != n : total <= n) corrupt("message length does not match its records");
    const bool had_gil = gil.held();
    gil.acquire();
    drop();
    objs_.reserve(nparts);
    dst_.reserve(nparts);
    for (std::uint32_t i = 0; i < nparts; ++i) {
        const auto len = static_cast<Py_ssize_t>(lens[i]);
        // Fresh objects nobody else references yet: filling them later without the GIL is safe.
        PyObject* o = is_bytes[i] ? PyBytes_FromStringAndSize(nullptr, len) : PyByteArray_FromStringAndSize(nullptr, len);
        if (o == nullptr) throw py::error_already_set();
        objs_.push_back(py::reinterpret_steal<py::object>(o));
        char* p = is_bytes[i] ? PyBytes_AS_STRING(o) : PyByteArray_AS_STRING(o);
        dst_.emplace_back(reinterpret_cast<std::byte*>(p), static_cast<std::size_t>(lens[i]));
    }
    // A whole (single-record) message keeps the GIL it now has: its copy is short or drops the GIL
    // itself, and the caller needs the GIL right after anyway (one hand-off per message, not two).
    if (!had_gil && f != Frame::whole) gil.release();
    active_ = true;
    seq_ = tag_seq(m.tag);
    di_ = 0;
    doff_ = 0;
    header_left_ = 8 + 8ull * nparts;
    remaining_ = total;
}

// ---- RawChunk --------------------------------------------------------------------------------------
namespace {

struct RawChunkObject {
    PyObject_HEAD
    void* data;
    Py_ssize_t size;
    int readonly;
    Py_ssize_t exports;  // buffers taken and not yet given back
    PyObject* owner;     // set once a view outlived its block: kept until exports drops to 0
};

int raw_chunk_getbuffer(PyObject* self, Py_buffer* view, int flags) {
    auto* c = reinterpret_cast<RawChunkObject*>(self);
    if (c->data == nullptr) {  // closed (RawChunk::forget): its bytes are the ring's again
        PyErr_SetString(PyExc_BufferError, "this acquire_write/acquire_read chunk ended with its with-block");
        return -1;
    }
    if (PyBuffer_FillInfo(view, self, c->data, c->size, c->readonly, flags) < 0) return -1;
    ++c->exports;
    return 0;
}

void raw_chunk_releasebuffer(PyObject* self, Py_buffer*) {
    auto* c = reinterpret_cast<RawChunkObject*>(self);
    if (--c->exports == 0 && c->owner != nullptr) {
        // The last view of a chunk that outlived its block: the mapping may go now. (`self` is still
        // referenced by the buffer being released, so the endpoint's going cannot free it under us.)
        PyObject* owner = c->owner;
        c->owner = nullptr;
        Py_DECREF(owner);
    }
}

void raw_chunk_dealloc(PyObject* self) {
    auto* c = reinterpret_cast<RawChunkObject*>(self);
    PyTypeObject* type = Py_TYPE(self);
    Py_CLEAR(c->owner);
    type->tp_free(self);
    Py_DECREF(type);
}

PyType_Slot raw_chunk_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(raw_chunk_getbuffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(raw_chunk_releasebuffer)},
    {Py_tp_dealloc, reinterpret_cast<void*>(raw_chunk_dealloc)},
    {Py_tp_doc, const_cast<char*>("The bytes of an acquire_write/acquire_read chunk; counts the views taken of them.")},
    {0, nullptr},
};

PyType_Spec raw_chunk_spec = {
    "ringcast._core._RawChunk", static_cast<int>(sizeof(RawChunkObject)), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, raw_chunk_slots,
};

PyTypeObject* raw_chunk_type() {
    static PyObject* type = nullptr;  // made once, under the GIL; lives as long as the process
    if (type == nullptr) {
        type = PyType_FromSpec(&raw_chunk_spec);
        if (type == nullptr) throw py::error_already_set();
    }
    return reinterpret_cast<PyTypeObject*>(type);
}

RawChunkObject* as_chunk(const py::object& o) { return reinterpret_cast<RawChunkObject*>(o.ptr()); }

}  // namespace

py::memoryview RawChunk::open(void* data, std::size_t size, bool readonly) {
    PyTypeObject* type = raw_chunk_type();
    PyObject* raw = type->tp_alloc(type, 0);
    if (raw == nullptr) throw py::error_already_set();
    py::object chunk = py::reinterpret_steal<py::object>(raw);
    auto* c = reinterpret_cast<RawChunkObject*>(raw);
    c->data = data;
    c->size = static_cast<Py_ssize_t>(size);
    c->readonly = readonly ? 1 : 0;
    c->exports = 0;
    c->owner = nullptr;
    PyObject* view = PyMemoryView_FromObject(raw);
    if (view == nullptr) throw py::error_already_set();
    obj_ = std::move(chunk);
    return py::reinterpret_steal<py::memoryview>(view);
}

bool RawChunk::viewed() const { return obj_ && as_chunk(obj_)->exports > 0; }

void RawChunk::forget() {
    if (obj_) {
        // Closed, not only dropped: the chunk object stays reachable (a view's .obj) after its block,
        // and a buffer taken of it then would show ring bytes that are another message's, or memory
        // unmapped with the endpoint. Views taken before keep their own Py_buffer (forget() runs only
        // once none is left: viewed() is false).
        auto* c = as_chunk(obj_);
        c->data = nullptr;
        c->size = 0;
    }
    obj_ = py::object();
    kept_ = false;
}

void RawChunk::keep_read_chunk(py::handle owner, bool shut_down) {
    const bool first = !kept_;
    keep(owner);
    if (shut_down)
        throw Closed{"acquire_read: the queue was shut down; a view of its last chunk outlived the with-block, so "
                     "the chunk (and the reader's rank) is kept while that view lives"};
    throw Failure{g_ringcast_error,
                  first ? "acquire_read: a view of the chunk outlived its with-block (a slice, memoryview(), cast "
                          "or numpy.frombuffer of the block's view, still referenced): the chunk is kept, not "
                          "released, so that the writer cannot overwrite the bytes under it, and this reader "
                          "refuses to read until that view is released (del it, and every numpy array made from it, or call a memoryview's release())"
                        : "acquire_read: a view of the chunk that outlived its with-block is still alive"};
}

bool RawChunk::settle_kept_read_chunk(const char* what) {
    if (!kept_) return false;
    if (viewed())
        throw Failure{g_ringcast_error,
                      std::string(what) + ": a view of an acquire_read() chunk that outlived its with-block is "
                                          "still alive; release it first (del it — and every numpy array made "
                                          "from it or from one another — or call a memoryview's release()): "
                                          "the chunk is kept until then so that the writer cannot overwrite it"};
    forget();
    return true;
}

void RawChunk::refuse_if_read_block_open(bool peeked, const char* what) const {
    if (peeked && !kept_ && viewed())
        throw Failure{g_ringcast_error, std::string(what) + ": an acquire_read() block of this queue is open; end it "
                                                            "first (its chunk is the next message)"};
}

void RawChunk::keep(py::handle owner) {
    kept_ = true;
    if (!obj_) return;
    auto* c = as_chunk(obj_);
    if (c->owner != nullptr || c->exports == 0) return;
    c->owner = owner.inc_ref().ptr();
}

}  // namespace ringcast::python::detail
