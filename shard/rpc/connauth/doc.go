// Package connauth carries, in a gRPC connection's context, the mark that
// it has authenticated: package auth's interceptor sets it on every call
// whose caller it identified, and package rpc's connection bound reads it
// for --auth-timeout (rpc.Limits.AuthTimeout). It is the one thing the two
// share, apart so that neither imports the other (package creds, which rpc's
// tests use, imports auth). It must hold nothing else.
package connauth
