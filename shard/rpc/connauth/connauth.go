// Package connauth carries, in a gRPC connection's context, the mark that
// it has authenticated: package auth's interceptor sets it on every call
// whose caller it identified, and package rpc's connection bound reads it
// for --auth-timeout (rpc.Limits.AuthTimeout). It is the one thing the two
// share, apart so that neither imports the other (package creds, which rpc's
// tests use, imports auth). It must hold nothing else.
package connauth

import "context"

// Conn is a connection that can be marked authenticated.
type Conn interface {
	// Authenticated marks the connection as authenticated; cheap and safe
	// to call on every call, from any goroutine.
	Authenticated()
}

type key struct{}

// NewContext returns ctx carrying the connection c.
func NewContext(ctx context.Context, c Conn) context.Context {
	return context.WithValue(ctx, key{}, c)
}

// FromContext returns the connection ctx carries, or nil.
func FromContext(ctx context.Context) Conn {
	c, _ := ctx.Value(key{}).(Conn)
	return c
}

// Authenticated marks the connection of a call's ctx as authenticated; a
// call on a connection that nothing watches is left alone.
func Authenticated(ctx context.Context) {
	if c := FromContext(ctx); c != nil {
		c.Authenticated()
	}
}
