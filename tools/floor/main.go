// Command vigil-floor is the floor of what a Temporal-style server can spend per SDK heartbeat
// on a given machine: a gRPC server with just enough of WorkflowService for `vigil bench --api
// public` (DescribeNamespace, GetSystemInfo, RecordWorkerHeartbeat, ShutdownWorker) that
// decodes each heartbeat and answers it, storing nothing; or, with -store sqlite, upserts each
// worker's last heartbeat into SQLite through a group commit and answers only once it is
// durable. Whatever vigil spends per heartbeat above the first is its own work, and above the
// second is its work beyond the write a durable server cannot avoid. See README.md.
//
//	vigil-floor -address 127.0.0.1:17235
//	vigil-floor -address 127.0.0.1:17235 -store sqlite -db /tmp/floor.db
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "vigil-floor:", err)
		os.Exit(1)
	}
}

func run() error {
	address := flag.String("address", "127.0.0.1:17235", "listen address (loopback only)")
	namespace := flag.String("namespace", "default", "the one namespace served")
	store := flag.String("store", "none", "none: answer every heartbeat without storing it; sqlite: upsert each worker's heartbeat into -db through a group commit before answering; sqlite-log: append it to a log in -db instead, folded into the table every -fold-every")
	db := flag.String("db", "", "with -store sqlite: the database file (created; required)")
	window := flag.Duration("commit-window", 5*time.Millisecond, "with -store sqlite or sqlite-log: how long a group commit collects writes after its first one")
	foldEvery := flag.Duration("fold-every", 10*time.Second, "with -store sqlite-log: how often the log is folded into the table")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if err := checkLoopback(*address); err != nil {
		return err
	}

	srv := &server{namespace: *namespace}
	switch *store {
	case "none":
	case "sqlite", "sqlite-log":
		if *db == "" {
			return fmt.Errorf("-store %s needs -db FILE", *store)
		}
		if *window <= 0 {
			return errors.New("-commit-window must be positive")
		}
		fold := time.Duration(0)
		if *store == "sqlite-log" {
			if *foldEvery <= 0 {
				return errors.New("-fold-every must be positive")
			}
			fold = *foldEvery
		}
		s, err := openSQLite(*db, *window, fold)
		if err != nil {
			return err
		}
		defer s.Close()
		srv.store = s
	default:
		return fmt.Errorf("-store %q: want none, sqlite or sqlite-log", *store)
	}

	lis, err := net.Listen("tcp", *address)
	if err != nil {
		return err
	}
	g := newGRPCServer(srv)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		g.GracefulStop()
	}()
	fmt.Printf("floor listening on %s (store %s)\n", lis.Addr(), *store)
	return g.Serve(lis)
}

// checkLoopback refuses a listen address off loopback: the floor is an instrument for load
// tests on this machine, not a server to expose.
func checkLoopback(hostPort string) error {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return fmt.Errorf("address %q: %w", hostPort, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("address %q: only loopback addresses are served", hostPort)
	}
	return nil
}
