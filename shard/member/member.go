package member

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Member is one live shard.
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
	// State is where the member is in its life: joining, serving or
	// draining. Only serving members own partitions; "" (a record written
	// before states existed) is serving.
	State State `json:"state,omitempty"`
}

// State is a member's place in its life.
type State string

const (
	// Joining: registered, taking over the counters of the partitions it
	// will own; owns nothing yet.
	Joining State = "joining"
	// Serving: owns partitions and decides their checks.
	Serving State = "serving"
	// Draining: stopping; has handed its partitions to their next owners,
	// owns nothing, and deregisters soon.
	Draining State = "draining"
)

// Serving reports whether the member owns partitions: routers route to it
// and the owner function places partitions on it.
func (m Member) Serving() bool { return m.State == "" || m.State == Serving }

// String returns the member's id; the consistent ring names members by it.
func (m Member) String() string { return m.ID }

// Validate names the first field that makes m unusable as a record.
func (m Member) Validate() error {
	switch {
	case m.ID == "":
		return fmt.Errorf("member id: must not be empty")
	case strings.ContainsAny(m.ID, "/ \t\n"):
		return fmt.Errorf("member id %q: must not contain '/' or white space", m.ID)
	case m.Addr == "":
		return fmt.Errorf("member addr: must not be empty")
	case m.State != "" && m.State != Joining && m.State != Serving && m.State != Draining:
		return fmt.Errorf("member state %q: not one of joining, serving, draining", m.State)
	}
	return nil
}

// Encode returns the stored form of a valid member record.
func Encode(m Member) ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// Decode parses a stored record stored under id and validates it: a record
// whose id differs from the key it is stored under is malformed.
func Decode(id string, b []byte) (Member, error) {
	var m Member
	if err := json.Unmarshal(b, &m); err != nil {
		return Member{}, fmt.Errorf("member %q: %w", id, err)
	}
	if err := m.Validate(); err != nil {
		return Member{}, err
	}
	if m.ID != id {
		return Member{}, fmt.Errorf("member %q: record names id %q", id, m.ID)
	}
	return m, nil
}
