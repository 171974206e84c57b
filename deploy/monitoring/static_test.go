package monitoring

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

// The files under test, from this directory.
const (
	grafanaDir = "../grafana"
	alertsFile = "../prometheus/alerts.yml"
	promConfig = "../prometheus/prometheus.yml"
	operations = "../../docs/operations.md"
)

// dashboard is what a Grafana dashboard JSON may hold: decoding refuses
// any other field, so that a misspelt one fails here rather than being
// ignored by Grafana.
type dashboard struct {
	Inputs        []input         `json:"__inputs"`
	Requires      []requirement   `json:"__requires"`
	UID           string          `json:"uid"`
	Title         string          `json:"title"`
	Description   string          `json:"description"`
	Tags          []string        `json:"tags"`
	Editable      bool            `json:"editable"`
	GraphTooltip  int             `json:"graphTooltip"`
	Refresh       string          `json:"refresh"`
	SchemaVersion int             `json:"schemaVersion"`
	Version       int             `json:"version"`
	Time          json.RawMessage `json:"time"`
	Timepicker    json.RawMessage `json:"timepicker"`
	Timezone      string          `json:"timezone"`
	Annotations   json.RawMessage `json:"annotations"`
	Links         json.RawMessage `json:"links"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type input struct {
	Name, Label, Description, Type, PluginID, PluginName string
}

type requirement struct {
	Type, ID, Name, Version string
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type variable struct {
	Name       string          `json:"name"`
	Label      string          `json:"label"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"`
	Datasource *datasource     `json:"datasource"`
	Definition string          `json:"definition"`
	Refresh    int             `json:"refresh"`
	Sort       int             `json:"sort"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	Current    json.RawMessage `json:"current"`
	Options    json.RawMessage `json:"options"`
	Hide       int             `json:"hide"`
	Regex      string          `json:"regex"`
}

type panel struct {
	ID          int                      `json:"id"`
	Type        string                   `json:"type"`
	Title       string                   `json:"title"`
	Description string                   `json:"description"`
	Datasource  *datasource              `json:"datasource"`
	GridPos     struct{ H, W, X, Y int } `json:"gridPos"`
	FieldConfig json.RawMessage          `json:"fieldConfig"`
	Options     json.RawMessage          `json:"options"`
	Targets     []target                 `json:"targets"`
	Collapsed   bool                     `json:"collapsed"`
	Repeat      string                   `json:"repeat"`
	Panels      []panel                  `json:"panels"`
}

type target struct {
	Datasource   *datasource `json:"datasource"`
	Expr         string      `json:"expr"`
	LegendFormat string      `json:"legendFormat"`
	RefID        string      `json:"refId"`
}

// dsVar is the dashboards' datasource variable, which is also the input
// Grafana's import asks for.
const dsVar = "${DS_PROMETHEUS}"

// grafanaVars stand for the variables Grafana fills in a query, so that it
// parses as PromQL.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m", "$__range", "1h", "$__interval", "15s",
	"$job", "tern", "$instance", "127.0.0.1:7071",
)

// promql parses the queries of the dashboards and rules.
var promql = parser.NewParser(parser.Options{})

// loadDashboards decodes every dashboard under deploy/grafana strictly.
func loadDashboards(t *testing.T) map[string]*dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(grafanaDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tern-server.json", "tern-cluster.json"} {
		if !slices.Contains(files, filepath.Join(grafanaDir, want)) {
			t.Fatalf("deploy/grafana/%s is missing", want)
		}
	}
	out := map[string]*dashboard{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		var d dashboard
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if dec.More() {
			t.Fatalf("%s: more than one JSON value", f)
		}
		out[filepath.Base(f)] = &d
	}
	return out
}

// allPanels lists d's panels, those inside rows included.
func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// parseExpr parses a query, with Grafana's variables filled in.
func parseExpr(expr string) (parser.Expr, error) {
	return promql.ParseExpr(grafanaVars.Replace(expr))
}

// metricNames adds to names the metric names e selects.
func metricNames(e parser.Expr, names map[string]bool) {
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel {
					name = m.Value
				}
			}
			names[name] = true
		}
		return nil
	})
}

// TestDashboards checks that each dashboard is importable (a schema
// version, the datasource input and variable, the job and instance
// variables) and that every query parses.
func TestDashboards(t *testing.T) {
	for name, d := range loadDashboards(t) {
		t.Run(name, func(t *testing.T) {
			if d.SchemaVersion < 30 || d.UID == "" || d.Title == "" {
				t.Errorf("schemaVersion %d, uid %q, title %q: want a schema version of Grafana 9 or later, a uid and a title", d.SchemaVersion, d.UID, d.Title)
			}
			if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
				t.Errorf("__inputs %+v: want the one Prometheus datasource input DS_PROMETHEUS", d.Inputs)
			}
			vars := map[string]variable{}
			for _, v := range d.Templating.List {
				vars[v.Name] = v
			}
			if v := vars["DS_PROMETHEUS"]; v.Type != "datasource" || string(v.Query) != `"prometheus"` {
				t.Errorf("variable DS_PROMETHEUS %+v: want a datasource variable of Prometheus", v)
			}
			for _, name := range []string{"job", "instance"} {
				v, ok := vars[name]
				if !ok || v.Type != "query" || v.Datasource == nil || v.Datasource.UID != dsVar {
					t.Errorf("variable %s %+v: want a query variable on %s", name, v, dsVar)
				}
			}
			ids := map[int]bool{}
			queries := 0
			for _, p := range allPanels(d.Panels) {
				if ids[p.ID] {
					t.Errorf("panel %q: id %d is used twice", p.Title, p.ID)
				}
				ids[p.ID] = true
				if p.GridPos.X < 0 || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H <= 0 {
					t.Errorf("panel %q: gridPos %+v is outside Grafana's 24 columns", p.Title, p.GridPos)
				}
				if p.Type == "row" {
					continue
				}
				if p.Title == "" || p.Datasource == nil || p.Datasource.UID != dsVar || len(p.Targets) == 0 {
					t.Errorf("panel %q: want a title, the datasource %s and a query", p.Title, dsVar)
				}
				refs := map[string]bool{}
				for _, tg := range p.Targets {
					queries++
					if refs[tg.RefID] || tg.RefID == "" {
						t.Errorf("panel %q: refId %q is empty or used twice", p.Title, tg.RefID)
					}
					refs[tg.RefID] = true
					if tg.Datasource == nil || tg.Datasource.UID != dsVar {
						t.Errorf("panel %q, query %s: datasource %+v, want %s", p.Title, tg.RefID, tg.Datasource, dsVar)
					}
					if !strings.Contains(tg.Expr, `job="$job"`) {
						t.Errorf("panel %q, query %s: %s does not select job=\"$job\"", p.Title, tg.RefID, tg.Expr)
					}
					if _, err := parseExpr(tg.Expr); err != nil {
						t.Errorf("panel %q, query %s: %s: %v", p.Title, tg.RefID, tg.Expr, err)
					}
				}
			}
			if queries == 0 {
				t.Error("no queries")
			}
		})
	}
}

// loadRules parses deploy/prometheus/alerts.yml as Prometheus does, with
// unknown fields refused.
func loadRules(t *testing.T) []rulefmt.Rule {
	t.Helper()
	rgs, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if rgs == nil || len(errs) > 0 {
		t.FailNow()
	}
	var rules []rulefmt.Rule
	for _, g := range rgs.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", alertsFile)
	}
	return rules
}

// runbookAnchor is the anchor of a runbook link into docs/operations.md.
var runbookAnchor = regexp.MustCompile(`docs/operations\.md#([a-z0-9-]+)$`)

// TestRules checks that every alerting rule parses, says what it is about
// (summary), and links its section of docs/operations.md, which exists.
func TestRules(t *testing.T) {
	anchors := markdownAnchors(t, operations)
	seen := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Alert == "" {
			t.Errorf("rule %q is not an alert: alerts.yml holds alerts", r.Record)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		if _, err := promql.ParseExpr(r.Expr); err != nil {
			t.Errorf("alert %s: %v", r.Alert, err)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("alert %s: severity %q, want warning or critical", r.Alert, s)
		}
		if r.Annotations["summary"] == "" {
			t.Errorf("alert %s has no summary annotation", r.Alert)
		}
		m := runbookAnchor.FindStringSubmatch(r.Annotations["runbook_url"])
		switch {
		case m == nil:
			t.Errorf("alert %s: runbook_url %q does not point into docs/operations.md#...", r.Alert, r.Annotations["runbook_url"])
		case !anchors[m[1]]:
			t.Errorf("alert %s: docs/operations.md has no section #%s (its sections: %v)", r.Alert, m[1], slices.Sorted(maps.Keys(anchors)))
		case m[1] != strings.ToLower(r.Alert):
			t.Errorf("alert %s: its runbook is #%s, want the section named after it, #%s", r.Alert, m[1], strings.ToLower(r.Alert))
		}
	}
}

// scrapeConfig is the part of Prometheus's configuration the example
// uses; decoding refuses other fields, so that a misspelt one fails here.
// (Prometheus's own loader, package config, would double what this module
// builds.)
type scrapeConfig struct {
	Global struct {
		ScrapeInterval     model.Duration `yaml:"scrape_interval"`
		EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	} `yaml:"global"`
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// TestPrometheusConfig checks that the scrape example decodes strictly,
// loads alerts.yml, and names its jobs as the alerts expect.
func TestPrometheusConfig(t *testing.T) {
	data, err := os.ReadFile(promConfig)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var cfg scrapeConfig
	if err := dec.Decode(&cfg); err != nil {
		t.Fatalf("%s: %v", promConfig, err)
	}
	if cfg.Global.ScrapeInterval <= 0 || cfg.Global.EvaluationInterval <= 0 {
		t.Errorf("global: scrape_interval %v, evaluation_interval %v: want both", cfg.Global.ScrapeInterval, cfg.Global.EvaluationInterval)
	}
	if len(cfg.ScrapeConfigs) < 2 {
		t.Errorf("%d scrape configs, want a standalone server's and a cluster's", len(cfg.ScrapeConfigs))
	}
	if !slices.ContainsFunc(cfg.RuleFiles, func(f string) bool { return filepath.Base(f) == "alerts.yml" }) {
		t.Errorf("rule_files %v does not load alerts.yml", cfg.RuleFiles)
	}
	for _, sc := range cfg.ScrapeConfigs {
		if !strings.HasPrefix(sc.JobName, "tern") {
			t.Errorf("job %q: alerts.yml's TernDown expects job names starting with tern", sc.JobName)
		}
		if len(sc.StaticConfigs) == 0 || len(sc.StaticConfigs[0].Targets) == 0 {
			t.Errorf("job %q has no targets", sc.JobName)
		}
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				if _, _, err := net.SplitHostPort(target); err != nil {
					t.Errorf("job %q: target %q: %v", sc.JobName, target, err)
				}
			}
		}
	}
}

// markdownAnchors returns the anchors GitHub makes of the headings of a
// Markdown file: lower case, spaces as hyphens, other punctuation dropped.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range h {
			switch {
			case r == ' ' || r == '-':
				b.WriteRune('-')
			case r == '_' || ('a' <= r && r <= 'z') || ('0' <= r && r <= '9'):
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}
