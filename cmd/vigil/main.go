// Command vigil is the vigil server and its operator tools.
//
//	vigil server start [flags]          run frontend and history in one process
//	vigil worker list [flags]           the liveness view of a namespace's workers
//	vigil worker describe KEY [flags]   one worker's liveness record
//	vigil cluster describe [flags]      the vigil hosts of a cluster and their shards
//	vigil apikey create|list|revoke     manage API keys (admin)
//	vigil worker watch [flags]          the workers' changes, live
//	vigil version
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stdout)
		return 0
	}
	switch args[0] {
	case "version":
		fmt.Fprintf(stdout, "vigil %s\n", version)
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	case "server":
		if len(args) > 1 && args[1] == "start" {
			return serverStart(args[2:], stdout, stderr)
		}
	case "bench":
		return benchCmd(args[1:], stdout, stderr)
	case "cluster":
		if len(args) > 1 && args[1] == "describe" {
			return clusterDescribe(args[2:], stdout, stderr)
		}
	case "apikey":
		return apikeyCmd(args[1:], stdout, stderr)
	case "tasktoken":
		return tasktokenCmd(args[1:], stdout, stderr)
	case "activity":
		return activityCmd(args[1:], stdout, stderr)
	case "worker":
		if len(args) > 1 {
			switch args[1] {
			case "list":
				return workerList(args[2:], stdout, stderr)
			case "describe":
				return workerDescribe(args[2:], stdout, stderr)
			case "watch":
				ctx, stop := signalContext()
				defer stop()
				return workerWatch(ctx, args[2:], stdout, stderr)
			}
		}
	}
	fmt.Fprintf(stderr, "vigil: unknown command %q\n\n", strings.Join(args, " "))
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `vigil: a Temporal-compatible server that knows which workers are alive.

Usage:
  vigil server start [flags]          run the server (vigil server start -h for flags)
  vigil worker list [flags]           list workers with their liveness (ACTIVE, INACTIVE, CLEANED_UP)
  vigil worker describe KEY [flags]   show one worker's liveness record
  vigil activity list [--query Q]     list standalone activities (ActivityId, TaskQueue, ExecutionStatus, ...)
  vigil activity describe ID          show a standalone activity (state, attempt, worker, options)
  vigil activity cancel ID            request a standalone activity's cancellation
  vigil activity terminate ID         terminate a standalone activity at once
  vigil cluster describe [flags]      list the cluster's vigil hosts, their addresses and shards
  vigil apikey create --namespace NS --role ROLE   mint an API key (admin); prints the key alone
  vigil apikey list | revoke ID       list API keys, or revoke one at once on every host
  vigil tasktoken rotate              sign task tokens with a new cluster key (cluster admin)
  vigil worker watch [flags]          print worker changes live (--query Q, --output json)
  vigil bench [flags]                 drive a running server like an SDK fleet and measure it
  vigil version                       print the version
`)
}
