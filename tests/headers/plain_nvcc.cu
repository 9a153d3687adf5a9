// Compiled by plain nvcc, with no --expt-relaxed-constexpr and every warning an error (the
// test headers_plain_nvcc): the split rule's host+device functions, which take a
// runtime_layout, must be usable in a kernel of a code base that has none of shardcast's
// compile flags.
#include <shardcast/split.hpp>

#include <cstdint>

__global__ void local_boxes(shardcast::runtime_layout l, const int* shape, const int* coord, const std::int64_t* extents,
                            std::int64_t* out) {
  const shardcast::box b = shardcast::local_box(l, shape, coord, extents, 2);
  out[0] = b.off[0] + b.off[1];
  out[1] = b.volume();
  out[2] = l.size() > 0 && l[0].is_shard() ? 1 : 0;
}

int main() { return 0; }
