// The installed component ringcast::gpu: the capability probe runs (a machine without a GPU or driver
// gets a clear reason, never a crash).
#include <cstdio>

#include <ringcast/gpu/capabilities.hpp>
#include <ringcast/gpu/runtime.hpp>

int main() {
    const auto caps = ringcast::gpu::probe(ringcast::gpu::cuda());
    if (!caps.usable && caps.why_not_text.empty()) return 1;  // no GPU must come with its reason
    std::printf("consumer_gpu: ok (%s)\n", caps.summary().c_str());
    return 0;
}
