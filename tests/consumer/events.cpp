// The installed component ringcast::events: a WaitSet reports a reader ready once a message is there.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

#include <ringcast/events/waitset.hpp>

using namespace std::chrono_literals;

int main() {
    const std::string name = "rc-consumer-ev-" + std::to_string(::getpid());
    auto writer = ringcast::Writer::create(name, {.readers = 1, .capacity = 1 << 16});
    auto reader = ringcast::Reader::attach(name, 0);
    ringcast::WaitSet set;
    const std::size_t id = set.add(reader);
    if (!set.wait(0s).empty()) return 1;  // nothing yet
    const std::string text = "hello through a WaitSet";
    if (writer.write(std::as_bytes(std::span(text)), 1s) != ringcast::Status::ok) return 2;
    const auto ready = set.wait(5s);
    if (ready.size() != 1 || ready[0] != id) return 3;
    std::vector<std::byte> got;
    if (reader.read(got, 0s) != ringcast::Status::ok || got.size() != text.size()) return 4;
    std::printf("consumer_events: ok (%s back end)\n", ringcast::to_string(set.backend()));
    return 0;
}
