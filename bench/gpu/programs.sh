# The programs of the GPU check, sourced by device_check.sh and prebuild.sh.
# The gpu-labelled test programs (the last three exist only where NCCL was found):
gpu_tests=(cuda_kernels_test cuda_reduce_test cuda_elementwise_test cuda_allocator_test cuda_gemm_test
           cuda_nccl_test cuda_p2p_test cuda_differential_test)
# The other programs the check runs:
gpu_tools=(cudahost_index_math_test bench_kernels shardcast-bench)
