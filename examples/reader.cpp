// examples/reader.cpp: reader rank 0 of the queue QUEUE; receives every message, in order and exactly
// once, until the writer closes the queue.
//   usage: reader QUEUE      (start examples/writer.cpp's `writer QUEUE` before or after it)
#include <cstdint>
#include <iostream>
#include <string>

#include <ringcast/ring.hpp>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: " << argv[0] << " QUEUE\n";
        return 2;
    }
    const std::string queue = argv[1];
    try {
        // Started before the writer, attach() waits up to 10 s for it to create the queue.
        auto reader = ringcast::Reader::attach(queue, /*rank=*/0, {.create_timeout = 10s});
        std::uint64_t received = 0;
        std::string last;
        for (;;) {
            const ringcast::Message m = reader.peek(10s);  // zero-copy view of the next message
            if (m.status == ringcast::Status::closed) break;  // the writer closed it; we have read everything
            if (m.status != ringcast::Status::ok) {  // timed_out: nothing came for 10 s
                std::cerr << "reader: " << ringcast::to_string(m.status) << " after " << received << " messages\n";
                return 1;
            }
            if (m.tag != received) {  // never: each message arrives once, in order
                std::cerr << "reader: got message " << m.tag << ", expected " << received << "\n";
                return 1;
            }
            last.assign(reinterpret_cast<const char*>(m.bytes.data()), m.bytes.size());
            reader.release();  // hands the bytes back to the writer: m.bytes is invalid from here
            ++received;
        }
        std::cout << "reader: received " << received << " messages, the last: " << last << "\n";
        ringcast::Segment::remove(queue);  // the writer left the name to us (unlink_on_destroy = false)
        return 0;
    } catch (const ringcast::Error& e) {  // no such queue, rank in use, the writer died without closing, ...
        std::cerr << "reader: " << e.what() << "\n";
        return 1;
    }
}
