build/sublet plan bench/data/resnet50_bs64_cuda_step.alloc_trace.json
