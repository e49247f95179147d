build/sublet plan bench/data/resnet18_bs128_cuda_step.alloc_trace.json
