#pragma once
// What the redistribute compile-fail tests start from: 4 host ranks, each with a 2x2 mesh
// `m` and a 3x4 float tensor `x` sharded on dim 0 over axis 0 (layout S(0),R). Each test
// passes the misuse as `f(m, x)`, so the misuse alone differs between the files.
#include <shardcast/comm/host.hpp>
#include <shardcast/distribute.hpp>
#include <shardcast/redistribute.hpp>

#include <array>
#include <cstdint>
#include <vector>

namespace sc = shardcast;

/// The global extents of `x`.
inline constexpr std::array<std::int64_t, 2> input_extents{3, 4};

template <class F>
void with_sharded_input(F f) {
  sc::host::run(4, [&](sc::host::communicator& comm) {
    auto m = sc::make_mesh(comm, std::array<int, 2>{2, 2});
    std::vector<float> g(12, 1.0f);
    auto x = sc::distribute<sc::layout<sc::shard<0>, sc::replicate>>(m, g, input_extents);
    f(m, x);
  });
}
