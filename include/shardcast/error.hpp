#pragma once
/// @file error.hpp
/// Exceptions thrown by shardcast and the checking macro used on host paths.

#include <stdexcept>
#include <string>

namespace shardcast {

/// Base of every exception shardcast throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A collective failed, timed out, or a peer failed while this rank waited for it.
class comm_error : public error {
 public:
  using error::error;
};

/// A layout, mesh or extent given at run time does not fit what it is used with.
class layout_error : public error {
 public:
  using error::error;
};

/// A CUDA runtime or library call failed.
class cuda_error : public error {
 public:
  using error::error;
};

namespace detail {
[[noreturn]] inline void throw_layout_error(const char* file, int line, const std::string& msg) {
  throw layout_error(msg + " [" + file + ":" + std::to_string(line) + "]");
}
}  // namespace detail
}  // namespace shardcast

/// Throws shardcast::layout_error with @p msg (a std::string expression) unless @p cond holds.
#define SHARDCAST_EXPECTS(cond, msg)                                               \
  do {                                                                             \
    if (!(cond)) ::shardcast::detail::throw_layout_error(__FILE__, __LINE__, (msg)); \
  } while (0)
