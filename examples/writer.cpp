// examples/writer.cpp: creates the queue QUEUE for one reader, sends it COUNT numbered messages, closes it.
//   usage: writer QUEUE [COUNT]      (start examples/reader.cpp's `reader QUEUE` before or after it)
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <span>
#include <string>
#include <string_view>

#include <ringcast/ring.hpp>

using namespace std::chrono_literals;

// Zero-copy: reserve room in the ring, build the message there, publish it with commit().
ringcast::Status send_in_place(ringcast::Writer& writer, std::string_view text, std::uint64_t tag) {
    const ringcast::Reservation slot = writer.reserve(text.size(), 5s);
    if (slot.status != ringcast::Status::ok) return slot.status;  // nothing reserved: no commit()
    std::memcpy(slot.bytes.data(), text.data(), text.size());
    writer.commit(text.size(), tag);
    return ringcast::Status::ok;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: " << argv[0] << " QUEUE [COUNT]\n";
        return 2;
    }
    const std::string queue = argv[1];
    const std::uint64_t count = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1000;
    try {
        // One reader rank, a 64 KiB ring, owner-only (0600). The name outlives this writer
        // (unlink_on_destroy = false), so a reader started after we exit still drains the queue; the
        // reader removes the name when done.
        auto writer = ringcast::Writer::create(queue, {.readers = 1, .capacity = 64 << 10},
                                               {.unlink_on_destroy = false});
        for (std::uint64_t i = 0; i < count; ++i) {
            const std::string text = "message " + std::to_string(i);
            // Even messages are copied in by write() (any size: large ones are fragmented), odd ones
            // built in place. The tag travels with the message. A full ring waits for the reader,
            // here for up to 5 s.
            const ringcast::Status status = i % 2 == 0 ? writer.write(std::as_bytes(std::span(text)), 5s, i)
                                                       : send_in_place(writer, text, i);
            if (status != ringcast::Status::ok) {
                std::cerr << "writer: message " << i << ": " << ringcast::to_string(status) << " (no reader?)\n";
                return 1;
            }
        }
        writer.close();  // the reader gets everything sent so far, then Status::closed
        std::cout << "writer: sent " << count << " messages\n";
        return 0;
    } catch (const ringcast::Error& e) {  // the queue exists, /dev/shm is full, the reader died, ...
        std::cerr << "writer: " << e.what() << "\n";
        return 1;
    }
}
