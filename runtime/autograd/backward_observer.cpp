#include "runtime/autograd/backward_observer.h"

#include <algorithm>

namespace sublet::autograd {

namespace {
thread_local std::vector<BackwardObserver*> installed;
}  // namespace

const std::vector<BackwardObserver*>& backward_observers() { return installed; }

BackwardObserverGuard::BackwardObserverGuard(BackwardObserver& observer) : observer_(&observer) {
  installed.push_back(observer_);
}

BackwardObserverGuard::~BackwardObserverGuard() {
  const auto it = std::find(installed.rbegin(), installed.rend(), observer_);
  if (it != installed.rend()) installed.erase(std::next(it).base());
}

}  // namespace sublet::autograd
