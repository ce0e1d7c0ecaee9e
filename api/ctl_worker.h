/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * imagod's answers to its applications' requests (open, close), made off DPDK's rte_mp
 * thread.
 *
 * An open allocates its endpoint's rings. An allocation that grows EAL's heap asks every
 * secondary process over rte_mp to map the new memory, and waits for their replies, which
 * only the rte_mp thread receives: made on that thread, it waited its whole timeout and
 * failed (EAL: "Fail to recv reply ... mp_malloc_sync"), and the open with it: -ETIMEDOUT
 * for the 15th endpoint of a default imagod --pair, or for every open once dozens of killed
 * applications had left EAL's heap full (a killed secondary never frees what its EAL took).
 * So the rte_mp handler queues the request and returns; this thread answers the requests,
 * one at a time and in order (rte_mp_reply() may come from any thread). Control path.
 */
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "api/control.h"

namespace imago::api {

class CtlWorker {
 public:
  /** What answers a request: fills @p m's answer, @return its rc. */
  using Answer = std::function<int(CtlMsg& m)>;
  /** At most this many requests wait: more are dropped unanswered (each application tries
   *  again, kCtlTryMs later), so a flood of requests holds no unbounded memory. */
  static constexpr size_t kMaxQueued = 256;

  ~CtlWorker() { stop(); }
  /** Start the thread answering with @p answer. */
  void start(Answer answer);
  /** rte_mp thread: queue request @p m of the process whose rte_mp socket is @p peer.
   *  @return false when the queue is full (dropped). */
  bool post(const CtlMsg& m, const char* peer);
  /** Finish the request being answered, drop those still queued (their applications retry,
   *  then learn imagod is gone), and end the thread. */
  void stop();

 private:
  struct Job {
    CtlMsg m;
    char peer[108];  // sockaddr_un's sun_path
  };
  void run();

  Answer answer_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

/** Send @p m back to the rte_mp socket @p peer as the answer to its request. */
void ctl_reply(const CtlMsg& m, const char* peer);

}  // namespace imago::api
