package server

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"go.uber.org/dig"
)

// AddressInUseError is a listen address another process holds.
type AddressInUseError struct {
	// Address is the address that could not be bound.
	Address string
	// Flag is the command-line flag that sets it.
	Flag string
	Err  error
}

func (e *AddressInUseError) Error() string {
	return fmt.Sprintf("cannot listen on %s: the address is in use by another process (another vigil, or a temporal dev server?); stop it or choose another with %s",
		e.Address, e.Flag)
}

func (e *AddressInUseError) Unwrap() error { return e.Err }

// DatabaseInUseError is a SQLite database another vigil process has open.
type DatabaseInUseError struct {
	// Path is the database file.
	Path string
	// Holder describes the process holding it, as it wrote it in the lock file ("" if unknown).
	Holder string
}

func (e *DatabaseInUseError) Error() string {
	holder := "another vigil process"
	if e.Holder != "" {
		holder += " (" + e.Holder + ")"
	}
	return fmt.Sprintf("the database %s is in use by %s; stop it, or start this one with another --db-filename", e.Path, holder)
}

// startupError turns what fx returns when a constructor or start hook fails into the error that
// caused it, stripped of fx's and dig's context (which names vigil's internal functions), and
// names the flag to change when it is a listen address in use.
func startupError(err error, cfg Config) error {
	if err == nil {
		return nil
	}
	root := dig.RootCause(err)
	var opErr *net.OpError
	if errors.As(root, &opErr) && opErr.Op == "listen" && errors.Is(root, syscall.EADDRINUSE) {
		address := opErr.Addr.String()
		flag := "--port"
		switch {
		case samePort(address, cfg.Frontend.HTTPAddress):
			flag = "--http-port"
		case samePort(address, cfg.HistoryServer.Address):
			flag = "--history-port"
		}
		return &AddressInUseError{Address: address, Flag: flag, Err: root}
	}
	return root
}

func samePort(a, b string) bool {
	_, pa, errA := net.SplitHostPort(a)
	_, pb, errB := net.SplitHostPort(b)
	return errA == nil && errB == nil && pa == pb && pa != "0"
}

// checkAddressesFree tries the fixed listen addresses before anything else starts, so that a
// port in use stops the start before the database is opened or migrated. The listeners bind
// again when the server is built (which reports the same error if the port is taken in between).
func checkAddressesFree(cfg Config) error {
	for _, address := range []string{cfg.Frontend.Address, cfg.Frontend.HTTPAddress, cfg.HistoryServer.Address} {
		if _, port, err := net.SplitHostPort(address); err != nil || port == "0" || port == "" {
			continue
		}
		lis, err := net.Listen("tcp", address)
		if err != nil {
			return startupError(err, cfg)
		}
		_ = lis.Close()
	}
	return nil
}
