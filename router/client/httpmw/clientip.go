package httpmw

import (
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP returns the address of the client that sent r.
//
// It is the connection's peer (r.RemoteAddr) unless that peer is in
// trusted. Then header ("X-Forwarded-For", "Forwarded", or another header
// of comma-separated addresses; every line of it, in order) is read from the
// right, the hop nearest to us, and the first address that is not trusted
// is the client: hops left of it were reported by the client itself and
// may be forged. If every hop is trusted, the left-most is the client. A
// hop that is not an address ("unknown", an obfuscated RFC 7239 node, a
// Forwarded element without for=) ends the walk: the last trusted hop
// before it is the client, as nothing it reported can be believed.
//
// ok is false only when RemoteAddr holds no IP address.
func ClientIP(r *http.Request, trusted []netip.Prefix, header string) (ip netip.Addr, ok bool) {
	peer, ok := parseNode(r.RemoteAddr)
	if !ok {
		return netip.Addr{}, false
	}
	if !isTrusted(peer, trusted) {
		return peer, true
	}
	var hops []string
	if strings.EqualFold(header, "Forwarded") {
		hops = forwardedFor(r.Header.Values("Forwarded"))
	} else {
		for _, line := range r.Header.Values(header) {
			for h := range strings.SplitSeq(line, ",") {
				hops = append(hops, strings.TrimSpace(h))
			}
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseNode(hops[i])
		if !ok {
			return client, true
		}
		client = a
		if !isTrusted(a, trusted) {
			return a, true
		}
	}
	return client, true
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseNode parses an address with or without a port: "192.0.2.1",
// "192.0.2.1:80", "2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:80".
// IPv4-mapped IPv6 addresses become IPv4; zones are dropped.
func parseNode(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	var a netip.Addr
	var err error
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 || (end+1 < len(s) && s[end+1] != ':') {
			return netip.Addr{}, false
		}
		a, err = netip.ParseAddr(s[1:end])
	case strings.Count(s, ":") == 1: // IPv4 with a port
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil || !a.IsValid() {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// forwardedFor returns the for= node of every element of RFC 7239 Forwarded
// lines, in order; "" for an element without one.
func forwardedFor(lines []string) []string {
	var nodes []string
	for _, line := range lines {
		for _, elem := range splitQuoted(line, ',') {
			node := ""
			for _, pair := range splitQuoted(elem, ';') {
				k, v, found := strings.Cut(strings.TrimSpace(pair), "=")
				if found && strings.EqualFold(strings.TrimSpace(k), "for") {
					node = unquote(strings.TrimSpace(v))
				}
			}
			nodes = append(nodes, node)
		}
	}
	return nodes
}

// splitQuoted splits s at sep outside double-quoted strings.
func splitQuoted(s string, sep byte) []string {
	var parts []string
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// unquote removes the quotes and escapes of an RFC 7230 quoted-string; a
// token is returned as is.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		if s[i] == '\\' && i+1 < len(s)-1 {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
