# tests of tensor kernels
