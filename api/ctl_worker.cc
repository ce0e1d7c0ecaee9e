// SPDX-License-Identifier: BSD-3-Clause
#include "api/ctl_worker.h"

#include <rte_eal.h>

#include <cstdio>
#include <cstring>

namespace imago::api {

void ctl_reply(const CtlMsg& m, const char* peer) {
  rte_mp_msg reply{};
  std::snprintf(reply.name, sizeof reply.name, "%s", kCtlAction);
  reply.len_param = sizeof m;
  std::memcpy(reply.param, &m, sizeof m);
  rte_mp_reply(&reply, peer);
}

void CtlWorker::start(Answer answer) {
  answer_ = std::move(answer);
  stopping_ = false;
  thread_ = std::thread([this] { run(); });
}

bool CtlWorker::post(const CtlMsg& m, const char* peer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || queue_.size() >= kMaxQueued) return false;
  Job& j = queue_.emplace_back();
  j.m = m;
  std::snprintf(j.peer, sizeof j.peer, "%s", peer);
  cv_.notify_one();
  return true;
}

void CtlWorker::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Job j = queue_.front();
    queue_.pop_front();
    lock.unlock();
    j.m.rc = answer_(j.m);
    ctl_reply(j.m, j.peer);
    lock.lock();
  }
}

void CtlWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace imago::api
