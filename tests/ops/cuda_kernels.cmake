# GPU tests of the CUDA kernels: each compares an op on the GPU with its CPU kernel.
