# tests of NN kernels
