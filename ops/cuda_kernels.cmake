# CUDA kernels beside the CPU ones (ops/cuda/): compiled only when CUDA is found.
list(APPEND SUBLET_OPS_CUDA_SOURCES
)
