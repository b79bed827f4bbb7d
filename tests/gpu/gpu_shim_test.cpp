// The GPU logic against a fake runtime whose copies land late (fake_runtime.hpp), and the real runtimes'
// answers on a machine without a usable GPU. Runs everywhere, GPU or not; no CUDA compiler needed.
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fake_runtime.hpp"
#include "ringcast/gpu/capabilities.hpp"
#include "ringcast/gpu/device_reader.hpp"
#include "ringcast/gpu/device_writer.hpp"
#include "test_util.hpp"

using namespace ringcast;
using namespace ringcast::gpu;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kCapacity = 1 << 20;  // max_reserve = 256 KiB - 16: 600 KiB goes in 3 fragments

struct Counts {
    int checked = 0;
    int torn = 0;          // a visible message whose bytes were not (all) the published ones
    int early_visible = 0;  // publish_async: visible before poll()/flush() saw the copy land
};

bool all_equal(std::span<const std::byte> b, std::byte v) {
    for (auto x : b)
        if (x != v) return false;
    return true;
}

// Publishes messages from the fake device (sync, async, fragmented) and looks at each the moment it is
// visible: with honest events every byte must be there; with lying ones the late copies show.
Counts publish_trial(bool lying) {
    ringcast::test::ScopedName name("gpu-order");
    SegmentOptions so;
    so.capacity = kCapacity;
    Writer w = Writer::create(name, so);
    Reader r = Reader::attach(name, 0);
    gpu::test::FakeDevice fake;  // after the ring: destroyed (its late copies drained) before the unmapping
    gpu::test::g_fake = &fake;
    fake.lying_events = lying;
    Counts c;
    {
        DeviceWriter dw(w, gpu::test::fake_runtime());
        const std::size_t sizes[] = {4096, 1, 100000, 600 * 1024, 4096, 250000};
        for (int k = 0; k < 24; ++k) {
            const std::size_t n = sizes[k % 6];
            const auto v = static_cast<std::byte>(k + 1);
            std::memset(fake.arena.data(), k + 1, n);
            const bool async = k % 4 == 3 && n <= w.max_reserve();
            if (async) {
                EXPECT_EQ(dw.publish_async(fake.arena.data(), n, nullptr), Status::ok);
                if (r.peek(0ns).status == Status::ok) {  // nothing may be visible before the copy landed
                    ++c.early_visible;
                    r.release();
                    continue;
                }
                EXPECT_EQ(dw.flush(), Status::ok);
            } else {
                EXPECT_EQ(dw.publish(fake.arena.data(), n, nullptr), Status::ok);
            }
            const Message m = r.peek(0ns);  // visible now: published before publish()/flush() returned
            EXPECT_EQ(m.status, Status::ok);
            if (m.status != Status::ok) continue;
            ++c.checked;
            if (m.bytes.size() != n || !all_equal(m.bytes, v)) ++c.torn;
            r.release();
            // A lying event let the ring space go while the copy still writes: let it land before the
            // next message reuses the arena.
            while (fake.done.load() < fake.queued.load()) std::this_thread::sleep_for(100us);
        }
    }
    EXPECT_EQ(fake.registered.load(), 1u);
    EXPECT_EQ(fake.unregistered.load(), 1u);
    return c;
}

}  // namespace

TEST(GpuOrdering, PublishCommitsOnlyAfterTheCopyLanded) {
    const Counts honest = publish_trial(false);
    EXPECT_EQ(honest.checked, 24);
    EXPECT_EQ(honest.torn, 0);
    EXPECT_EQ(honest.early_visible, 0);
    // Negative control: the same checks catch a commit that trusts an event before the copy landed.
    // (Not under TSan: the late copy racing the reader is the point, and TSan rightly reports it.)
#if defined(__SANITIZE_THREAD__)
    std::printf("[ info ] the negative control is not run under TSan (it races on purpose)\n");
    return;
#endif
    const Counts lying = publish_trial(true);
    EXPECT_GT(lying.torn + lying.early_visible, 12) << "the check cannot see unlanded bytes";
}

TEST(GpuOrdering, ReceiveReturnsOnlyAfterTheCopyLanded) {
#if defined(__SANITIZE_THREAD__)
    for (const bool lying : {false}) {  // the negative control races on purpose (see above)
#else
    for (const bool lying : {false, true}) {
#endif
        ringcast::test::ScopedName name("gpu-recv");
        SegmentOptions so;
        so.capacity = kCapacity;
        Writer w = Writer::create(name, so);
        Reader r = Reader::attach(name, 0);
        gpu::test::FakeDevice fake;
        gpu::test::g_fake = &fake;
        fake.lying_events = lying;
        int torn = 0;
        {
            DeviceReader dr(r, gpu::test::fake_runtime());
            std::byte* dst = fake.arena.data() + (32 << 20);
            for (int k = 0; k < 12; ++k) {
                const std::size_t n = k % 3 == 2 ? 600 * 1024 : 50000;  // fragmented ones come from the heap
                std::vector<std::byte> msg(n, static_cast<std::byte>(k + 1));
                ASSERT_EQ(w.write(msg), Status::ok);
                const Received got = dr.receive(dst, 32 << 20, nullptr, 0ns);
                ASSERT_EQ(got.status, Status::ok);
                EXPECT_EQ(got.size, n);
                if (!all_equal({dst, n}, static_cast<std::byte>(k + 1))) ++torn;
                while (fake.done.load() < fake.queued.load()) std::this_thread::sleep_for(100us);
            }
        }
        if (!lying) {
            EXPECT_EQ(torn, 0);
        } else {
            EXPECT_GT(torn, 6) << "negative control: a receive that trusts a lying event returns early";
        }
    }
}

TEST(GpuApi, ZeroCopyPeekRegistrationAndErrors) {
    ringcast::test::ScopedName name("gpu-api");
    SegmentOptions so;
    so.capacity = kCapacity;
    Writer w = Writer::create(name, so);
    Reader r = Reader::attach(name, 0);
    gpu::test::FakeDevice fake;
    gpu::test::g_fake = &fake;
    {
        DeviceWriter dw(w, gpu::test::fake_runtime());
        DeviceReader dr(r, gpu::test::fake_runtime());
        EXPECT_TRUE(dr.zero_copy());
        // A host pointer is refused with the cause named, and nothing is published.
        std::vector<std::byte> host(64);
        try {
            (void)dw.publish(host.data(), host.size(), nullptr);
            ADD_FAILURE() << "a host source was accepted";
        } catch (const DeviceError& e) {
            EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
            EXPECT_NE(std::string(e.what()).find("not device memory"), std::string::npos) << e.what();
        }
        EXPECT_EQ(r.peek(0ns).status, Status::timed_out);
        // Zero-copy address for a record in the ring; none for a reassembled (fragmented) message.
        std::memset(fake.arena.data(), 7, 600 * 1024);
        ASSERT_EQ(dw.publish(fake.arena.data(), 1000, nullptr), Status::ok);
        ASSERT_EQ(dw.publish(fake.arena.data(), 600 * 1024, nullptr), Status::ok);
        DevicePeek p = dr.peek(0ns);
        ASSERT_EQ(p.status, Status::ok);
        EXPECT_EQ(p.device_bytes, p.host_bytes.data());  // the fake maps at the same address
        dr.release_after(nullptr);
        p = dr.peek(0ns);
        ASSERT_EQ(p.status, Status::ok);
        EXPECT_EQ(p.host_bytes.size(), 600u * 1024);
        EXPECT_EQ(p.device_bytes, nullptr);
        dr.release();
        // receive into a buffer too small: message_too_large, the message stays for a bigger one.
        ASSERT_EQ(dw.publish(fake.arena.data(), 5000, nullptr), Status::ok);
        try {
            (void)dr.receive(fake.arena.data() + (32 << 20), 100, nullptr, 0ns);
            ADD_FAILURE() << "an oversized message was accepted";
        } catch (const Error& e) {
            EXPECT_EQ(e.code(), ErrorCode::message_too_large);
        }
        EXPECT_EQ(dr.receive(fake.arena.data() + (32 << 20), 5000, nullptr, 0ns).size, 5000u);
    }
    // The mapping that contains an address is the segment's whole mapping.
    const auto reg = HostRegistration::of_mapping_containing(gpu::test::fake_runtime(), w.segment().data() + 100, 0);
    EXPECT_EQ(reg.base(), w.segment().base());
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    EXPECT_EQ(reg.size(), (w.segment().size() + page - 1) / page * page);  // the mapping, whole pages
}

// The core addition the device path stands on: Writer::write_filled publishes each record only after
// its fill returned; a fill that throws leaves that record unpublished, and a fragmented message whose
// fill fails part way is withdrawn (the reader never delivers a torn message).
namespace {
struct PatternFill {
    std::uint64_t fail_at = ~0ull;  // throw when asked for this message offset
    int calls = 0;
    static void fill(void* self, std::span<std::byte> dst, std::uint64_t offset) {
        auto& f = *static_cast<PatternFill*>(self);
        ++f.calls;
        if (offset == f.fail_at) throw std::runtime_error("fill failed");
        for (std::size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<std::byte>((offset + i) * 7 % 251);
    }
};
bool is_pattern(std::span<const std::byte> b) {
    for (std::size_t i = 0; i < b.size(); ++i)
        if (b[i] != static_cast<std::byte>(i * 7 % 251)) return false;
    return true;
}
}  // namespace

TEST(CoreWriteFilled, OneFillPerRecordAndNothingTornOnFailure) {
    ringcast::test::ScopedName name("gpu-fill");
    SegmentOptions so;
    so.capacity = kCapacity;  // records up to 256 KiB - 16
    Writer w = Writer::create(name, so);
    Reader r = Reader::attach(name, 0);
    std::vector<std::byte> got;
    // One record, one fill.
    PatternFill one;
    ASSERT_EQ(w.write_filled(100000, &PatternFill::fill, &one), Status::ok);
    EXPECT_EQ(one.calls, 1);
    ASSERT_EQ(r.read(got, 0ns), Status::ok);
    EXPECT_TRUE(got.size() == 100000 && is_pattern(got));
    // Fragments: one fill per record, in order, reassembled intact.
    PatternFill frag;
    ASSERT_EQ(w.write_filled(600 * 1024, &PatternFill::fill, &frag), Status::ok);
    EXPECT_EQ(frag.calls, 3);
    ASSERT_EQ(r.read(got, 0ns), Status::ok);
    EXPECT_TRUE(got.size() == 600 * 1024 && is_pattern(got));
    // A single-record fill that throws publishes nothing.
    PatternFill bad_one{0};
    EXPECT_THROW((void)w.write_filled(5000, &PatternFill::fill, &bad_one), std::runtime_error);
    EXPECT_EQ(r.peek(0ns).status, Status::timed_out);
    // A fragmented message whose second fill throws: its first fragment is out, and is withdrawn by the
    // next write; the reader gets the next message, never a torn one.
    PatternFill bad_frag{w.max_reserve() - layout::kFragmentPrefix};
    EXPECT_THROW((void)w.write_filled(600 * 1024, &PatternFill::fill, &bad_frag), std::runtime_error);
    PatternFill after;
    ASSERT_EQ(w.write_filled(4000, &PatternFill::fill, &after, kForever, 42), Status::ok);
    std::uint64_t tag = 0;
    ASSERT_EQ(r.read(got, 0ns, &tag), Status::ok);
    EXPECT_EQ(tag, 42u);
    EXPECT_TRUE(got.size() == 4000 && is_pattern(got));
}

TEST(CoreWriteFilled, ResumesAFragmentedMessageAfterATimeout) {
    ringcast::test::ScopedName name("gpu-fill-resume");
    SegmentOptions so;
    so.capacity = kCapacity;
    Writer w = Writer::create(name, so);
    Reader r = Reader::attach(name, 0);
    // 3 MiB through a 1 MiB ring with nobody reading: times out part way, then resumes as space frees.
    PatternFill fill;
    WriteProgress progress;
    const std::uint64_t total = 3 << 20;
    EXPECT_EQ(w.write_filled(total, &PatternFill::fill, &fill, 20ms, 0, &progress), Status::timed_out);
    EXPECT_TRUE(progress.started());
    std::vector<std::byte> assembled;
    Status s = Status::timed_out;
    for (int round = 0; round < 100 && s != Status::ok; ++round) {
        const Message m = r.peek(0ns);  // drains fragments into the reader's buffer, frees the ring
        if (m.status == Status::ok) {
            assembled.assign(m.bytes.begin(), m.bytes.end());
            r.release();
        }
        s = w.write_filled(total, &PatternFill::fill, &fill, 20ms, 0, &progress);
    }
    ASSERT_EQ(s, Status::ok);
    if (assembled.empty()) {
        const Message m = r.peek(1s);
        ASSERT_EQ(m.status, Status::ok);
        assembled.assign(m.bytes.begin(), m.bytes.end());
    }
    EXPECT_TRUE(assembled.size() == total && is_pattern(assembled)) << "a resumed fill restarted or skipped bytes";
}

// The real runtimes on this machine. Without a usable GPU they must say why, clearly, and the
// endpoints must refuse with the same reason; with one, this case has nothing to check (skipped).
void expect_clean_refusal(const Runtime& rt) {
    const Capabilities c = probe(rt);
    if (c.usable) GTEST_SKIP() << rt.name << " is usable here (" << c.summary() << "): no refusal to check";
    std::printf("[ info ] %s: %s\n", rt.name, c.summary().c_str());
    EXPECT_TRUE(c.why_not == Reason::no_driver || c.why_not == Reason::no_device) << c.why_not_text;
    EXPECT_NE(c.why_not_text.find(rt.name), std::string::npos) << c.why_not_text;
    ringcast::test::ScopedName name("gpu-refuse");
    Writer w = Writer::create(name, SegmentOptions{});
    try {
        DeviceWriter dw(w, rt);
        ADD_FAILURE() << "DeviceWriter registered without a usable GPU";
    } catch (const DeviceError& e) {
        EXPECT_EQ(e.reason(), c.why_not) << e.what();
        EXPECT_NE(std::string(e.what()).find(c.why_not == Reason::no_driver ? "driver" : "device"), std::string::npos)
            << e.what();
    }
    // The CPU path is untouched by a failed GPU attempt.
    const std::byte b[3] = {};
    EXPECT_EQ(w.write(b), Status::ok);
}

TEST(GpuRuntime, CudaWithoutGpuRefusesCleanly) {
    if (!cuda_built()) {
        EXPECT_THROW((void)cuda(), DeviceError);
        GTEST_SKIP() << "built without CUDA (RINGCAST_CUDA): cuda() throws not_built, checked";
    }
    expect_clean_refusal(cuda());
}

TEST(GpuRuntime, HipWithoutGpuRefusesCleanly) {
    if (!hip_built()) {
        EXPECT_THROW((void)hip(), DeviceError);
        GTEST_SKIP() << "built without HIP (RINGCAST_HIP): hip() throws not_built, checked";
    }
    expect_clean_refusal(hip());
}
