// Tensors of const elements (dtensor<const T, ...>): a view of memory the caller may only
// read (make_view over a const T*), or a tensor converted from one of mutable elements.
// redistribute (static and dynamic), redistribute_into, execute, to_global and the
// operators read them and give results of mutable elements in new storage, checked
// against the single-rank reference over every layout pair on 1- and 2-axis meshes; the
// input is never written, never given up, and a plan with no steps copies.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <shardcast/shardcast.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/differential.hpp"
#include "common/failures.hpp"
#include "common/reference.hpp"

namespace sc = shardcast;
namespace st = shardcast::testing;

namespace {

/// Every layout pair on `shape` for one extent set: x of mutable elements is distributed
/// under src with spread partial terms; a const view of its piece is redistributed to dst
/// (dynamic), run through execute and redistribute_into, and checked against the
/// reference; the piece is unchanged and never the result's storage.
template <class T, int N, std::size_t R>
void const_sweep(const std::array<int, N>& shape, const std::array<std::int64_t, R>& ext, st::sweep_outcome& out) {
  sc::host::run(std::accumulate(shape.begin(), shape.end(), 1, std::multiplies<>()), [&](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, shape);
    const std::vector<T> g = st::make_global<T>(std::accumulate(ext.begin(), ext.end(), std::int64_t{1}, std::multiplies<>()));
    std::size_t mine = 0;
    auto fail = [&](const std::string& what) { out.add(c.rank(), what); };
    st::for_each_layout_pair(N, static_cast<int>(R), 1, [&](const sc::runtime_layout& src, const sc::runtime_layout& dst) {
      ++mine;
      const std::string pair = sc::to_string(src) + " -> " + sc::to_string(dst) + ": ";
      auto x = sc::distribute(m, src, g, ext);
      st::spread_partial_terms(x, g);
      const auto before = st::snapshot(x);
      const T* piece = x.data();
      const auto v = sc::make_view(m, src, piece, ext);
      static_assert(std::is_same_v<typename decltype(v)::value_type, const T>);

      auto y = sc::redistribute(v, dst);
      static_assert(std::is_same_v<decltype(y), sc::dtensor<T, static_cast<int>(R), sc::dynamic_layout, decltype(m)>>);
      std::string err = st::check_against_reference(y, g);  // (collective)
      if (err.empty() && y.local_size() > 0 && (y.data() == piece || !y.owns())) err = "the result does not own new storage";

      auto z = sc::execute(sc::plan_for(v, dst), v);
      std::string err2 = st::check_against_reference(z, g);
      if (err2.empty() && z.local_size() > 0 && z.data() == piece) err2 = "execute's result is the input's storage";

      const sc::box b = sc::local_box(dst, m.shape().data(), m.coords().data(), ext.data(), static_cast<int>(R));
      st::guarded<T> out(static_cast<std::size_t>(b.volume()));
      const sc::dtensor<T, static_cast<int>(R), sc::dynamic_layout, decltype(m)> into(m, ext, nullptr, out.piece(), dst);
      sc::redistribute_into(v, into);
      std::string err3 = st::check_against_reference(into, g);
      if (err3.empty()) err3 = out.check(into.local_size());

      if (!err.empty()) fail(pair + "redistribute: " + err);
      if (!err2.empty()) fail(pair + "execute: " + err2);
      if (!err3.empty()) fail(pair + "redistribute_into: " + err3);
      if (st::snapshot(x) != before) fail(pair + "the const input was modified");
    });
    // to_global reads the view too (every layout of the last pair set's sources).
    for (const auto& src : st::all_layouts(N, static_cast<int>(R), sc::reduce_op::sum)) {
      auto x = sc::distribute(m, src, g, ext);
      st::spread_partial_terms(x, g);
      const auto before = st::snapshot(x);
      const auto v = sc::make_view(m, src, static_cast<const T*>(x.data()), ext);
      if (sc::to_global(v) != g) fail(sc::to_string(src) + ": to_global of the const view differs from the global tensor");
      auto given = v;  // (a non-const handle, so that std::move reaches the rvalue overloads)
      if (sc::to_global(std::move(given)) != g || given.data() != v.data())
        fail(sc::to_string(src) + ": to_global of a given-up const view differs, or emptied it");
      if (st::snapshot(x) != before) fail(sc::to_string(src) + ": to_global modified the const input");
    }
    if (c.rank() == 0) out.count(mine);
  });
}

using L2 = sc::layout<sc::shard<0>, sc::replicate>;
using M2 = sc::mesh<2, sc::host::communicator>;

}  // namespace

TEST_CASE_TEMPLATE("redistribute of const views matches the reference for every layout pair", T, float, std::int32_t) {
  st::sweep_outcome out;
  for (int n : {1, 2, 3}) {
    const_sweep<T, 1, 2>(std::array<int, 1>{n}, std::array<std::int64_t, 2>{5, 3}, out);
    const_sweep<T, 1, 1>(std::array<int, 1>{n}, std::array<std::int64_t, 1>{2}, out);  // empty pieces on 3 ranks
  }
  const_sweep<T, 2, 2>(std::array<int, 2>{2, 2}, std::array<std::int64_t, 2>{5, 3}, out);
  const_sweep<T, 2, 2>(std::array<int, 2>{2, 3}, std::array<std::int64_t, 2>{1, 4}, out);
  out.report();
  CHECK(out.cases == 3 * 5 * (16 + 9) + 2 * 256);  // 1 axis: 5 ops x (16 + 9) pairs on each of 3 meshes; 2 axes: 256 pairs each
}

TEST_CASE("static redistribute of const elements: new storage, also for the same layout; the input stays") {
  sc::host::run(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> ext{5, 3};
    const auto g = st::make_global<double>(15);
    auto x = sc::distribute<L2>(m, g, ext);
    const auto before = st::snapshot(x);
    const auto v = sc::make_view<L2>(m, static_cast<const double*>(x.data()), ext);

    auto same = sc::redistribute<L2>(v);  // no steps: a copy, not an alias
    static_assert(std::is_same_v<decltype(same), sc::dtensor<double, 2, L2, M2>>);
    CHECK(same.owns());
    CHECK(same.data() != x.data());
    CHECK(st::snapshot(same) == before);
    for (std::size_t i = 0; i < same.local_size(); ++i) same.data()[i] = -1;  // the result is the caller's to write
    CHECK(st::snapshot(x) == before);

    using RS1 = sc::layout<sc::replicate, sc::shard<1>>;
    auto y = sc::redistribute<RS1>(v);
    static_assert(std::is_same_v<decltype(y), sc::dtensor<double, 2, RS1, M2>>);
    CHECK(st::check_against_reference(y, g) == "");
    CHECK(st::check_against_reference(sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(v), g) == "");

    // A const view given up is only read: it stays as it was.
    auto moved = v;
    auto w = sc::redistribute<RS1>(std::move(moved));
    CHECK(st::check_against_reference(w, g) == "");
    CHECK(moved.data() == x.data());
    CHECK(moved.local_size() == x.local_size());

    // Static and dynamic layouts meet (see test_static_dynamic.cpp), with const elements.
    auto yd = sc::redistribute(v, sc::runtime_layout::parse("R,S(1)"));
    static_assert(std::is_same_v<decltype(yd), sc::dtensor<double, 2, sc::dynamic_layout, M2>>);
    CHECK(st::check_against_reference(yd, g) == "");
    const sc::dtensor<const double, 2, sc::dynamic_layout, M2> vd = v;
    auto ys = sc::redistribute<RS1>(vd);
    static_assert(std::is_same_v<decltype(ys), sc::dtensor<double, 2, RS1, M2>>);
    CHECK(st::check_against_reference(ys, g) == "");
    auto ysame = sc::redistribute<L2>(vd);  // no steps: a copy
    CHECK(ysame.data() != x.data());
    CHECK(st::snapshot(ysame) == before);

    // Into an output of mutable elements.
    auto out = sc::empty<RS1, double>(m, ext);
    sc::redistribute_into(v, out);
    CHECK(st::check_against_reference(out, g) == "");
    auto out_same = sc::empty<L2, double>(m, ext);
    sc::redistribute_into(v, out_same);
    CHECK(st::snapshot(out_same) == before);
    CHECK(st::snapshot(x) == before);
  });
}

TEST_CASE("partial terms of const elements reduce as those of mutable ones (static, every op)") {
  sc::host::run(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    const std::array<std::int64_t, 2> ext{3, 5};
    const auto g = st::make_global<float>(15);
    auto run = [&]<class Op>(Op) {
      using LP = sc::layout<sc::partial<Op>, sc::replicate>;
      auto x = sc::distribute<LP>(m, g, ext);
      st::spread_partial_terms(x, g);
      const auto before = st::snapshot(x);
      const sc::dtensor<const float, 2, LP, M2> cx = x;  // converted: the same storage
      CHECK(cx.data() == x.data());
      CHECK(st::check_against_reference(sc::redistribute<sc::layout<sc::replicate, sc::replicate>>(cx), g) == "");
      CHECK(st::check_against_reference(sc::redistribute<sc::layout<sc::shard<1>, sc::replicate>>(cx), g) == "");
      CHECK(sc::to_global(cx) == g);
      CHECK(st::snapshot(x) == before);
    };
    run(sc::sum{});
    run(sc::avg{});
    run(sc::max{});
    run(sc::min{});
    run(sc::prod{});
  });
}

TEST_CASE("dtensor<T> converts to dtensor<const T>: the same piece; an rvalue hands its handles over") {
  sc::host::run(2, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 1});
    const auto g = st::make_global<float>(12);
    auto x = sc::distribute<L2>(m, g, std::array<std::int64_t, 2>{4, 3});
    const float* piece = x.data();
    sc::dtensor<const float, 2, L2, M2> a = x;
    CHECK(a.data() == piece);
    CHECK(a.owner().get() == x.owner().get());
    CHECK(x.owner().use_count() == 2);
    CHECK(a.local_box() == x.local_box());
    CHECK(a.mesh() == x.mesh());
    sc::dtensor<const float, 2, L2, M2> b = std::move(x);
    CHECK(b.data() == piece);
    CHECK(st::check_emptied(x) == "");
    auto d = sc::distribute(m, sc::runtime_layout::parse("S(1),R"), g, std::array<std::int64_t, 2>{4, 3});
    sc::dtensor<const float, 2, sc::dynamic_layout, M2> cd = d;
    CHECK(cd.layout() == d.layout());
    CHECK(sc::to_global(cd) == g);
    static_assert(!std::is_convertible_v<sc::dtensor<const float, 2, L2, M2>, sc::dtensor<float, 2, L2, M2>>,
                  "const elements must not convert back to mutable ones");
  });
}

TEST_CASE("operators read const elements and give mutable results; a const operand is never given up") {
  sc::host::run(4, [](sc::host::communicator& c) {
    auto m = sc::make_mesh(c, std::array<int, 2>{2, 2});
    using SS = sc::layout<sc::shard<0>, sc::shard<1>>;
    using RR = sc::layout<sc::replicate, sc::replicate>;
    const std::array<std::int64_t, 2> ext{5, 3};
    const auto ga = st::small_ints<float>(15, 1), gb = st::small_ints<float>(15, 4);
    auto xa = sc::distribute<SS>(m, ga, ext);
    auto xb = sc::distribute<SS>(m, gb, ext);
    const auto before_a = st::snapshot(xa);
    const auto a = sc::make_view<SS>(m, static_cast<const float*>(xa.data()), ext);
    const sc::dtensor<const float, 2, SS, M2> b = xb;

    std::vector<float> want(15);
    auto same = [&](const auto& y, const char* what) {
      static_assert(!std::is_const_v<typename std::remove_cvref_t<decltype(y)>::value_type>);
      INFO(what);
      CHECK(sc::to_global(y) == want);
    };
    for (int i = 0; i < 15; ++i) want[i] = ga[i] + 1;
    same(sc::map(a, [](float v) { return v + 1; }), "map");
    for (int i = 0; i < 15; ++i) want[i] = ga[i] * 3;
    same(sc::scale(a, 3.0f), "scale");
    for (int i = 0; i < 15; ++i) want[i] = ga[i] + gb[i];
    same(sc::add(a, b), "add, both const");
    same(sc::add(a, xb), "add, const + mutable");
    same(sc::add(xb, a), "add, mutable + const");
    for (int i = 0; i < 15; ++i) want[i] = ga[i] - gb[i];
    same(sc::sub(a, b), "sub");
    for (int i = 0; i < 15; ++i) want[i] = ga[i] * gb[i];
    same(sc::mul(a, b), "mul");
    same(sc::zip(a, b, [](float u, float v) { return u * v; }), "zip");

    // A const operand given up is only read: add(std::move(c), ...) leaves c as it was, also
    // when c owns its storage alone (it is not written in place).
    {
      auto own = sc::distribute<SS>(m, ga, ext);
      sc::dtensor<const float, 2, SS, M2> sole = std::move(own);
      const float* p = sole.data();
      const auto kept = st::snapshot(sole);
      for (int i = 0; i < 15; ++i) want[i] = ga[i] + gb[i];
      same(sc::add(std::move(sole), b), "add of a given-up const operand");
      CHECK(sole.data() == p);
      CHECK(st::snapshot(sole) == kept);
      for (int i = 0; i < 15; ++i) want[i] = ga[i] * 2;
      same(sc::map(std::move(sole), [](float v) { return 2 * v; }), "map of a given-up const operand");
      CHECK(sole.data() == p);
      CHECK(st::snapshot(sole) == kept);
      same(sc::scale(std::move(sole), 2.0f), "scale of a given-up const operand");
      CHECK(sole.data() == p);
      CHECK(st::snapshot(sole) == kept);
    }

    // A rank-0 factor and a bias of const elements.
    const std::vector<float> three{3};
    auto s_own = sc::distribute<sc::layout<sc::replicate, sc::replicate>>(m, three, std::array<std::int64_t, 0>{});
    const sc::dtensor<const float, 0, RR, M2> s = s_own;
    for (int i = 0; i < 15; ++i) want[i] = ga[i] * 3;
    same(sc::mul(a, s), "mul by a rank-0 const factor");
    const std::vector<float> gbias{1, -2, 5};
    using BL = sc::layout<sc::replicate, sc::shard<0>>;
    auto bias_own = sc::distribute<BL>(m, gbias, std::array<std::int64_t, 1>{3});
    const sc::dtensor<const float, 1, BL, M2> bias = bias_own;
    for (int i = 0; i < 15; ++i) want[i] = ga[i] + gbias[i % 3];
    same(sc::bias_add(a, bias), "bias_add, const x and bias");

    // reduce over each dim.
    {
      std::vector<float> rows(5, 0), cols(3, 0);
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 3; ++j) rows[i] += ga[i * 3 + j], cols[j] += ga[i * 3 + j];
      auto r1 = sc::reduce<1, sc::sum>(a);
      static_assert(std::is_same_v<typename decltype(r1)::value_type, float>);
      CHECK(sc::to_global(r1) == rows);
      CHECK(sc::to_global(sc::reduce<0, sc::sum>(a)) == cols);
    }
    // transpose.
    {
      std::vector<float> t(15);
      for (int i = 0; i < 5; ++i)
        for (int j = 0; j < 3; ++j) t[j * 5 + i] = ga[i * 3 + j];
      auto at = sc::transpose(a);
      static_assert(std::is_same_v<typename decltype(at)::value_type, float>);
      CHECK(sc::to_global(at) == t);
    }
    // matmul: A [5,3] row-sharded, B [3,4] replicated; const A with mutable B, and both const.
    {
      using SR = sc::layout<sc::shard<0>, sc::replicate>;
      const auto gw = st::small_ints<float>(12, 2);
      auto xs = sc::distribute<SR>(m, ga, ext);
      const sc::dtensor<const float, 2, SR, M2> as = xs;
      auto w = sc::distribute<RR>(m, gw, std::array<std::int64_t, 2>{3, 4});
      const sc::dtensor<const float, 2, RR, M2> cw = w;
      const auto ref = st::ref_gemm(ga, gw, 5, 3, 4);
      auto c1 = sc::matmul(as, w);
      static_assert(std::is_same_v<typename decltype(c1)::value_type, float>);
      CHECK(sc::to_global(c1) == ref);
      CHECK(sc::to_global(sc::matmul(as, cw)) == ref);
      CHECK(sc::to_global(sc::matmul(xs, cw)) == ref);
    }
    // broadcast_zip along dim 1 with a row maximum of const elements.
    {
      std::vector<float> rmax(5);
      for (int i = 0; i < 5; ++i) rmax[i] = std::max({ga[i * 3], ga[i * 3 + 1], ga[i * 3 + 2]});
      for (int i = 0; i < 15; ++i) want[i] = ga[i] - rmax[i / 3];
      auto mx = sc::redistribute<sc::layout<sc::shard<0>, sc::replicate>>(sc::reduce<1, sc::max, sc::keep_dim>(a));
      const sc::dtensor<const float, 2, sc::layout<sc::shard<0>, sc::replicate>, M2> cmx = mx;
      same(sc::broadcast_zip<1>(a, cmx, sc::fn::sub), "broadcast_zip, both const");
    }
    CHECK(st::snapshot(xa) == before_a);
  });
}

TEST_CASE_TEMPLATE("a given-up tensor of const elements that owns its storage alone is only read: never emptied, never written",
                   OnRef, std::false_type, std::true_type) {
  sc::host::run(2, [](sc::host::communicator& c) {
    auto owner = sc::make_mesh(c, std::array<int, 2>{2, 1});
    const auto m = st::mesh_handle<OnRef::value>(owner);
    using M = std::remove_const_t<decltype(m)>;
    using SR = sc::layout<sc::shard<0>, sc::replicate>;
    using RR = sc::layout<sc::replicate, sc::replicate>;
    using PR = sc::layout<sc::partial<sc::sum>, sc::replicate>;
    const std::array<std::int64_t, 2> ext{4, 3};
    const auto g = st::make_global<float>(12);
    // Converted from an rvalue: the only owner of its storage, the case where a given-up
    // tensor of mutable elements lends its storage to the result.
    auto sole = [&](auto l) { return sc::dtensor<const float, 2, decltype(l), M>(sc::distribute<decltype(l)>(m, g, ext)); };
    auto kept = [](const auto& x, const float* p, const std::vector<float>& before) {
      return x.data() == p && x.owns() && x.owner().use_count() == 1 && st::snapshot(x) == before;
    };

    {  // partial -> replicate is one all_reduce, which a given-up tensor of mutable elements runs in place
      auto cx = sole(PR{});
      const float* p = cx.data();
      const auto before = st::snapshot(cx);
      auto r = sc::redistribute<RR>(std::move(cx));
      CHECK(st::check_against_reference(r, g) == "");
      CHECK(r.data() != p);
      CHECK(kept(cx, p, before));
      auto same = sc::redistribute<PR>(std::move(cx));
      CHECK(same.data() != p);
      CHECK(kept(cx, p, before));
      CHECK(sc::to_global(std::move(cx)) == g);
      CHECK(kept(cx, p, before));
    }
    {  // the same, dynamic
      auto cd = sc::dtensor<const float, 2, sc::dynamic_layout, M>(sc::distribute(m, sc::runtime_layout::parse("P(sum),R"), g, ext));
      const float* p = cd.data();
      const auto before = st::snapshot(cd);
      auto r = sc::redistribute(std::move(cd), sc::runtime_layout::parse("R,R"));
      CHECK(st::check_against_reference(r, g) == "");
      CHECK(kept(cd, p, before));
      auto same = sc::redistribute(std::move(cd), sc::runtime_layout::parse("P(sum),R"));
      CHECK(same.data() != p);
      CHECK(kept(cd, p, before));
      CHECK(sc::to_global(std::move(cd)) == g);
      CHECK(kept(cd, p, before));
    }
    {  // operators
      auto cx = sole(SR{});
      const float* p = cx.data();
      const auto before = st::snapshot(cx);
      std::vector<float> want(12);
      const std::vector<float> gbias{1, -2, 5};
      auto bias = sc::distribute<RR>(m, gbias, std::array<std::int64_t, 1>{3});
      for (int i = 0; i < 12; ++i) want[i] = g[i] + gbias[i % 3];
      CHECK(sc::to_global(sc::bias_add(std::move(cx), bias)) == want);
      CHECK(kept(cx, p, before));
      auto cmx = sc::dtensor<const float, 2, SR, M>(sc::redistribute<SR>(sc::reduce<1, sc::max, sc::keep_dim>(cx)));
      const float* pm = cmx.data();
      const auto before_m = st::snapshot(cmx);
      for (int i = 0; i < 12; ++i) want[i] = g[i] - std::max({g[i / 3 * 3], g[i / 3 * 3 + 1], g[i / 3 * 3 + 2]});
      CHECK(sc::to_global(sc::broadcast_zip<1>(std::move(cx), std::move(cmx), sc::fn::sub)) == want);
      CHECK(kept(cx, p, before));
      CHECK(kept(cmx, pm, before_m));
      auto cs = sc::dtensor<const float, 0, RR, M>(sc::distribute<RR>(m, std::vector<float>{3}, std::array<std::int64_t, 0>{}));
      const float* ps = cs.data();
      for (int i = 0; i < 12; ++i) want[i] = 3 * g[i];
      CHECK(sc::to_global(sc::mul(std::move(cx), std::move(cs))) == want);
      CHECK(kept(cx, p, before));
      CHECK(cs.data() == ps);
      for (int i = 0; i < 12; ++i) want[i] = g[i] * g[i];
      CHECK(sc::to_global(sc::mul(std::move(cx), cx)) == want);
      CHECK(kept(cx, p, before));
      for (int i = 0; i < 12; ++i) want[i] = 2 * g[i];
      CHECK(sc::to_global(sc::zip(std::move(cx), std::move(cx), sc::fn::add)) == want);
      CHECK(kept(cx, p, before));
      for (int i = 0; i < 12; ++i) want[i] = 0;
      CHECK(sc::to_global(sc::sub(sc::map(cx, [](float v) { return v; }), std::move(cx))) == want);
      CHECK(kept(cx, p, before));
    }
  });
}
