// SPDX-License-Identifier: BSD-3-Clause
// Unit tests for dataplane/fault_model.h: rates within statistical bounds, Gilbert-Elliott
// bursts, seeded determinism, delay bounds, and the fault spec parser and formatter.
//
// Every rate bound is 5 standard deviations of the estimator (binomial, geometric or Markov
// chain as noted), so a correct model fails about once in 1.7 million runs while a bias of a
// few percent of the rate fails every time. The seeds are fixed, so runs are reproducible.
#include "dataplane/fault_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace imago::dp {
namespace {

constexpr uint64_t kFrames = 1'000'000;
constexpr double kSigmas = 5.0;

// 5-sigma half-width of a binomial count of @p n trials with probability @p p.
double binomial_tolerance(uint64_t n, double p) {
  return kSigmas * std::sqrt(static_cast<double>(n) * p * (1 - p));
}

FaultCounters run(const FaultConfig& cfg, uint64_t n = kFrames) {
  FaultModel m(cfg);
  for (uint64_t i = 0; i < n; ++i) m.next();
  return m.counters();
}

TEST(FaultModel, NoFaultsLeavesEveryFrameAlone) {
  // Do: run 10000 frames through a default (inactive) model.
  FaultConfig cfg;
  ASSERT_FALSE(cfg.active());
  FaultModel m(cfg);
  for (int i = 0; i < 10000; ++i) {
    FaultVerdict v = m.next();
    // Expect: no drop, dup, corruption, reordering or delay.
    ASSERT_FALSE(v.drop || v.dup || v.corrupt || v.reordered);
    ASSERT_EQ(v.delay_ns, 0u);
  }
  EXPECT_EQ(m.counters().frames_in, 10000u);
  EXPECT_EQ(m.counters().lost() + m.counters().delayed + m.counters().duplicated, 0u);
}

TEST(FaultModel, TenPercentDropWithinFiveSigma) {
  // Do: drop 10% independently over 10^6 frames.
  FaultConfig cfg;
  cfg.drop = 0.1;
  FaultCounters c = run(cfg);
  // Expect: |dropped - 10^5| <= 5 * sqrt(n p (1-p)) = 1500; no burst drops.
  EXPECT_NEAR(static_cast<double>(c.dropped), 1e5, binomial_tolerance(kFrames, 0.1));
  EXPECT_EQ(c.burst_dropped, 0u);
  EXPECT_EQ(c.frames_in, kFrames);
}

TEST(FaultModel, DupCorruptReorderRatesWithinFiveSigma) {
  // Do: duplicate 5%, corrupt 2% and reorder 1% of 10^6 frames, counting the verdicts.
  FaultConfig cfg;
  cfg.dup = 0.05;
  cfg.corrupt = 0.02;
  cfg.reorder = 0.01;
  FaultModel m(cfg);
  uint64_t dup = 0, corrupt = 0, reordered = 0;
  for (uint64_t i = 0; i < kFrames; ++i) {
    FaultVerdict v = m.next();
    dup += v.dup;
    corrupt += v.corrupt;
    reordered += v.reordered;
  }
  // Expect: each count within 5 binomial sigmas, and the counters agree with the verdicts.
  EXPECT_NEAR(static_cast<double>(dup), 5e4, binomial_tolerance(kFrames, 0.05));
  EXPECT_NEAR(static_cast<double>(corrupt), 2e4, binomial_tolerance(kFrames, 0.02));
  EXPECT_NEAR(static_cast<double>(reordered), 1e4, binomial_tolerance(kFrames, 0.01));
  EXPECT_EQ(m.counters().duplicated, dup);
  EXPECT_EQ(m.counters().corrupted, corrupt);
  EXPECT_EQ(m.counters().reordered, reordered);
  EXPECT_EQ(m.counters().lost(), 0u);
}

TEST(FaultModel, DroppedFramesGetNoOtherFault) {
  // Do: combine 50% drop with certain dup, corruption and delay.
  FaultConfig cfg;
  cfg.drop = 0.5;
  cfg.dup = 1;
  cfg.corrupt = 1;
  cfg.delay_us = 10;
  FaultModel m(cfg);
  for (int i = 0; i < 10000; ++i) {
    FaultVerdict v = m.next();
    // Expect: a dropped frame carries no other verdict; every kept one carries all of them.
    if (v.drop) {
      ASSERT_FALSE(v.dup || v.corrupt || v.reordered);
      ASSERT_EQ(v.delay_ns, 0u);
    } else {
      ASSERT_TRUE(v.dup && v.corrupt);
      ASSERT_EQ(v.delay_ns, 10'000u);
    }
  }
  // Expect: frames out = in - lost + duplicated = 2 * kept.
  const FaultCounters& c = m.counters();
  EXPECT_EQ(c.frames_in - c.lost() + c.duplicated, 2 * (c.frames_in - c.dropped));
}

// Gilbert-Elliott with P(good->bad) = a, P(bad->good) = b and certain loss in the bad state.
struct BurstStats {
  double loss;
  double mean_burst;
  uint64_t bursts;
};

BurstStats burst_stats(double a, double b, uint64_t seed) {
  FaultConfig cfg;
  cfg.burst_enter = a;
  cfg.burst_exit = b;
  cfg.burst_drop = 1.0;
  cfg.seed = seed;
  FaultModel m(cfg);
  uint64_t lost = 0, bursts = 0, run = 0;
  for (uint64_t i = 0; i < kFrames; ++i) {
    bool drop = m.next().drop;
    lost += drop;
    if (drop && run++ == 0) ++bursts;
    if (!drop) run = 0;
  }
  EXPECT_EQ(m.counters().burst_dropped, lost);
  return {static_cast<double>(lost) / kFrames, static_cast<double>(lost) / bursts, bursts};
}

TEST(FaultModel, GilbertElliottMeanBurstIsOneOverExit) {
  // Do: run bursts with enter 0.01, exit 0.25 over 10^6 frames.
  const double a = 0.01, b = 0.25;
  BurstStats s = burst_stats(a, b, 42);
  // Expect: mean burst length 1/b = 4. Bursts are geometric (sd sqrt(1-b)/b), so the mean of
  // N bursts has sd sqrt(1-b)/(b sqrt N); about n a b/(a+b) ~ 9600 bursts gives 5 sd ~ 0.18.
  double tol = kSigmas * std::sqrt(1 - b) / (b * std::sqrt(static_cast<double>(s.bursts)));
  EXPECT_NEAR(s.mean_burst, 1 / b, tol);
  // Expect: n/mu bursts, mu = 1/a + 1/b the good+bad cycle. A renewal count has variance
  // n var/mu^3, var = (1-a)/a^2 + (1-b)/b^2 the cycle variance: about 9615 +- 470 here.
  double mu = 1 / a + 1 / b, var = (1 - a) / (a * a) + (1 - b) / (b * b);
  EXPECT_NEAR(static_cast<double>(s.bursts), kFrames / mu,
              kSigmas * std::sqrt(kFrames * var / (mu * mu * mu)));
}

TEST(FaultModel, GilbertElliottLossIsStationaryBadProbability) {
  // Do: run bursts with enter 0.01, exit 0.25 over 10^6 frames.
  const double a = 0.01, b = 0.25;
  BurstStats s = burst_stats(a, b, 7);
  // Expect: loss near pi_bad = a/(a+b). The bad-state indicator is a two-state Markov chain
  // with eigenvalue l = 1-a-b, so the time average has variance pi_b pi_g (1+l)/(1-l) / n.
  double pi_b = a / (a + b), l = 1 - a - b;
  double sd = std::sqrt(pi_b * (1 - pi_b) * (1 + l) / (1 - l) / kFrames);
  EXPECT_NEAR(s.loss, pi_b, kSigmas * sd);
}

TEST(FaultModel, BurstDropZeroLosesNothing) {
  // Do: enter bursts often but lose nothing while bad.
  FaultConfig cfg;
  cfg.burst_enter = 0.5;
  cfg.burst_drop = 0;
  // Expect: no frame is lost.
  EXPECT_EQ(run(cfg, 100000).lost(), 0u);
}

TEST(FaultModel, IdenticalSeedsGiveIdenticalVerdicts) {
  // Do: run two models with every knob on and the same seed.
  FaultConfig cfg{.drop = 0.1, .burst_enter = 0.02, .dup = 0.1, .corrupt = 0.1,
                  .reorder = 0.1, .delay_us = 5, .jitter_us = 100, .seed = 99};
  FaultModel x(cfg), y(cfg);
  for (int i = 0; i < 100000; ++i) {
    FaultVerdict a = x.next(), b = y.next();
    // Expect: every field of every verdict equal.
    ASSERT_EQ(a.drop, b.drop) << i;
    ASSERT_EQ(a.dup, b.dup) << i;
    ASSERT_EQ(a.corrupt, b.corrupt) << i;
    ASSERT_EQ(a.reordered, b.reordered) << i;
    ASSERT_EQ(a.corrupt_pick, b.corrupt_pick) << i;
    ASSERT_EQ(a.delay_ns, b.delay_ns) << i;
  }
}

// Drop decisions of 1000 frames at 50% loss, as a bit string.
std::vector<bool> drop_pattern(uint64_t seed) {
  FaultConfig cfg;
  cfg.drop = 0.5;
  cfg.seed = seed;
  FaultModel m(cfg);
  std::vector<bool> p;
  for (int i = 0; i < 1000; ++i) p.push_back(m.next().drop);
  return p;
}

TEST(FaultModel, DifferentSeedsGiveDifferentVerdicts) {
  // Do: take drop patterns for seeds 0, 1, 2 and 1 again.
  // Expect: equal for equal seeds, different for different ones (even seed 0 is random).
  EXPECT_EQ(drop_pattern(1), drop_pattern(1));
  EXPECT_NE(drop_pattern(0), drop_pattern(1));
  EXPECT_NE(drop_pattern(1), drop_pattern(2));
  EXPECT_NE(drop_pattern(0), std::vector<bool>(1000, false));
}

TEST(FaultModel, DelayAndJitterStayWithinBounds) {
  // Do: delay 100 us with 50 us of jitter over 10^5 frames.
  FaultConfig cfg;
  cfg.delay_us = 100;
  cfg.jitter_us = 50;
  FaultModel m(cfg);
  uint64_t lo = UINT64_MAX, hi = 0;
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    uint64_t d = m.next().delay_ns;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
    sum += static_cast<double>(d);
  }
  // Expect: delays span exactly [100, 150] us (each end has P = 1/51 per frame), mean 125 us
  // (uniform over 51 values: sd 14.7 us, so 5 sd of the mean is 0.24 us); all counted delayed.
  EXPECT_EQ(lo, 100'000u);
  EXPECT_EQ(hi, 150'000u);
  EXPECT_NEAR(sum / 100000, 125'000, 5 * 14'720 / std::sqrt(100000.0));
  EXPECT_EQ(m.counters().delayed, 100000u);
}

TEST(FaultModel, ReorderedFramesAreHeldForReorderUs) {
  // Do: reorder every frame with a 70 us hold on top of a 10 us delay.
  FaultConfig cfg;
  cfg.reorder = 1;
  cfg.reorder_us = 70;
  cfg.delay_us = 10;
  FaultModel m(cfg);
  FaultVerdict v = m.next();
  // Expect: the frame is marked reordered and held 80 us.
  EXPECT_TRUE(v.reordered);
  EXPECT_EQ(v.delay_ns, 80'000u);
}

TEST(FaultModel, CorruptPickIsRandomOnlyForCorruptFrames) {
  // Do: corrupt half the frames.
  FaultConfig cfg;
  cfg.corrupt = 0.5;
  FaultModel m(cfg);
  uint32_t seen_or = 0, seen_and = ~0u;
  for (int i = 0; i < 1000; ++i) {
    FaultVerdict v = m.next();
    if (!v.corrupt) {
      // Expect: clean frames carry no pick.
      ASSERT_EQ(v.corrupt_pick, 0u);
      continue;
    }
    seen_or |= v.corrupt_pick;
    seen_and &= v.corrupt_pick;
  }
  // Expect: over ~500 corrupt frames every pick bit takes both values.
  EXPECT_EQ(seen_or, ~0u);
  EXPECT_EQ(seen_and, 0u);
}

TEST(FaultConfig, ActiveOnlyWhenAKnobChangesTraffic) {
  // Do: turn on one knob at a time.
  // Expect: traffic knobs make the config active; shape knobs and the seed alone do not.
  EXPECT_TRUE((FaultConfig{.drop = 0.1}).active());
  EXPECT_TRUE((FaultConfig{.burst_enter = 0.1}).active());
  EXPECT_TRUE((FaultConfig{.dup = 0.1}).active());
  EXPECT_TRUE((FaultConfig{.corrupt = 0.1}).active());
  EXPECT_TRUE((FaultConfig{.reorder = 0.1}).active());
  EXPECT_TRUE((FaultConfig{.delay_us = 1}).active());
  EXPECT_TRUE((FaultConfig{.jitter_us = 1}).active());
  EXPECT_FALSE((FaultConfig{.burst_exit = 0.9, .burst_drop = 0.5, .reorder_us = 9, .seed = 5})
                   .active());
}

// ---- spec parsing and formatting -------------------------------------------------------

TEST(FaultSpec, ParsesEveryKey) {
  // Do: parse a spec naming every key.
  FaultConfig c;
  std::string err;
  int rc = parse_fault_spec(
      "loss=0.1,burst=0.01,burst-exit=0.3,burst-drop=0.9,dup=0.02,corrupt=0.03,reorder=0.04,"
      "reorder-us=60,delay-us=70,jitter-us=80,seed=12345",
      c, err);
  // Expect: success and each field set.
  ASSERT_EQ(rc, 0) << err;
  EXPECT_DOUBLE_EQ(c.drop, 0.1);
  EXPECT_DOUBLE_EQ(c.burst_enter, 0.01);
  EXPECT_DOUBLE_EQ(c.burst_exit, 0.3);
  EXPECT_DOUBLE_EQ(c.burst_drop, 0.9);
  EXPECT_DOUBLE_EQ(c.dup, 0.02);
  EXPECT_DOUBLE_EQ(c.corrupt, 0.03);
  EXPECT_DOUBLE_EQ(c.reorder, 0.04);
  EXPECT_EQ(c.reorder_us, 60u);
  EXPECT_EQ(c.delay_us, 70u);
  EXPECT_EQ(c.jitter_us, 80u);
  EXPECT_EQ(c.seed, 12345u);
}

TEST(FaultSpec, UnnamedKnobsKeepTheirValues) {
  // Do: parse "dup=0.5" into a config that already has loss and a seed.
  FaultConfig c{.drop = 0.2, .seed = 8};
  std::string err;
  ASSERT_EQ(parse_fault_spec("dup=0.5", c, err), 0);
  // Expect: dup set, the rest untouched.
  EXPECT_DOUBLE_EQ(c.dup, 0.5);
  EXPECT_DOUBLE_EQ(c.drop, 0.2);
  EXPECT_EQ(c.seed, 8u);
}

TEST(FaultSpec, NoneAndEmptyClearEveryKnobButTheSeed) {
  for (const char* spec : {"none", ""}) {
    // Do: parse "none" / "" into an active config.
    FaultConfig c{.drop = 0.2, .delay_us = 3, .seed = 8};
    std::string err;
    ASSERT_EQ(parse_fault_spec(spec, c, err), 0);
    // Expect: inactive, seed kept.
    EXPECT_FALSE(c.active()) << spec;
    EXPECT_EQ(c.seed, 8u) << spec;
  }
}

// Parses @p spec expecting -EINVAL; returns the message and checks the config is untouched.
std::string expect_rejected(const char* spec) {
  FaultConfig c{.drop = 0.25};
  std::string err;
  EXPECT_EQ(parse_fault_spec(spec, c, err), -EINVAL) << spec;
  EXPECT_DOUBLE_EQ(c.drop, 0.25) << spec << ": a failed parse must not half-apply";
  EXPECT_FALSE(err.empty()) << spec;
  return err;
}

TEST(FaultSpec, RejectsUnknownKeyNamingIt) {
  // Do: parse a spec with a misspelt key after a valid one.
  std::string err = expect_rejected("loss=0.5,lose=0.1");
  // Expect: -EINVAL, the message names the key.
  EXPECT_NE(err.find("lose"), std::string::npos) << err;
}

TEST(FaultSpec, RejectsAKeyGivenTwice) {
  // An outside tester: --fault-tx loss=0.1,loss=0.2 ran with 0.2, without a word.
  // Do: parse a spec that gives loss twice.
  std::string err = expect_rejected("loss=0.1,dup=0.01,loss=0.2");
  // Expect: -EINVAL, the message names the key.
  EXPECT_NE(err.find("loss given twice"), std::string::npos) << err;
}

TEST(FaultSpec, SaysWhetherTheSpecSetTheSeed) {
  // --seed beside a spec's seed=N is refused: the parser says which specs set it.
  FaultConfig c;
  std::string err;
  bool seed = true;
  ASSERT_EQ(parse_fault_spec("loss=0.1,reorder=0.2", c, err, &seed), 0);
  EXPECT_FALSE(seed);
  ASSERT_EQ(parse_fault_spec("loss=0.1,seed=9", c, err, &seed), 0);
  EXPECT_TRUE(seed);
  EXPECT_EQ(c.seed, 9u);
  ASSERT_EQ(parse_fault_spec("none", c, err, &seed), 0);
  EXPECT_FALSE(seed);
}

TEST(FaultSpec, RejectsMissingEquals) {
  // Do: parse a bare key.
  std::string err = expect_rejected("loss");
  // Expect: -EINVAL, the message quotes the item.
  EXPECT_NE(err.find("'loss'"), std::string::npos) << err;
}

TEST(FaultSpec, RejectsOutOfRangeAndMalformedValues) {
  for (const char* spec :
       {"loss=1.5", "loss=-0.1", "dup=nan", "corrupt=inf", "reorder=0.1x", "burst=",
        "delay-us=10000001", "jitter-us=-1", "reorder-us=1.5", "seed=-1", "seed=abc"}) {
    // Do: parse a value outside its knob's range or not a number.
    std::string err = expect_rejected(spec);
    // Expect: -EINVAL with a message naming the key.
    std::string key(spec, std::string(spec).find('='));
    EXPECT_NE(err.find(key), std::string::npos) << spec << ": " << err;
  }
}

TEST(FaultSpec, AcceptsRangeEnds) {
  // Do: parse the limits of each kind of value.
  FaultConfig c;
  std::string err;
  ASSERT_EQ(parse_fault_spec("loss=0,dup=1,delay-us=10000000,seed=18446744073709551615", c, err),
            0)
      << err;
  // Expect: stored as given.
  EXPECT_EQ(c.dup, 1.0);
  EXPECT_EQ(c.delay_us, 10'000'000u);
  EXPECT_EQ(c.seed, UINT64_MAX);
}

TEST(FaultSpec, FormatsInactiveAsNone) {
  // Do: format a config with only shape knobs and a seed.
  // Expect: "none".
  EXPECT_EQ(format_fault_spec(FaultConfig{.burst_exit = 0.5, .seed = 3}), "none");
}

TEST(FaultSpec, FormatRoundTripsEveryKnob) {
  // Do: format a config with every knob set to values without a short decimal form, and
  // parse the text into a default config.
  FaultConfig c{.drop = 1.0 / 3, .burst_enter = 0.0123456789, .burst_exit = 2.0 / 7,
                .burst_drop = 0.999999999, .dup = 1e-7, .corrupt = 0.1, .reorder = 0.7,
                .reorder_us = 61, .delay_us = 71, .jitter_us = 81, .seed = UINT64_MAX - 1};
  std::string text = format_fault_spec(c), err;
  FaultConfig back;
  ASSERT_EQ(parse_fault_spec(text, back, err), 0) << text << ": " << err;
  // Expect: every field exactly equal, so a logged spec replays the same run.
  EXPECT_EQ(back.drop, c.drop) << text;
  EXPECT_EQ(back.burst_enter, c.burst_enter) << text;
  EXPECT_EQ(back.burst_exit, c.burst_exit) << text;
  EXPECT_EQ(back.burst_drop, c.burst_drop) << text;
  EXPECT_EQ(back.dup, c.dup) << text;
  EXPECT_EQ(back.corrupt, c.corrupt) << text;
  EXPECT_EQ(back.reorder, c.reorder) << text;
  EXPECT_EQ(back.reorder_us, c.reorder_us);
  EXPECT_EQ(back.delay_us, c.delay_us);
  EXPECT_EQ(back.jitter_us, c.jitter_us);
  EXPECT_EQ(back.seed, c.seed);
}

TEST(FaultSpec, FormatOmitsQualifiersOfOffKnobs) {
  // Do: format loss only, with non-default burst shape and reorder hold.
  FaultConfig c{.drop = 0.5, .burst_exit = 0.5, .reorder_us = 9, .seed = 4};
  // Expect: the qualifiers of the disabled burst and reorder knobs are left out.
  EXPECT_EQ(format_fault_spec(c), "loss=0.5,seed=4");
}

}  // namespace
}  // namespace imago::dp
