#pragma once
// When sublet crashes (a segmentation fault, a bus error, an illegal instruction, a floating-point
// trap), it says so on stderr with the signal and the stack's return addresses before dying of the
// same signal, so that a crash on a machine without a debugger can be located afterwards:
//   addr2line -f -C -e build/sublet ADDRESS...   (an unstripped binary of the same build)
namespace sublet::cli {

void install_crash_report();

}  // namespace sublet::cli
