# Fused optimizer updates, CUDA graph capture of training steps, GPU-vs-CPU training checks.
sublet_add_test(test_fused_optim LABEL cpu SOURCES test_fused_optim.cpp LIBS runtime)
sublet_add_test(test_fused_optim_cuda LABEL gpu SOURCES test_fused_optim_cuda.cpp LIBS runtime)
if(SUBLET_HAVE_CUDA AND TARGET models)
  sublet_add_test(test_cuda_graph LABEL gpu SOURCES test_cuda_graph.cpp LIBS runtime models)
endif()
if(TARGET models)
  sublet_add_test(test_resnet20_gpu_step LABEL gpu SOURCES test_resnet20_gpu_step.cpp LIBS runtime models)
endif()
