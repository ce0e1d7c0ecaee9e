// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/eal_args.h"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <string>

namespace imago::dp {

ArgSplit split_args(int argc, const char* const* argv) {
  ArgSplit s;
  if (argc > 0 && argv[0]) s.prog = argv[0];
  int dash = -1;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      dash = i;
      break;
    }
  }
  s.explicit_eal = dash > 0;
  int app_from = s.explicit_eal ? dash + 1 : 1;
  if (s.explicit_eal) s.eal.assign(argv + 1, argv + dash);
  for (int i = app_from; i < argc; ++i) s.app.emplace_back(argv[i]);
  return s;
}

const char* iface_pmd_name(IfacePmd p) { return p == IfacePmd::kAfXdp ? "af_xdp" : "af_packet"; }

bool parse_iface_pmd(const std::string& s, IfacePmd& out) {
  if (s != "af_packet" && s != "af_xdp") return false;
  out = s == "af_xdp" ? IfacePmd::kAfXdp : IfacePmd::kAfPacket;
  return true;
}

std::string duplicate_vdev(const std::vector<std::string>& eal_args) {
  std::vector<std::string> seen;  // the whole --vdev values, in order
  for (size_t i = 0; i < eal_args.size(); ++i) {
    const std::string& a = eal_args[i];
    std::string v;
    if (a.rfind("--vdev=", 0) == 0) v = a.substr(7);
    else if (a == "--vdev" && i + 1 < eal_args.size()) v = eal_args[++i];
    else continue;
    const std::string name = v.substr(0, v.find(','));
    const std::string kind = name.substr(0, name.find_last_not_of("0123456789") + 1);
    for (const auto& s : seen)
      if (s.substr(0, s.find(',')) == name)
        return "--vdev " + name + " given twice (" + s + " and " + v + "): DPDK would keep the last and drop " +
               "the other; give each device its own name (" + kind + "0, " + kind + "1, ...)";
    seen.push_back(v);
  }
  return "";
}

std::string iface_vdev(IfacePmd pmd, const std::string& iface, unsigned index) {
  return std::string("net_") + iface_pmd_name(pmd) + std::to_string(index) + ",iface=" + iface;
}

std::vector<std::string> default_eal_args(const EalDefaults& d, int pid) {
  std::vector<std::string> a;
  if (d.shared) {
    a = {"--proc-type=primary"};
  } else {
    a = {"--no-huge", "-m", std::to_string(d.memory_mb), "--no-shconf"};
  }
  a.push_back("--no-pci");
  // Virtual devices only (no PCI): nothing does DMA by physical address, and with IOVA as VA a
  // pool of big objects needs memory contiguous in VA only, not physically contiguous
  // hugepages (which the kernel rarely gives beyond one page: --max-message above 2 MiB
  // failed on a machine with 1.9 GiB of free hugepages).
  a.push_back("--iova-mode=va");
  if (!d.telemetry) a.push_back("--no-telemetry");
  a.push_back("--file-prefix");
  a.push_back(d.file_prefix.empty() ? "imago-" + std::to_string(pid) : d.file_prefix);
  if (!d.lcores.empty()) {
    // A map (lcore@cpus) is EAL's --lcores; a plain list its -l.
    a.push_back(d.lcores.find('@') != std::string::npos ? "--lcores" : "-l");
    a.push_back(d.lcores);
  }
  for (const auto& v : d.vdevs) a.push_back("--vdev=" + v);
  if (!d.log_level.empty()) a.push_back("--log-level=" + d.log_level);
  return a;
}

unsigned sweep_dead_runtime_dirs(const std::string& parent) {
  unsigned n = 0;
  std::error_code ec;  // best effort
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("imago-", 0) != 0 || name.size() == 6 || name.size() > 16) continue;
    if (name.find_first_not_of("0123456789", 6) != std::string::npos) continue;
    const long pid = std::stol(name.substr(6));
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH && std::filesystem::remove_all(e.path(), ec) > 0)
      ++n;
  }
  return n;
}

}  // namespace imago::dp
