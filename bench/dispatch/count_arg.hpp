#pragma once
// Command-line counts of the bench/dispatch programs.
#include <cstddef>
#include <exception>
#include <string>

/// A count: the whole argument, an integer (else 0, which the callers' checks reject).
inline int count_arg(const std::string& a) {
  std::size_t used = 0;
  int v = 0;
  try {
    v = std::stoi(a, &used);
  } catch (const std::exception&) {
    return 0;
  }
  return used == a.size() ? v : 0;
}
