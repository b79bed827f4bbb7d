// libFuzzer target: Segment::validate_image on corrupted segment images.
//
// Input byte 0 picks the shape:
//   0   the input itself is the image (tiny, garbage, foreign)
//   1   a valid image (readers 1..4 from byte 1, 64 KiB ring) with input bytes 4.. XORed onto its
//       start (header, writer/space lines, reader slots; all-zero input = the valid image), real size
//       as the header says
//   2   as 1, truncated by 1 + u16(bytes 2..3) bytes
//   3   as 1, extended by 1 + byte 2 bytes
// The image lives in a heap block of exactly its size, so any read past it is an ASan report.
// Contract: validate_image returns or throws ringcast::Error — nothing else, no out-of-bounds read.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "ringcast/error.hpp"
#include "ringcast/layout.hpp"
#include "ringcast/segment.hpp"

namespace {

using namespace ringcast::layout;

void make_valid(std::byte* image, std::uint32_t readers, std::uint64_t capacity) {
    auto& h = *new (image) SegmentHeader{};
    h.abi_version = kAbiVersion;
    h.layout_hash = kLayoutHash;
    h.capacity = capacity;
    h.total_size = segment_size(readers, capacity);
    h.reader_count = readers;
    h.mode = 0600;
    h.magic.store(kMagic, std::memory_order_relaxed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned shape = data[0] % 4;
    std::size_t image_size = 0;
    std::unique_ptr<std::byte[]> image;
    if (shape == 0) {
        image_size = size - 1;
        image.reset(new std::byte[image_size == 0 ? 1 : image_size]);
        std::memcpy(image.get(), data + 1, image_size);
    } else {
        if (size < 4) return 0;
        const std::uint32_t readers = 1 + data[1] % 4;
        constexpr std::uint64_t capacity = kMinCapacity;
        const std::size_t valid = segment_size(readers, capacity);
        std::size_t delta = 0;
        if (shape == 2) delta = 1 + (std::size_t{data[2]} | std::size_t{data[3]} << 8);
        if (shape == 3) delta = 1 + std::size_t{data[2]};
        image_size = shape == 2 ? (delta >= valid ? 1 : valid - delta) : shape == 3 ? valid + delta : valid;
        std::unique_ptr<std::byte[]> full(new std::byte[std::max(valid, image_size)]());
        make_valid(full.get(), readers, capacity);
        const std::size_t overlay = std::min<std::size_t>(size - 4, data_offset(readers));
        for (std::size_t i = 0; i < overlay; ++i) full[i] ^= static_cast<std::byte>(data[4 + i]);
        image.reset(new std::byte[image_size]);
        std::memcpy(image.get(), full.get(), image_size);
    }
    try {
        ringcast::Segment::validate_image(image.get(), image_size);
    } catch (const ringcast::Error& e) {
        if (std::strlen(e.what()) == 0) std::abort();  // an error must say what is wrong
    }
    return 0;
}
