# Elementwise, reduction, matmul, fill/copy and random kernels.
list(APPEND SUBLET_OPS_SOURCES)
