// The names of a gather group's shared-memory objects: "<group>.r<rank>" for each reply ring,
// "<group>.bell" for the doorbell. Defined once, header-only: the collector and the workers make and
// open them (gather.cpp), and the sweeps (sweep_abandoned in segment.cpp, `ringcast gc`) find a
// bell's group from them; a second spelling could drift and cost a live group its bell.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ringcast {

inline constexpr std::string_view kGatherRingInfix = ".r";
inline constexpr std::string_view kGatherBellSuffix = ".bell";

// Every reply ring's name starts so.
[[nodiscard]] inline std::string gather_ring_prefix(std::string_view group) {
    return std::string(group).append(kGatherRingInfix);
}
[[nodiscard]] inline std::string gather_ring_name(std::string_view group, std::uint32_t rank) {
    return gather_ring_prefix(group) + std::to_string(rank);
}
[[nodiscard]] inline std::string gather_bell_name(std::string_view group) {
    return std::string(group).append(kGatherBellSuffix);
}

}  // namespace ringcast
