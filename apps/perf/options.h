/* SPDX-License-Identifier: BSD-3-Clause */
/**
 * @file
 * imago-perf's option table (testpmd's parameters.c): one entry per option with its help,
 * its default and its parser, so --help and parsing never disagree.
 */
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "apps/perf/perf.h"

namespace imago::perf {

/**
 * Parse the app arguments (after EAL's) into @p opt.
 * @return 0; 1 when --help was printed; -EINVAL with @p err set for a bad option.
 */
int parse_options(const std::vector<std::string>& args, Options& opt, std::string& err);

/** Print usage with every option and its default to stdout. */
void print_usage(const char* prog);

/** @return the names of the options @p args (the app arguments) gives, whatever their
 *  values: what a run must refuse when it would not read them. */
std::vector<std::string> given_options(const std::vector<std::string>& args);

/** @return every option's name and current value, in table order. */
std::vector<std::pair<std::string, std::string>> option_values(const Options& opt);

}  // namespace imago::perf
