// Command tenure is the command-line tool of the tenure leader-election
// library.
//
// Usage:
//
//	tenure sim [flags]     run the deterministic simulator (tenure sim -h)
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: tenure <command> [flags]

commands:
  sim    run the deterministic simulator over named fault scenarios
`

// run executes the command line args and returns the exit status: 0 for
// success, 1 when a simulation found a violation, 2 for a usage error.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "sim":
		return simCommand(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "tenure: unknown command %q\n%s", args[0], usage)
	return 2
}
