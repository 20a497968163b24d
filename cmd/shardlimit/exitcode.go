package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Exit codes of shardlimit, for scripts. 1 means "differences found", as
// for diff(1) and kubectl diff, so every error exits with more than 1.
// exitCodes documents them for `ctl --help`; the README lists them too.
const (
	exitOK          = 0
	exitChanges     = 1 // ctl rules diff: the stored rules differ from the file
	exitUsage       = 2 // a bad command, flag, argument or environment variable
	exitDenied      = 3 // ctl check: the check was denied
	exitFailed      = 4 // any other error: invalid rules, a call the router refused as invalid
	exitUnavailable = 5 // the router is unreachable, or what answers is not a shardlimit router
	exitRefused     = 6 // the router refused the credentials (unauthenticated, permission denied)
	exitTimeout     = 7 // the deadline passed (--timeout)
)

// exitCodes describes each exit code, in order.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "success (ctl check: allowed; ctl rules diff: no changes)"},
	{exitChanges, "ctl rules diff: the stored rules differ from the file"},
	{exitUsage, "bad command, flag, argument or environment variable"},
	{exitDenied, "ctl check: denied"},
	{exitFailed, "other error (invalid rules, a request the router rejected)"},
	{exitUnavailable, "router unreachable, or not a shardlimit router (check --router)"},
	{exitRefused, "credentials refused: unauthenticated or permission denied"},
	{exitTimeout, "deadline passed (--timeout)"},
}

// exitCodesHelp lists the exit codes for a command's help.
func exitCodesHelp() string {
	var b strings.Builder
	for _, c := range exitCodes {
		fmt.Fprintf(&b, "  %d  %s\n", c.code, c.meaning)
	}
	return b.String()
}

// exitError ends the command with code; err, when not nil, is printed.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withCode makes err end the command with code; a nil err prints nothing.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

// usageErrorf is an error in what the user gave: a flag's or a variable's
// value.
func usageErrorf(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// exitCode maps an error to the process's exit code: the code it was given,
// else by its gRPC status.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if e, ok := errors.AsType[*exitError](err); ok {
		return e.code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return exitTimeout
	}
	if st, ok := status.FromError(err); ok {
		switch st.Code() {
		case codes.Unavailable:
			return exitUnavailable
		case codes.Unauthenticated, codes.PermissionDenied:
			return exitRefused
		case codes.DeadlineExceeded:
			return exitTimeout
		}
	}
	return exitFailed
}

// errorMessage is what the process prints for err: "" for a bare exit
// code, a gRPC status as "Code: message".
func errorMessage(err error) string {
	if e, ok := errors.AsType[*exitError](err); ok && e.err == nil {
		return ""
	}
	if st, ok := status.FromError(err); ok {
		return fmt.Sprintf("%v: %s", st.Code(), st.Message())
	}
	return err.Error()
}
