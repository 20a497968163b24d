package clustertest

import (
	"fmt"
	"os"
	"testing"
)

// ExampleTB returns a testing.TB for a testable Example, which is given
// none, so that it can start a real cluster with New: Cleanup functions
// run, last first, when done is called; TempDir makes a directory that
// done removes; Fatal, Fatalf and Errorf panic, which fails the example.
// It implements what the harness calls (Helper, Name, Cleanup, TempDir,
// Fatal, Fatalf, Errorf, Logf); any other method panics.
func ExampleTB(name string) (tb testing.TB, done func()) {
	e := &exampleTB{name: name}
	return e, e.done
}

type exampleTB struct {
	testing.TB // nil: methods not below are not for examples
	name       string
	cleanups   []func()
}

func (e *exampleTB) Helper()                   {}
func (e *exampleTB) Name() string              { return e.name }
func (e *exampleTB) Cleanup(f func())          { e.cleanups = append(e.cleanups, f) }
func (e *exampleTB) Logf(string, ...any)       {}
func (e *exampleTB) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (e *exampleTB) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleTB) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func (e *exampleTB) TempDir() string {
	dir, err := os.MkdirTemp("", "shardlimit-example-")
	if err != nil {
		panic(err)
	}
	e.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (e *exampleTB) done() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}
