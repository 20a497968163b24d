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
