# Convolution, normalisation, pooling, loss and dropout kernels.
list(APPEND SUBLET_OPS_SOURCES)
