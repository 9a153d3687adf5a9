#pragma once
/// @file nn/layers.hpp
/// The parallel layers in one include: parallel_axes and the layouts derived from them,
/// column- and row-parallel linear layers (with their sequence-parallel variants),
/// activations, the vocab-parallel embedding and ZeRO-sharded parameters with SGD/Adam.

#include "activation.hpp"
#include "axes.hpp"
#include "embedding.hpp"
#include "linear.hpp"
#include "zero.hpp"
