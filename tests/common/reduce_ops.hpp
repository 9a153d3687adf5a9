#pragma once
// Every reduce op, for suites that sweep them. Needs only the placement header, so the
// communicator and kernel suites that include narrow headers can use it too.
#include <shardcast/placement.hpp>

namespace shardcast::testing {
inline constexpr reduce_op all_reduce_ops[] = {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min, reduce_op::prod};
}  // namespace shardcast::testing
