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

// A flag a move leaves set in its source: a moved-from Writer reads as closed, so that every write,
// reserve and abort of it returns Status::closed before it touches the ring the new owner writes.
class SetOnMove {
public:
    SetOnMove() = default;
    SetOnMove(bool v) noexcept : v_(v) {}  // NOLINT(google-explicit-constructor): used like a bool
    SetOnMove(SetOnMove&& o) noexcept : v_(std::exchange(o.v_, true)) {}
    SetOnMove& operator=(SetOnMove&& o) noexcept {
        v_ = std::exchange(o.v_, true);
        return *this;
    }
    SetOnMove& operator=(bool v) noexcept {
        v_ = v;
        return *this;
    }
    operator bool() const noexcept { return v_; }  // NOLINT(google-explicit-constructor)

private:
    bool v_ = false;
};

// A pointer one thread publishes (wake_fd, which makes the eventfd on first use) while another may
// read it (cancel, "from any thread"): seq_cst on both sides, the argument of Reader::cancel. The
// owner (a unique_ptr beside it) keeps the object; a move takes the pointer along with it.
template <class T>
class PublishedPtr {
public:
    PublishedPtr() = default;
    PublishedPtr(PublishedPtr&& o) noexcept : p_(o.p_.exchange(nullptr, std::memory_order_seq_cst)) {}
    PublishedPtr& operator=(PublishedPtr&&) = delete;
    void publish(T* p) noexcept { p_.store(p, std::memory_order_seq_cst); }
    [[nodiscard]] T* load() const noexcept { return p_.load(std::memory_order_seq_cst); }

private:
    std::atomic<T*> p_{nullptr};
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
