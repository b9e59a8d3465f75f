// Command relay watches an energy-monitoring Open Data Service for alarms and
// relays each alarm's start and end to NATS, Slack and webhooks.
//
// Usage:
//
//	relay [run]                 the service
//	relay demo [--for D]        everything embedded, nothing to set up
//	relay simulate [--listen A] the Open Data Service simulator alone
//	relay check [--online]      validate environment and rules
//	relay route --alarm FILE    where an alarm record would be routed
//	relay api ENDPOINT [flags]  call one upstream endpoint, print JSON
//	relay deadletters ACTION    list, show, replay or drop dead letters
//	relay silence ACTION        add, list or expire silences
//	relay ack ALARM             acknowledge an alarm (unack, shelve; --list)
//	relay report [--since 7d]   ISA-18.2 figures of the alarms of a period
//	relay schema                print the JSON Schema of the rules file
//	relay version               print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// command runs one subcommand with its arguments and returns the exit code.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) int

func commands() map[string]command {
	return map[string]command{
		"run":         cmdRun,
		"demo":        cmdDemo,
		"simulate":    cmdSimulate,
		"check":       cmdCheck,
		"route":       cmdRoute,
		"api":         cmdAPI,
		"deadletters": cmdDeadLetters,
		"silence":     cmdSilence,
		"ack":         cmdAck,
		"unack":       cmdUnack,
		"shelve":      cmdShelve,
		"report":      cmdReport,
		"schema":      cmdSchema,
		"version":     cmdVersion,
	}
}

const usage = `usage: relay [run | demo | simulate | check | route | api | deadletters | silence | ack | unack | shelve | report | schema | version] [flags]
  run        the service (the default)
  demo       everything embedded: simulator, NATS, webhook receiver, a live feed
  simulate   the Open Data Service simulator on its own
  check      validate environment and rules, print the routing table
  route      which routes and sinks an alarm record would reach
  api        call one of the 11 upstream endpoints and print JSON
  deadletters list, show, replay or drop the running relay's dead letters
  silence    add, list or expire the running relay's silences
  ack        acknowledge an alarm of the running relay; --list shows who acknowledged what
  unack      take an acknowledgement back
  shelve     silence an alarm's point for a while, or until it clears
  report     ISA-18.2 figures of the alarms of a period, from the running relay or a state file
  schema     print the JSON Schema of the rules file, for editors
  version    print the version
Run 'relay COMMAND -h' for a command's flags.
`

// parseFlags parses a subcommand's flags, which take no arguments after
// them. It returns false with the exit code when the command must stop: 0
// after -h, 2 after a bad flag or an unexpected argument.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return 2, false
	}
	return 0, true
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	name := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if name == "help" || name == "run" && len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		// relay -h and relay --help ask about relay, not about run.
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd, ok := commands()[name]
	if !ok {
		fmt.Fprintf(stderr, "relay: unknown command %q\n%s", name, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cmd(ctx, args, stdout, stderr)
}

// parseOneArg parses a subcommand's flags around its one argument, which
// may come before, between or after them. It returns the argument ("" when
// none was given), or false with the exit code when the command must stop:
// 0 after -h, 2 after a bad flag or a second argument.
func parseOneArg(fs *flag.FlagSet, args []string, what string, stderr io.Writer) (string, int, bool) {
	var arg string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", 0, false
			}
			return "", 2, false
		}
		if fs.NArg() == 0 {
			return arg, 0, true
		}
		if arg != "" {
			fmt.Fprintf(stderr, "%s: unexpected argument %q: give one %s\n", fs.Name(), fs.Arg(0), what)
			return "", 2, false
		}
		arg, args = fs.Arg(0), fs.Args()[1:]
	}
}
