// A fork child's write through its parent's Writer, told as the child's exit code: the raw clone()
// test (api_misuse_test.cpp) and fork_fallback_probe.cpp run it in a child that can only report
// through _exit. No GoogleTest here: the probe is a plain program.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include <sys/types.h>

#include "ringcast/ring.hpp"

namespace ringcast::test {

// The codes are none of a sanitizer's (ASan and UBSan exit 1, LSan 23, TSan 66).
enum ChildWrite : int {
    kWriteRefused = 0,         // Error(protocol) naming the parent's pid and fork(): the fork rule held
    kWriteOtherError = 2,      // refused, but not by the fork rule
    kWriteOtherException = 3,  // something else than an Error was thrown
    kWroteIntoParentsRing = 5,
};

// Tries one 10-byte write (tag 9, no waiting) through `w`, a copy of the Writer that `parent` made.
[[nodiscard]] inline int write_through_parents_writer(Writer& w, pid_t parent) {
    const std::byte payload[10]{};
    try {
        (void)w.write(payload, std::chrono::nanoseconds(0), 9);
        return kWroteIntoParentsRing;
    } catch (const Error& e) {
        const std::string text = e.what();
        const bool fork_rule = text.find("belongs to pid " + std::to_string(parent)) != std::string::npos &&
                               text.find("through fork()") != std::string::npos;
        return e.code() == ErrorCode::protocol && fork_rule ? kWriteRefused : kWriteOtherError;
    } catch (...) {
        return kWriteOtherException;
    }
}

}  // namespace ringcast::test
