# Tensor, autograd, nn, optim sources.
list(APPEND SUBLET_RUNTIME_SOURCES)
