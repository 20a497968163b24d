package membership

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Member is the record a shard writes at <prefix>members/<id>.
type Member struct {
	// ID is unique among live members; it names the shard in the ring.
	ID string `json:"id"`
	// Addr is the shard's gRPC address, host:port.
	Addr string `json:"addr"`
	// Zone is the failure domain, free text; may be empty.
	Zone string `json:"zone,omitempty"`
	// Version is the binary's version.
	Version string `json:"version,omitempty"`
	// Started is when the shard's process started.
	Started time.Time `json:"started"`
	// Ready is when the shard was serving and first registered.
	Ready time.Time `json:"ready"`
}

// String returns the ID; it makes Member a consistent.Member.
func (m Member) String() string { return m.ID }

// Key returns the etcd key of a member under prefix.
func Key(prefix, id string) string { return Prefix(prefix) + id }

// Prefix returns the etcd prefix under which members live.
func Prefix(prefix string) string { return strings.TrimSuffix(prefix, "/") + "/members/" }

func (m Member) validate() error {
	switch {
	case m.ID == "":
		return fmt.Errorf("member id: must not be empty")
	case strings.ContainsAny(m.ID, "/ \t\n"):
		return fmt.Errorf("member id %q: must not contain '/' or white space", m.ID)
	case m.Addr == "":
		return fmt.Errorf("member addr: must not be empty")
	}
	return nil
}

func decode(b []byte) (Member, error) {
	var m Member
	if err := json.Unmarshal(b, &m); err != nil {
		return m, err
	}
	return m, m.validate()
}
