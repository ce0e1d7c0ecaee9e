/* SPDX-License-Identifier: BSD-3-Clause */
/* The command table of imago-perf's prompt: one instruction per command, testpmd style. */
#include <cmdline.h>
#include <cmdline_parse.h>
#include <cmdline_parse_string.h>
#include <cmdline_socket.h>
#include <stddef.h>

#include "apps/perf/cli.h"

/* A command of one fixed word: start, stop, quit, help. */
struct cmd_word {
	cmdline_fixed_string_t word;
};

static void cmd_word_parsed(void *parsed, struct cmdline *cl, void *data)
{
	(void)parsed;
	((void (*)(struct cmdline *))data)(cl);
}

static void do_start(struct cmdline *cl) { (void)cl; perf_cli_start(); }
static void do_stop(struct cmdline *cl) { (void)cl; perf_cli_stop(); }
static void do_help(struct cmdline *cl) { (void)cl; perf_cli_help(); }
static void do_wait(struct cmdline *cl) { (void)cl; perf_cli_wait(); }
static void do_quit(struct cmdline *cl) { perf_cli_stop(); cmdline_quit(cl); }

#define WORD_CMD(NAME, HELP)                                                        \
	static cmdline_parse_token_string_t tok_##NAME =                            \
		TOKEN_STRING_INITIALIZER(struct cmd_word, word, #NAME);             \
	static cmdline_parse_inst_t cmd_##NAME = {                                  \
		.f = cmd_word_parsed, .data = (void *)do_##NAME, .help_str = HELP, \
		.tokens = { (void *)&tok_##NAME, NULL },                           \
	}

WORD_CMD(start, "start: begin a run with the current settings");
WORD_CMD(stop, "stop: end the run and print its summary and RESULT line");
WORD_CMD(help, "help: list the commands");
WORD_CMD(wait, "wait: return when the run has finished (for scripts typing at the prompt)");
WORD_CMD(quit, "quit: stop any run and exit");

/* show stats|peers|config */
struct cmd_show {
	cmdline_fixed_string_t show;
	cmdline_fixed_string_t what;
};

static void cmd_show_parsed(void *parsed, struct cmdline *cl, void *data)
{
	(void)cl;
	(void)data;
	perf_cli_show(((struct cmd_show *)parsed)->what);
}

static cmdline_parse_token_string_t tok_show =
	TOKEN_STRING_INITIALIZER(struct cmd_show, show, "show");
static cmdline_parse_token_string_t tok_show_what =
	TOKEN_STRING_INITIALIZER(struct cmd_show, what, "stats#peers#config");
static cmdline_parse_inst_t cmd_show = {
	.f = cmd_show_parsed,
	.help_str = "show stats|peers|config: counters of the run, the nodes, the settings",
	.tokens = { (void *)&tok_show, (void *)&tok_show_what, NULL },
};

/* clear stats */
struct cmd_clear {
	cmdline_fixed_string_t clear;
	cmdline_fixed_string_t stats;
};

static void cmd_clear_parsed(void *parsed, struct cmdline *cl, void *data)
{
	(void)parsed;
	(void)cl;
	(void)data;
	perf_cli_clear_stats();
}

static cmdline_parse_token_string_t tok_clear =
	TOKEN_STRING_INITIALIZER(struct cmd_clear, clear, "clear");
static cmdline_parse_token_string_t tok_clear_stats =
	TOKEN_STRING_INITIALIZER(struct cmd_clear, stats, "stats");
static cmdline_parse_inst_t cmd_clear = {
	.f = cmd_clear_parsed,
	.help_str = "clear stats: zero the port counters",
	.tokens = { (void *)&tok_clear, (void *)&tok_clear_stats, NULL },
};

/* set <key> <value>: the keys are imago-perf's run options (size, burst, rate, mode, ...). */
struct cmd_set {
	cmdline_fixed_string_t set;
	cmdline_fixed_string_t key;
	cmdline_fixed_string_t value;
};

static void cmd_set_parsed(void *parsed, struct cmdline *cl, void *data)
{
	struct cmd_set *r = parsed;

	(void)cl;
	(void)data;
	perf_cli_set(r->key, r->value);
}

static cmdline_parse_token_string_t tok_set =
	TOKEN_STRING_INITIALIZER(struct cmd_set, set, "set");
static cmdline_parse_token_string_t tok_set_key = TOKEN_STRING_INITIALIZER(
	struct cmd_set, key,
	"size#burst#rate#mode#msgs#loss#burst-loss#dup#reorder#corrupt#delay-us#seed#"
	"fault-tx#fault-rx#duration#ping-timeout-us");
static cmdline_parse_token_string_t tok_set_value =
	TOKEN_STRING_INITIALIZER(struct cmd_set, value, NULL);
static cmdline_parse_inst_t cmd_set = {
	.f = cmd_set_parsed,
	.help_str = "set size|burst|rate|mode|msgs|loss|... VALUE: change a run option (when stopped)",
	.tokens = { (void *)&tok_set, (void *)&tok_set_key, (void *)&tok_set_value, NULL },
};

static cmdline_parse_ctx_t main_ctx[] = {
	(cmdline_parse_inst_t *)&cmd_start, (cmdline_parse_inst_t *)&cmd_stop,
	(cmdline_parse_inst_t *)&cmd_show,  (cmdline_parse_inst_t *)&cmd_set,
	(cmdline_parse_inst_t *)&cmd_clear, (cmdline_parse_inst_t *)&cmd_help,
	(cmdline_parse_inst_t *)&cmd_wait,  (cmdline_parse_inst_t *)&cmd_quit, NULL,
};

void perf_cli_prompt(void)
{
	struct cmdline *cl = cmdline_stdin_new(main_ctx, "imago-perf> ");

	if (cl == NULL)
		return;
	cmdline_interact(cl);
	cmdline_stdin_exit(cl);
}
