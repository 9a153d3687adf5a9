#pragma once
/// @file shardcast.hpp
/// Umbrella header: layouts, planner, host backend, mesh, dtensor, distribute/redistribute.
/// Device and MPI backends have their own headers (comm/nccl.hpp, comm/p2p.hpp, comm/mpi.hpp).

#include "comm/communicator.hpp"
#include "comm/host.hpp"
#include "config.hpp"
#include "distribute.hpp"
#include "dtensor.hpp"
#include "error.hpp"
#include "explain.hpp"
#include "layout.hpp"
#include "mesh.hpp"
#include "placement.hpp"
#include "plan.hpp"
#include "redistribute.hpp"
#include "split.hpp"
#include "ops/broadcast.hpp"
#include "ops/elementwise.hpp"
#include "ops/matmul.hpp"
#include "ops/reduce.hpp"
#include "ops/reshape.hpp"
#include "ops/transpose.hpp"
