// Package logtest is a log destination for tests: Buffer collects what a
// component's logger writes while the test reads it from another
// goroutine.
//
// Tests of any package use it (the router's debug logs, membership's lease
// logs). It is test support only: production code must never import it.
package logtest
