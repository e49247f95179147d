build/tests/train/checkpoint_difference one.ckpt gloo_cuda_2.ckpt; build/tests/train/checkpoint_difference one.ckpt torchrun_gloo_cuda_2.ckpt
