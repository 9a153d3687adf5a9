// libFuzzer target for shardcast::runtime_layout::parse. Property: parse either throws
// shardcast::layout_error or returns a layout whose to_string re-parses to an equal layout.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <shardcast/layout.hpp>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  shardcast::runtime_layout l;
  try {
    l = shardcast::runtime_layout::parse(text);
  } catch (const shardcast::layout_error&) {
    return 0;
  }
  const std::string s = shardcast::to_string(l);
  const auto again = shardcast::runtime_layout::parse(s);  // must not throw
  if (!(again == l)) std::abort();
  return 0;
}
