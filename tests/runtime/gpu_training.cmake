# Fused optimizer updates, CUDA graph capture of training steps, GPU-vs-CPU training checks.
sublet_add_test(test_fused_optim LABEL cpu SOURCES test_fused_optim.cpp LIBS sublet::runtime)
sublet_add_test(test_fused_optim_cuda LABEL gpu SOURCES test_fused_optim_cuda.cpp LIBS sublet::runtime)
if(SUBLET_HAVE_CUDA AND TARGET sublet::models)
  sublet_add_test(test_cuda_graph LABEL gpu SOURCES test_cuda_graph.cpp LIBS sublet::runtime sublet::models)
  # The index checks of embedding, cross_entropy and nll_loss captured into replays, op by op.
  sublet_add_test(test_captured_index_checks_cuda LABEL gpu SOURCES test_captured_index_checks_cuda.cpp LIBS sublet::runtime)
  # A GPT step (clipping, AdamW with a schedule, bf16 autocast) captured, and its replayed index checks.
  sublet_add_test(test_gpt_cuda_graph LABEL gpu SOURCES test_gpt_cuda_graph.cpp LIBS sublet::runtime sublet::models)
  # ops::run_concurrently: a captured step's second stream, its join and its held workspaces.
  sublet_add_test(test_concurrent_cuda LABEL gpu SOURCES test_concurrent_cuda.cpp LIBS sublet::runtime)
  sublet_add_test(test_planned_graph_step LABEL gpu SOURCES test_planned_graph_step.cpp LIBS sublet::runtime sublet::models)
  # A convolution's input gradient summed into the shortcut's (BackwardContext::gradient_sum_target).
  sublet_add_test(test_conv_gradient_sum_cuda LABEL gpu SOURCES test_conv_gradient_sum_cuda.cpp LIBS sublet::runtime)
  # Optimizer::backward_and_step: the update overlapping a captured backward.
  sublet_add_test(test_update_overlap_cuda LABEL gpu SOURCES test_update_overlap_cuda.cpp LIBS sublet::runtime sublet::models)
endif()
if(TARGET sublet::models)
  sublet_add_test(test_resnet20_gpu_step LABEL gpu SOURCES test_resnet20_gpu_step.cpp LIBS sublet::runtime sublet::models)
endif()
if(SUBLET_HAVE_CUDA)
  sublet_add_test(test_pinned_buffer LABEL gpu SOURCES test_pinned_buffer.cpp LIBS sublet::runtime)
  sublet_add_test(test_batch_norm_relu_cuda LABEL gpu SOURCES test_batch_norm_relu_cuda.cpp LIBS sublet::runtime)
  # bfloat16/float16 tensors on the GPU: casts, copies, fills, sum/mean, autograd.
  sublet_add_test(test_half_tensor_cuda LABEL gpu SOURCES test_half_tensor_cuda.cpp LIBS sublet::runtime)
  # GradScaler's device-side skip on the GPU and its CUDA-graph capture.
  sublet_add_test(test_grad_scaler_cuda LABEL gpu SOURCES test_grad_scaler_cuda.cpp LIBS sublet::runtime)
endif()
