# tests of NN kernels
foreach(nn_test test_conv2d test_conv2d_winograd test_conv2d_stride2 test_batch_norm test_pooling test_loss test_dropout)
  sublet_add_test(${nn_test} LABEL cpu SOURCES ${CMAKE_CURRENT_LIST_DIR}/${nn_test}.cpp LIBS sublet::ops)
endforeach()
