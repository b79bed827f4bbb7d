// ringcast/detail/movable.hpp — small members that make the endpoints' move constructors defaultable:
// a hand-written move constructor silently drops every member added after it was written.
#pragma once

#include <atomic>
#include <utility>

namespace ringcast::detail {

// A value that a move takes and resets to T{} in the source (pointers: the moved-from object sees
// nullptr and knows it owns nothing; flags: a moved-from endpoint does not detach twice).
template <class T>
class Taken {
public:
    Taken() = default;
    Taken(T v) noexcept : v_(v) {}  // NOLINT(google-explicit-constructor): used like a T
    Taken(Taken&& o) noexcept : v_(std::exchange(o.v_, T{})) {}
    Taken& operator=(Taken&& o) noexcept {
        v_ = std::exchange(o.v_, T{});
        return *this;
    }
    Taken& operator=(T v) noexcept {
        v_ = v;
        return *this;
    }
    operator T() const noexcept { return v_; }  // NOLINT(google-explicit-constructor)
    T operator->() const noexcept { return v_; }

private:
    T v_{};
};

// An atomic flag another thread may set (cancel); a move copies its current value.
class MovableFlag {
public:
    MovableFlag() = default;
    MovableFlag(MovableFlag&& o) noexcept : flag_(o.flag_.load(std::memory_order_acquire)) {}
    MovableFlag& operator=(MovableFlag&&) = delete;
    [[nodiscard]] std::atomic<bool>& get() noexcept { return flag_; }
    [[nodiscard]] const std::atomic<bool>& get() const noexcept { return flag_; }

private:
    std::atomic<bool> flag_{false};
};

}  // namespace ringcast::detail
