// Round-trips one message through an installed ringcast: proves headers, library and package files.
#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include <ringcast/ring.hpp>

int main() {
    const std::string name = "rc-consumer-" + std::to_string(::getpid());
    auto writer = ringcast::Writer::create(name, {.readers = 1, .capacity = 1 << 16});
    auto reader = ringcast::Reader::attach(name, 0);
    const std::string text = "hello from an installed ringcast";
    if (writer.write(std::as_bytes(std::span(text)), std::chrono::seconds(1)) != ringcast::Status::ok) return 1;
    std::vector<std::byte> got;
    if (reader.read(got, std::chrono::seconds(1)) != ringcast::Status::ok) return 2;
    if (std::string(reinterpret_cast<const char*>(got.data()), got.size()) != text) return 3;
    std::puts("consumer: ok");
    return 0;
}
