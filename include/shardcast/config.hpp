#pragma once
/// @file config.hpp
/// Macros shared by every shardcast header.

#define SHARDCAST_VERSION_MAJOR 0
#define SHARDCAST_VERSION_MINOR 1
#define SHARDCAST_VERSION_PATCH 0

#if defined(__CUDACC__) || defined(__HIPCC__)
#define SHARDCAST_HOST_DEVICE __host__ __device__
#else
#define SHARDCAST_HOST_DEVICE
#endif

/// Largest number of mesh axes (and tensor dims) a runtime layout can describe.
#ifndef SHARDCAST_MAX_AXES
#define SHARDCAST_MAX_AXES 8
#endif
#ifndef SHARDCAST_MAX_RANK
#define SHARDCAST_MAX_RANK 8
#endif
