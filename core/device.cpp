#include "core/device.h"

#include "core/errors.h"

namespace sublet {

Device Device::parse(const std::string& text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() < 9 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos)
    return cuda(std::stoi(text.substr(5)));
  throw ValueError("unknown device '" + text + "': expected cpu, cuda or cuda:N");
}

}  // namespace sublet
