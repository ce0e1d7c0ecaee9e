/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * Received frames a test's frame sink lets the engine hold (FrameSink::hold_frame(), in-place
 * receive). Each frame is received in a buffer of its own; a buffer let go is overwritten
 * before it is used again, so a unit read after its release comes out corrupt, and a hold
 * given back twice (or never taken) is reported.
 */
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

namespace imago::test {

class HeldFrames {
 public:
  /** Copy @p f into a buffer the engine may hold while it receives it (until end()). */
  std::span<const uint8_t> begin(std::span<const uint8_t> f) {
    Frame* rf = spare_.empty() ? &frames_.emplace_back() : spare_.back();
    if (!spare_.empty()) spare_.pop_back();
    rf->refs = 1;
    rf->holds = 0;
    rf->bytes.assign(f.begin(), f.end());
    current_ = rf;
    // Room for every buffer among the spares: a release (inside the engine) never allocates.
    if (spare_.capacity() < frames_.size()) spare_.reserve(2 * frames_.size());
    return rf->bytes;
  }
  /** The frame given to begin() is received: drop its own reference. */
  void end() {
    if (current_ != nullptr) unref(current_);
    current_ = nullptr;
  }
  /** FrameSink::hold_frame(): @return the frame being received, or nullptr outside begin/end. */
  void* hold() {
    if (current_ == nullptr) return nullptr;
    ++current_->refs, ++current_->holds, ++holds_, ++taken_;
    return current_;
  }
  /** FrameSink::release_frame(). @return false when @p h is not held (given back twice). */
  bool release(void* h) {
    auto* f = static_cast<Frame*>(h);
    if (holds_ == 0 || f->holds == 0) return false;
    --f->holds, --holds_;
    unref(f);
    return true;
  }
  /** @return holds not given back yet. */
  uint64_t holds() const { return holds_; }
  /** @return holds taken so far. */
  uint64_t taken() const { return taken_; }

 private:
  struct Frame {
    uint32_t refs = 0;
    uint32_t holds = 0;
    std::vector<uint8_t> bytes;
  };
  void unref(Frame* f) {
    if (--f->refs != 0) return;
    std::fill(f->bytes.begin(), f->bytes.end(), uint8_t{0xA5});
    spare_.push_back(f);
  }

  std::deque<Frame> frames_;   ///< every buffer, reused once let go
  std::vector<Frame*> spare_;  ///< those let go
  Frame* current_ = nullptr;
  uint64_t holds_ = 0;
  uint64_t taken_ = 0;
};

}  // namespace imago::test
