// SPDX-License-Identifier: BSD-3-Clause
// The option-table machinery and the protocol rows every program shares.
#include "dataplane/option_table.h"

#include <gtest/gtest.h>

#include "dataplane/protocol_options.h"
#include "dataplane/redundancy_options.h"

namespace imago::dp {
namespace {

struct Opts {
  uint32_t n = 7;
  bool flag = false;
  ProtocolOptions protocol;
  RedundancyOptions redundancy;
};

OptionTable<Opts> table() {
  OptionTable<Opts> t = {
      {"n", "N", "a number, 1..100", [](Opts& o, const std::string& v) { return parse_num<uint32_t>(v, o.n, 1, 100); },
       [](const Opts& o) { return std::to_string(o.n); }},
      {"flag", nullptr, "a flag", [](Opts& o, const std::string&) { return o.flag = true; }},
  };
  add_protocol_rows(t, &Opts::protocol);
  add_redundancy_rows(t, &Opts::redundancy);
  return t;
}

int parse(std::vector<std::string> args, Opts& o, std::string* err) { return parse_option_table(table(), args, o, err); }

TEST(OptionTable, ValuesComeSpacedOrAfterAnEqualsSign) {
  Opts o;
  std::string err;
  EXPECT_EQ(parse({"--n", "5", "--flag"}, o, &err), 0);
  EXPECT_EQ(o.n, 5u);
  EXPECT_TRUE(o.flag);
  EXPECT_EQ(parse({"--n=9"}, o, &err), 0);
  EXPECT_EQ(o.n, 9u);
}

TEST(OptionTable, BadInputIsRefusedWithAReason) {
  Opts o;
  std::string err;
  for (auto args : std::vector<std::vector<std::string>>{
           {"--nope"}, {"n", "5"}, {"--n"}, {"--n", "0"}, {"--n", "101"}, {"--n", "5x"}, {"--flag=1"}, {"-"}}) {
    err.clear();
    EXPECT_EQ(parse(args, o, &err), -EINVAL) << args[0];
    EXPECT_FALSE(err.empty()) << args[0];
  }
  EXPECT_EQ(o.n, 7u);  // nothing half-set
  EXPECT_EQ(parse({"--n", "5", "-h"}, o, &err), 1);
}

TEST(OptionTable, ABadValueIsToldWithWhatTheOptionTakes) {
  Opts o;
  std::string err;
  EXPECT_EQ(parse({"--n", "101"}, o, &err), -EINVAL);
  EXPECT_EQ(err, "bad value '101' for --n N: a number, 1..100");
}

TEST(OptionTable, AValueGivenTwiceIsRefusedUnlessTheOptionRepeats) {
  const std::vector<std::string> args = {"--n", "5", "--flag", "--n", "6", "--flag"};
  const std::vector<std::string> given = given_options(table(), args);
  std::string err;
  // Do: --n twice (a value each), --flag twice (says one thing).
  EXPECT_EQ(refuse_repeats(table(), given, {}, &err), -EINVAL);
  EXPECT_EQ(err, "--n given twice: it takes one value");
  EXPECT_EQ(refuse_repeats(table(), given, {"n", "flag"}, &err), 0);
  EXPECT_EQ(refuse_repeats(table(), given_options(table(), {"--n", "5", "--flag", "--flag"}), {}, &err), 0);
  EXPECT_EQ(refuse_repeats(table(), given, {"flag"}, &err), -EINVAL);
  EXPECT_EQ(err, "--n given twice: it takes one value (only --flag repeats)");
}

TEST(OptionTable, ParsersTakeWholeValuesOnly) {
  uint32_t ip = 0;
  EXPECT_TRUE(parse_ipv4("10.0.0.7", ip));
  EXPECT_EQ(ip, 0x0A000007u);
  EXPECT_FALSE(parse_ipv4("10.0.0", ip));
  EXPECT_EQ(format_ipv4(ip), "10.0.0.7");
  MacAddr m{};
  EXPECT_TRUE(parse_mac("02:00:00:00:00:0a", m));
  EXPECT_EQ(format_mac(m), "02:00:00:00:00:0a");
  EXPECT_FALSE(parse_mac("02:00:00:00:00:100", m));
  EXPECT_FALSE(parse_mac("02:00:00:00:00:0a:", m));
  double d = 0;
  EXPECT_TRUE(parse_num(std::string("0.25"), d, 0.0, 1.0));
  EXPECT_FALSE(parse_num(std::string("nan"), d, 0.0, 1.0));
  EXPECT_EQ(format_num(0.1), "0.1");
}

TEST(Parsers, APeerIsAnIdAndMaybeAnAddress) {
  uint64_t id = 0;
  MacAddr mac{};
  uint32_t ip = 0;
  EXPECT_TRUE(parse_peer("2@02:00:00:00:00:0a", id, mac, ip));
  EXPECT_EQ(id, 2u);
  EXPECT_EQ(format_mac(mac), "02:00:00:00:00:0a");
  EXPECT_EQ(ip, 0u);
  EXPECT_TRUE(parse_peer("4294967295@10.0.0.1", id, mac, ip));
  EXPECT_EQ(id, 4294967295u);
  EXPECT_EQ(format_ipv4(ip), "10.0.0.1");
  EXPECT_TRUE(parse_peer("7", id, mac, ip));
  EXPECT_EQ(id, 7u);
  // A peer behind a router: its IP, and the MAC of the next hop its frames go to.
  mac = MacAddr{}, ip = 0;
  EXPECT_TRUE(parse_peer("3@10.0.2.2@02:00:00:00:00:01", id, mac, ip));
  EXPECT_EQ(id, 3u);
  EXPECT_EQ(format_ipv4(ip), "10.0.2.2");
  EXPECT_EQ(format_mac(mac), "02:00:00:00:00:01");
  for (const char* bad : {"0", "4294967296", "-1", "2@", "2@02:00:00:00:00", "2@10.0.0", "@10.0.0.1", "x@10.0.0.1", "",
                          "2@10.0.0.1@", "2@02:00:00:00:00:01@10.0.0.1", "2@10.0.0.1@10.0.0.2", "2@10.0.0.1@02:00:00:00:00:01@x"})
    EXPECT_FALSE(parse_peer(bad, id, mac, ip)) << bad;
}

TEST(ProtocolOptions, DefaultsAreTheFastLinkPresetAndRowsSetNanoseconds) {
  Opts o;
  std::string err;
  const rel::Config preset = rel::fast_link_preset();
  EXPECT_EQ(o.protocol.engine.ack_delay_ns, preset.ack_delay_ns);
  EXPECT_EQ(o.protocol.engine.recv_window, o.protocol.engine.send_window);
  EXPECT_TRUE(o.protocol.engine.delay_cap);
  ASSERT_EQ(parse({"--mtu", "9000", "--go-back-n", "--no-flow-control", "--no-delay-cap", "--no-crc", "--ack-delay-us", "100",
                   "--rto-min-us", "300", "--rto-max-ms", "50", "--dead-after-ms", "700"},
                  o, &err),
            0)
      << err;
  const rel::Config& c = o.protocol.engine;
  EXPECT_EQ(o.protocol.mtu, 9000u);
  EXPECT_FALSE(c.selective_repeat);
  EXPECT_FALSE(c.flow_control);
  EXPECT_FALSE(c.delay_cap);
  EXPECT_FALSE(c.crc);
  EXPECT_EQ(c.ack_delay_ns, 100 * rel::kUs);
  EXPECT_EQ(c.rto_min_ns, 300 * rel::kUs);
  EXPECT_EQ(c.rto_max_ns, 50 * rel::kMs);
  EXPECT_EQ(c.dead_after_ns, 700 * rel::kMs);
  EXPECT_EQ(check_protocol(o.protocol, &err), 0);
}

TEST(ProtocolOptions, ArgsGiveAnotherProgramTheSameSettings) {
  Opts o, back;
  std::string err;
  EXPECT_TRUE(protocol_args(o.protocol).empty());  // the defaults need no option
  ASSERT_EQ(parse({"--mtu", "9000", "--go-back-n", "--no-crc", "--ack-delay-us", "100", "--rto-max-ms", "50"}, o, &err), 0);
  std::vector<std::string> args = protocol_args(o.protocol);
  EXPECT_EQ(args.size(), 5u);
  ASSERT_EQ(parse(args, back, &err), 0) << err;
  EXPECT_EQ(protocol_args(back.protocol), args);
  EXPECT_EQ(back.protocol.mtu, 9000u);
  EXPECT_FALSE(back.protocol.engine.selective_repeat);
  EXPECT_FALSE(back.protocol.engine.crc);
  EXPECT_TRUE(back.protocol.engine.flow_control);
  EXPECT_EQ(back.protocol.engine.ack_delay_ns, 100 * rel::kUs);
  EXPECT_TRUE(is_protocol_option("rto-min-us"));
  EXPECT_FALSE(is_protocol_option("iface"));
}

TEST(ProtocolOptions, AnRtoAtOrBelowTheAckDelayIsRefused) {
  Opts o;
  std::string err;
  ASSERT_EQ(parse({"--ack-delay-us", "5000"}, o, &err), 0);
  EXPECT_EQ(check_protocol(o.protocol, &err), -EINVAL);  // the preset's 2 ms minimum RTO
  ASSERT_EQ(parse({"--rto-min-us", "6000", "--rto-max-ms", "5"}, o, &err), 0);
  EXPECT_EQ(check_protocol(o.protocol, &err), -EINVAL);  // min above max
  Opts fresh;
  ASSERT_EQ(parse({"--rto-max-ms", "5"}, fresh, &err), 0);
  EXPECT_EQ(check_protocol(fresh.protocol, &err), -EINVAL);  // below the preset's first RTO, 10 ms
  EXPECT_EQ(parse({"--mtu", "575"}, o, &err), -EINVAL);
}


TEST(RedundancyOptions, EveryModeAndOffAsTheHelpSays) {
  Opts o;
  std::string err;
  // Do: each mode, then "off" (what the table shows for one network). Expect: each taken, and
  // shown back as given; anything else refused.
  for (const char* mode : {"active-standby", "duplicate", "ping-pong"}) {
    ASSERT_EQ(parse({"--redundancy", mode}, o, &err), 0) << mode << ": " << err;
    EXPECT_TRUE(o.redundancy.on);
    EXPECT_STREQ(rel::red::mode_name(o.redundancy.cfg.mode), mode);
  }
  ASSERT_EQ(parse({"--redundancy", "off"}, o, &err), 0) << err;
  EXPECT_FALSE(o.redundancy.on);
  const OptionTable<Opts> t = table();
  const OptionRow<Opts>* row = find_option(t, "redundancy");
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->show(o), "off");
  EXPECT_EQ(parse({"--redundancy", "both"}, o, &err), -EINVAL);
}

}  // namespace
}  // namespace imago::dp
