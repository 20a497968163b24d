package creds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc/credentials"
)

// TokenFile is a bearer token kept in a file (a Kubernetes secret, or what
// `shardlimit ctl grants token create` wrote), read again when the file
// changes, so that a rotated token is sent from the next call on.
type TokenFile struct {
	path string
	w    *watched[string]
}

// NewTokenFile reads the token in path: the file's content without
// surrounding white space. It fails if the file is missing or empty.
func NewTokenFile(path string) (*TokenFile, error) {
	w, err := watch(func() (string, error) { return readToken(path) }, path)
	if err != nil {
		return nil, err
	}
	return &TokenFile{path: path, w: w}, nil
}

func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	switch {
	case t == "":
		return "", fmt.Errorf("%s: empty: want a bearer token", path)
	case strings.ContainsAny(t, " \t\r\n"):
		return "", fmt.Errorf("%s: holds more than one word: want a bearer token", path)
	}
	return t, nil
}

// Token returns the token the file holds now.
func (t *TokenFile) Token(context.Context) (string, error) { return t.w.get(), nil }

// TokenFunc returns a bearer token for a call.
type TokenFunc func(ctx context.Context) (string, error)

// PerRPC returns gRPC call credentials that send token as
// "authorization: Bearer <token>" with every call, only over TLS.
func PerRPC(token TokenFunc) credentials.PerRPCCredentials { return perRPC(token) }

type perRPC TokenFunc

func (p perRPC) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	t, err := p(ctx)
	if err != nil {
		return nil, err
	}
	if t == "" {
		return nil, errors.New("empty bearer token")
	}
	return map[string]string{"authorization": "Bearer " + t}, nil
}

func (perRPC) RequireTransportSecurity() bool { return true }

// StaticToken returns a TokenFunc that always returns token.
func StaticToken(token string) TokenFunc {
	return func(context.Context) (string, error) { return token, nil }
}
