package creds

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// EnvConfig is the environment variable that names a client config file:
// `shardlimit ctl` and the Go client (router/client) read their router and
// credentials from it when given none. `shardlimit dev` writes one and
// prints the export line.
const EnvConfig = "SHARDLIMIT_CONFIG"

// ClientConfig is a client config file: where the router is and the
// credentials to call it with. Keys are ctl's global flags in snake case;
// relative paths are relative to the file's directory.
type ClientConfig struct {
	// Router is the router's gRPC address, host:port.
	Router string `yaml:"router,omitempty"`
	// TLSCA verifies the router's certificate.
	TLSCA string `yaml:"tls_ca,omitempty"`
	// TLSCert and TLSKey are the caller's client certificate, if any.
	TLSCert string `yaml:"tls_cert,omitempty"`
	TLSKey  string `yaml:"tls_key,omitempty"`
	// TLSServerName is the name verified in the router's certificate
	// instead of the host dialed.
	TLSServerName string `yaml:"tls_server_name,omitempty"`
	// TokenFile holds a bearer token sent with every call, if any.
	TokenFile string `yaml:"token_file,omitempty"`
}

// LoadClientConfig reads a client config file; unknown keys are errors.
func LoadClientConfig(path string) (ClientConfig, error) {
	var c ClientConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	for _, p := range []*string{&c.TLSCA, &c.TLSCert, &c.TLSKey, &c.TokenFile} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	return c, nil
}

// Write writes the config to path (mode 0600), replacing it whole.
func (c ClientConfig) Write(path string) error {
	b, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	return WriteFile(path, append([]byte("# shardlimit client config: export "+EnvConfig+"="+path+"\n"), b...), 0o600)
}

// Flags returns the config's values by ctl flag name (tls-ca, ...),
// leaving out the empty ones.
func (c ClientConfig) Flags() map[string]string {
	out := map[string]string{}
	for name, v := range map[string]string{
		"router": c.Router, "tls-ca": c.TLSCA, "tls-cert": c.TLSCert, "tls-key": c.TLSKey,
		"tls-server-name": c.TLSServerName, "token-file": c.TokenFile,
	} {
		if v != "" {
			out[name] = v
		}
	}
	return out
}

// TLS returns the config's client TLS config (reloading its files), or
// nil when it names no CA and no certificate.
func (c ClientConfig) TLS() (*tls.Config, error) {
	if c.TLSCA == "" && c.TLSCert == "" && c.TLSKey == "" {
		return nil, nil
	}
	return ClientTLS(Files{Cert: c.TLSCert, Key: c.TLSKey, CA: c.TLSCA}, c.TLSServerName)
}

// Token returns the config's token source, or nil when it names no token
// file.
func (c ClientConfig) Token() (TokenFunc, error) {
	if c.TokenFile == "" {
		return nil, nil
	}
	t, err := NewTokenFile(c.TokenFile)
	if err != nil {
		return nil, err
	}
	return t.Token, nil
}

// FromEnv loads the client config file named by $SHARDLIMIT_CONFIG; ok is
// false when the variable is unset or empty.
func FromEnv() (c ClientConfig, ok bool, err error) {
	path := os.Getenv(EnvConfig)
	if path == "" {
		return c, false, nil
	}
	c, err = LoadClientConfig(path)
	if err != nil {
		return c, true, fmt.Errorf("%s: %w", EnvConfig, err)
	}
	return c, true, nil
}
