// The installed component ringcast::remote: one message from a ring to a remote reader over loopback.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include <ringcast/remote/publisher.hpp>
#include <ringcast/remote/reader.hpp>

using namespace std::chrono_literals;

int main() {
    const std::string name = "rc-consumer-zmq-" + std::to_string(::getpid());
    auto writer = ringcast::Writer::create(name, {.readers = 1, .capacity = 1 << 16});
    ringcast::remote::RemotePublisherOptions options;
    options.listen.ip = "127.0.0.1";  // loopback only; port 0: an ephemeral one
    options.ranks = {1};
    auto publisher = ringcast::remote::RemotePublisher::start(name, 0, options);
    auto reader = ringcast::remote::RemoteReader::connect(publisher.endpoint(), 1);
    if (publisher.wait_ready(10s) != ringcast::Status::ok) return 1;
    const std::string text = "hello over ZeroMQ";
    if (writer.write(std::as_bytes(std::span(text)), 1s) != ringcast::Status::ok) return 2;
    std::vector<std::byte> got;
    if (reader.read(got, 10s) != ringcast::Status::ok) return 3;
    if (std::string(reinterpret_cast<const char*>(got.data()), got.size()) != text) return 4;
    std::printf("consumer_remote: ok (%s)\n", publisher.endpoint().c_str());
    return 0;
}
