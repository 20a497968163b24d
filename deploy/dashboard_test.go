package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// dashboard is the part of a Grafana dashboard's JSON model these tests read.
type dashboard struct {
	UID        string           `json:"uid"`
	Title      string           `json:"title"`
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

type dashboardPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr         string `json:"expr"`
		RefID        string `json:"refId"`
		LegendFormat string `json:"legendFormat"`
	} `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
		Overrides []struct {
			Matcher struct {
				ID      string `json:"id"`
				Options any    `json:"options"`
			} `json:"matcher"`
			Properties []struct {
				ID    string `json:"id"`
				Value any    `json:"value"`
			} `json:"properties"`
		} `json:"overrides"`
	} `json:"fieldConfig"`
	Panels []dashboardPanel `json:"panels"`
}

// unitOf returns the unit the panel shows the target refID's series in:
// an override matched by the query's refId, else the panel's default.
func (p dashboardPanel) unitOf(refID string) string {
	unit := p.FieldConfig.Defaults.Unit
	for _, o := range p.FieldConfig.Overrides {
		if o.Matcher.ID != "byFrameRefID" || o.Matcher.Options != refID {
			continue
		}
		for _, prop := range o.Properties {
			if v, ok := prop.Value.(string); ok && prop.ID == "unit" {
				unit = v
			}
		}
	}
	return unit
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("grafana", "shardlimit.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/shardlimit.json: %v", err)
	}
	return d
}

// The dashboard imports as is: valid JSON, a fixed uid, unique panel ids,
// every query panel on the ${datasource} variable with a query per target,
// and panels that do not overlap on the grid.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("grafana", "shardlimit.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	d := readDashboard(t)
	if d.UID != "shardlimit" || d.Title == "" {
		t.Errorf("uid %q title %q: want uid shardlimit and a title", d.UID, d.Title)
	}
	hasDatasource := false
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			hasDatasource = true
		}
	}
	if !hasDatasource {
		t.Error("no datasource variable of type prometheus")
	}
	ids := map[int]bool{}
	type cell struct{ x, y int }
	taken := map[cell]int{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %d %q: gridPos %+v off the 24-column grid", p.ID, p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := taken[cell{x, y}]; ok {
					t.Errorf("panel %d %q overlaps panel %d", p.ID, p.Title, other)
					x, y = g.X+g.W, g.Y+g.H
					break
				}
				taken[cell{x, y}] = p.ID
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %d %q: datasource is not ${datasource}", p.ID, p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %d %q has no query", p.ID, p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %d %q: a target without expr or refId", p.ID, p.Title)
			}
		}
	}
}

// A query shown in percent is a share: a division, or a metric that is a
// ratio (named _ratio). A count in a percent unit reads as nonsense (the
// hot-key panel once showed its decisions covered as 1,000,000%).
func TestDashboardPercentsAreShares(t *testing.T) {
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if u := p.unitOf(tg.RefID); u != "percentunit" && u != "percent" {
					continue
				}
				names, err := metricNames(tg.Expr)
				if err != nil {
					t.Errorf("panel %d %q %s: %v", p.ID, p.Title, tg.RefID, err)
					continue
				}
				ratio := len(names) > 0 && !slices.ContainsFunc(names, func(n string) bool { return !strings.HasSuffix(n, "_ratio") })
				if !ratio && !strings.Contains(tg.Expr, "/") {
					t.Errorf("panel %d %q %s: in %s but neither a division nor a _ratio metric: %s (override its unit by refId, or plot a share)",
						p.ID, p.Title, tg.RefID, p.unitOf(tg.RefID), tg.Expr)
				}
			}
			walk(p.Panels)
		}
	}
	walk(readDashboard(t).Panels)
}

// No panel draws a line per shard: at 64 shards a panel with 64 (or 64 ×
// reasons) lines is output no one can read (issue 27). A target that
// names a shard in its legend ({{instance}} of a shard's metric, {{shard}}
// of a router's) must take the k highest or lowest (topk, bottomk), so
// that what a panel draws is the same at 64 shards as at 128; lines per
// router (8 in the fleet measured) stay, and a panel draws at most
// maxPanelLines.
func TestDashboardReadableAtFleetSize(t *testing.T) {
	const routers, maxPanelLines = 8, 40
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			at64, at128 := 0, 0
			for _, tg := range p.Targets {
				a, err := seriesAt(tg.Expr, tg.LegendFormat, 64, routers)
				if err != nil {
					t.Errorf("panel %d %q %s: %v", p.ID, p.Title, tg.RefID, err)
					continue
				}
				b, _ := seriesAt(tg.Expr, tg.LegendFormat, 128, routers)
				if a != b {
					t.Errorf("panel %d %q %s: a line per shard (%d at 64 shards, %d at 128): take the topk, or aggregate: %s",
						p.ID, p.Title, tg.RefID, a, b, tg.Expr)
				}
				at64, at128 = at64+a, at128+b
			}
			if p.Type != "table" && at64 > maxPanelLines {
				t.Errorf("panel %d %q: up to %d lines at 64 shards and %d routers, over %d", p.ID, p.Title, at64, routers, maxPanelLines)
			}
			walk(p.Panels)
		}
	}
	walk(readDashboard(t).Panels)
}

// seriesAt bounds the series a target draws in a fleet of shards shards
// and routers routers: k for a topk or bottomk; else one per process when
// its legend names the instance (shards for a shard's metric, routers for
// a router's, every process for one all export), one per shard when it
// names the shard; else one. Labels of a bounded set (reason, kind,
// result) count as one: the bound is on what grows with the fleet.
func seriesAt(expr, legend string, shards, routers int) (int, error) {
	e := strings.TrimSpace(expr)
	for _, f := range []string{"topk(", "bottomk("} {
		if rest, ok := strings.CutPrefix(e, f); ok {
			k, _, ok := strings.Cut(rest, ",")
			n, err := strconv.Atoi(strings.TrimSpace(k))
			if !ok || err != nil {
				return 0, fmt.Errorf("%s without a number k: %s", f, expr)
			}
			return n, nil
		}
	}
	if strings.Contains(legend, "{{shard}}") {
		return shards, nil
	}
	if !strings.Contains(legend, "{{instance}}") {
		return 1, nil
	}
	names, err := metricNames(expr)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, kind := range []struct {
		prefix string
		procs  int
	}{{"shardlimit_shard_", shards}, {"shardlimit_router_", routers}, {"shardlimit_rebalance_", 2}} {
		if slices.ContainsFunc(names, func(name string) bool { return strings.HasPrefix(name, kind.prefix) }) {
			n += kind.procs
		}
	}
	if slices.ContainsFunc(names, func(name string) bool { return !strings.HasPrefix(name, "shardlimit_") }) {
		n = shards + routers + 2 // process_, go_: every component exports them
	}
	return max(n, 1), nil
}
