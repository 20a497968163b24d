package envoyconfig

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/shardlimit/shardlimit/router/rules"
)

// YAML writes the rules as a rules file that `ctl rules apply -f`
// accepts, each rule under a comment naming the line it comes from, and
// each descriptor on one line.
func (r *Result) YAML() ([]byte, error) {
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for i := range r.Rules {
		var n yaml.Node
		if err := n.Encode(&r.Rules[i]); err != nil {
			return nil, err
		}
		o := r.Origins[i]
		n.HeadComment = fmt.Sprintf("from %s:%d", o.File, o.Line)
		for k := 0; k+1 < len(n.Content); k += 2 {
			if n.Content[k].Value == "descriptor" {
				n.Content[k+1].Style = yaml.FlowStyle
			}
		}
		list.Content = append(list.Content, &n)
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "rules"}, list}}
	doc.HeadComment = "Converted from envoy ratelimit's configuration by `shardlimit ctl rules import --from-envoy`."
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Parsed returns the rules as `ctl rules apply` reads what YAML writes:
// what the routers would store.
func (r *Result) Parsed() ([]rules.Rule, error) {
	b, err := r.YAML()
	if err != nil {
		return nil, err
	}
	return rules.Parse("converted rules", b)
}
