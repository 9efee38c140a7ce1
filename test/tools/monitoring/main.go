// Command monitoring generates nodeaddr's monitoring files where the kustomize monitoring base and
// the Helm chart read them: the Grafana dashboard, built with the Grafana Foundation SDK, and the
// chart's copy of the alert rule groups, taken from deploy/monitoring/prometheusrule.yaml (the
// chart cannot read files outside itself), and the git ref of the runbook URLs in both, from
// VERSION (the tag vX.Y.Z of a release, main for a -dev version). `make generate` runs it; test/deploy fails when the
// committed files differ from its output.
//
//	go run ./monitoring -repo ../..        # from test/tools/: write every file
//	go run ./monitoring -repo ../.. -check # exit 1 and name the stale files
//
// It lives in its own module so that the SDK never becomes a dependency of the agent.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// selector replaces $sel in every query: the dashboard's variables. cluster matches series without
// the label too (".*" is the "All" value); job follows the Service name (the chart's fullname).
const selector = `cluster=~"$cluster", job=~"$job", node=~"$node"`

// approverSelector replaces $asel: the approver's series (kubelet-serving-csr component, or the
// chart's config.approveKubeletServingCsr), job JOB-approver, without a node (a Deployment).
const approverSelector = `cluster=~"$cluster", job=~"${job}-approver"`

type target struct {
	expr, legend string
	instant      bool // a table's instant query
}

// query is a range query with its legend; instant is a table's instant query.
func query(expr, legend string) target { return target{expr: expr, legend: legend} }
func instant(expr string) target       { return target{expr: expr, instant: true} }

// quantiles are the histogram_quantile queries of histogram (a name and its selector, without
// _bucket) summed by by (le and more labels), one per quantile q ("0.5" is legend p50, then suffix).
func quantiles(histogram, by, suffix string, qs ...string) []target {
	name, sel, _ := strings.Cut(histogram, "{")
	var out []target
	for _, q := range qs {
		p := strings.TrimPrefix(q, "0.")
		if len(p) == 1 {
			p += "0"
		}
		out = append(out, query(fmt.Sprintf("histogram_quantile(%s, sum by (%s) (rate(%s_bucket{%s[$__rate_interval])))", q, by, name, sel), "p"+p+suffix))
	}
	return out
}

// panel is one panel of the dashboard, w by h grid units; layout places it (x, y) after the one
// before it, on the next row when the 24 units of a row are full.
type panel struct {
	kind, title, description string
	x, y, w, h               uint32
	unit                     string
	targets                  []target
}

func statPanel(title, description, unit string, w, h uint32, targets ...target) panel {
	return panel{kind: "stat", title: title, description: description, w: w, h: h, unit: unit, targets: targets}
}

func tablePanel(title, description string, w, h uint32, targets ...target) panel {
	return panel{kind: "table", title: title, description: description, w: w, h: h, targets: targets}
}

// graph is a time series panel, 8 high.
func graph(title, description, unit string, w uint32, targets ...target) panel {
	return panel{kind: "timeseries", title: title, description: description, w: w, h: 8, unit: unit, targets: targets}
}

// layout places the panels left to right in rows 24 wide, each row as high as its highest panel.
func layout(ps ...panel) []panel {
	var x, y, rowH uint32
	for i := range ps {
		if x+ps[i].w > 24 {
			x, y, rowH = 0, y+rowH, 0
		}
		ps[i].x, ps[i].y = x, y
		x += ps[i].w
		rowH = max(rowH, ps[i].h)
	}
	return ps
}

var panels = layout(
	statPanel("Agents up", "Agents Prometheus scrapes successfully, of its nodeaddr targets (one per node), and those it cannot scrape. Counted from up, which Prometheus keeps writing (0) for a target that is down, unlike the agent's own series, which vanish with it.", "", 6, 4,
		query("sum(up{$sel})", "up"),
		query("count(up{$sel})", "targets"),
		query("count(up{$sel} == 0) or vector(0)", "down"),
	),
	statPanel("Nodes still tainted", "Nodes still carrying node.cloudprovider.kubernetes.io/uninitialized.", "", 6, 4,
		query("sum(nodeaddr_uninitialized_taint{$sel})", "tainted"),
	),
	statPanel("provided-node-ip missing", "Nodes whose kubelet --node-ip address is not on the host (the Node stays tainted).", "", 6, 4,
		query("sum(nodeaddr_provided_node_ip_missing{$sel})", "missing"),
	),
	statPanel("Versions", "", "", 6, 4, query("count by (version) (nodeaddr_build_info{$sel})", "{{version}}")),
	tablePanel("Addresses per node", "The addresses each agent wants on its Node (nodeaddr_address_info).", 12, 8,
		instant("max by (node, type, family, address) (nodeaddr_address_info{$sel})"),
	),
	graph("Address count by node and type", "", "short", 12, query("count by (node, type) (nodeaddr_address_info{$sel})", "{{node}} {{type}}")),
	graph("Reaction latency", "From the first kernel event of a burst to the accepted write (nodeaddr_reaction_seconds). Empty while nothing changes.", "s", 12,
		append(quantiles("nodeaddr_reaction_seconds{$sel}", "le", "", "0.5", "0.9", "0.99"),
			query("sum(rate(nodeaddr_reaction_seconds_sum{$sel}[$__rate_interval])) / sum(rate(nodeaddr_reaction_seconds_count{$sel}[$__rate_interval]))", "mean"),
		)...,
	),
	graph("Netlink events", "", "ops", 12,
		query("sum by (node, kind) (rate(nodeaddr_netlink_events_total{$sel}[$__rate_interval]))", "{{node}} {{kind}}"),
	),
	graph("Node writes by result", "", "wps", 12,
		query("sum by (node, kind, result) (rate(nodeaddr_node_writes_total{$sel}[$__rate_interval]))", "{{node}} {{kind}} {{result}}"),
	),
	graph("Conflicts and errors", "Write conflicts (someone else wrote first: retried) and errors; failed resolutions.", "short", 12,
		query("sum by (node, kind, result) (increase(nodeaddr_node_writes_total{$sel, result=~\"conflict|error\"}[$__rate_interval]))", "{{node}} write {{kind}} {{result}}"),
		query("sum by (node) (increase(nodeaddr_resolutions_total{$sel, result=\"error\"}[$__rate_interval]))", "{{node}} resolution error"),
	),
	graph("Netlink resubscriptions", "Subscriptions re-established after the kernel dropped notifications (ENOBUFS); each forces a resync.", "short", 12,
		query("sum by (node, subscription) (increase(nodeaddr_netlink_resubscriptions_total{$sel}[$__rate_interval]))", "{{node}} {{subscription}}"),
	),
	graph("Overwrites by another writer", "Reverts by another writer (often a kubelet without --cloud-provider=external) and the current backoff.", "short", 12,
		query("sum by (node) (increase(nodeaddr_overwrites_total{$sel}[$__rate_interval]))", "{{node}} overwrites"),
		query("max by (node) (nodeaddr_overwrite_backoff_seconds{$sel})", "{{node}} backoff (s)"),
	),
	graph("Memory", "", "bytes", 12,
		query("max by (node) (process_resident_memory_bytes{$sel})", "{{node}} RSS"),
		query("max by (node) (go_memstats_heap_inuse_bytes{$sel})", "{{node}} heap in use"),
	),
	graph("CPU", "", "percentunit", 12, query("max by (node) (rate(process_cpu_seconds_total{$sel}[$__rate_interval]))", "{{node}}")),
	graph("Resolutions", "", "ops", 12, query("sum by (node, result) (rate(nodeaddr_resolutions_total{$sel}[$__rate_interval]))", "{{node}} {{result}}")),
	statPanel("Last periodic resync", "When each agent last ran its periodic resync (--resync-interval); 1970 until the first one.", "dateTimeFromNow", 12, 8,
		query("max by (node) (nodeaddr_last_resync_timestamp_seconds{$sel}) * 1000", "{{node}}"),
	),
	graph("API requests by code", "Requests to the API server by HTTP status code. code=\"<error>\": no response at all (API server or network down, TLS failure); 403: refused by RBAC or by nodeaddr's admission policies (reason: Forbidden); 422: a failed patch precondition (retried) or another admission policy without reason: Forbidden; 409: conflict (retried); 429/5xx: API server overloaded. docs/runbooks.md \"API requests failing\".", "reqps", 12,
		query("sum by (node, code) (rate(rest_client_requests_total{$sel}[$__rate_interval]))", "{{node}} {{code}}"),
	),
	graph("API request latency", "Latency of requests to the API server (watches: until the response headers), p50 and p99 over the selected nodes.", "s", 12,
		quantiles("rest_client_request_duration_seconds{$sel}", "le, verb", " {{verb}}", "0.5", "0.99")...,
	),
	graph("Metrics requests refused (401/403)", "Requests to the agents' /metrics the agent refused, by result: unauthenticated is 401 (no token, an unknown one, or one for another audience), forbidden is 403 (a user not in metrics-allowed-scrapers, or a SubjectAccessReview denied), error is 503 (the API server could not check the token), throttled is 429. A scraper refused every time shows here; Prometheus itself, when refused, reads none of these counters: its target is down (Agents up) and Prometheus's target page names the status. And the TokenReviews and SubjectAccessReviews the agents sent for scrapers not in their cache. docs/runbooks.md, NodeaddrDown.", "short", 12,
		query("sum by (node, result) (increase(nodeaddr_metrics_auth_decisions_total{$sel, result!=\"allowed\"}[$__rate_interval]))", "{{node}} {{result}}"),
		query("sum by (kind) (increase(nodeaddr_metrics_auth_reviews_total{$sel}[$__rate_interval]))", "{{kind}} sent"),
	),
	graph("External-address discovery (STUN) rounds", "Discovery rounds (--external-ip-discovery) by family and result: agreed (a majority of the servers named one address), disagreement, no_majority, no_answer. Empty while discovery is off. docs/runbooks.md, NodeaddrExternalIPDiscoveryFailing.", "short", 12,
		query("sum by (family, result) (increase(nodeaddr_discovery_rounds_total{$sel}[$__rate_interval]))", "{{family}} {{result}}"),
	),
	graph("STUN probes by server", "STUN Binding requests by server and result (success, timeout, error).", "short", 8,
		query("sum by (server, result) (increase(nodeaddr_discovery_probes_total{$sel}[$__rate_interval]))", "{{server}} {{result}}"),
	),
	graph("STUN probe latency", "From a STUN Binding request to its response, or to the probe's timeout.", "s", 8,
		quantiles("nodeaddr_discovery_probe_duration_seconds{$sel}", "le", "", "0.5", "0.99")...,
	),
	graph("Age of the last agreed external address", "Time since a discovery round last agreed, by node and family: the discovered ExternalIP is withdrawn once it passes --external-ip-discovery-stale-after (default 1 hour).", "s", 8,
		query("time() - max by (node, family) (nodeaddr_discovery_last_success_timestamp_seconds{$sel})", "{{node}} {{family}}"),
	),
	graph("Kubelet serving CSRs: approved and left pending", "The approver's decisions (kubelet-serving-csr component; job JOB-approver): CSRs approved, and CSRs left pending by the rule they break (reason). Empty without the approver. docs/runbooks.md, NodeaddrKubeletServingCSRPending.", "short", 12,
		query("sum(increase(nodeaddr_csr_approved_total{$asel}[$__rate_interval]))", "approved"),
		query("sum by (reason) (increase(nodeaddr_csr_pending_total{$asel}[$__rate_interval])) > 0", "pending {{reason}}"),
	),
	graph("CSR approval latency", "From a kubelet serving CSR's creation to its approval (whole seconds).", "s", 6,
		quantiles("nodeaddr_csr_approval_seconds{$asel}", "le", "", "0.5", "0.99")...,
	),
	statPanel("Approver", "Approver replicas up, and those holding the leader Lease (1 decides; 0 leaders: no CSR is approved).", "", 6, 8,
		query("sum(up{$asel})", "replicas up"),
		query("sum(nodeaddr_approver_leader{$asel})", "leaders"),
	),
)

var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

func queries(p panel) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for i, t := range p.targets {
		q := prometheus.NewDataqueryBuilder().
			RefId(string(rune('A' + i))).
			Datasource(datasource).
			Expr(strings.NewReplacer("$sel", selector, "$asel", approverSelector).Replace(t.expr)).
			LegendFormat(t.legend)
		if t.instant {
			q = q.Instant().Format(prometheus.PromQueryFormatTable)
		} else {
			q = q.Range()
		}
		out = append(out, q)
	}
	return out
}

func build(p panel) cog.Builder[dashboard.Panel] {
	pos := dashboard.GridPos{X: p.x, Y: p.y, W: p.w, H: p.h}
	switch p.kind {
	case "stat":
		b := stat.NewPanelBuilder().Title(p.title).Description(p.description).Datasource(datasource).
			GridPos(pos).Targets(queries(p))
		if p.unit != "" {
			b = b.Unit(p.unit)
		}
		return b
	case "table":
		return table.NewPanelBuilder().Title(p.title).Description(p.description).Datasource(datasource).
			GridPos(pos).Targets(queries(p)).
			Transformations([]dashboard.DataTransformerConfig{{
				Id:      "organize",
				Options: map[string]any{"excludeByName": map[string]any{"Time": true, "Value": true}},
			}})
	case "timeseries":
		return timeseries.NewPanelBuilder().Title(p.title).Description(p.description).Datasource(datasource).
			GridPos(pos).Targets(queries(p)).Unit(p.unit).
			Legend(common.NewVizLegendOptionsBuilder().DisplayMode(common.LegendDisplayModeTable).
				Placement(common.LegendPlacementBottom).ShowLegend(true).Calcs([]string{"lastNotNull", "max"})).
			Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
	}
	panic("unknown panel kind " + p.kind)
}

func option(text, value string) dashboard.VariableOption {
	return dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: &text}, Value: dashboard.StringOrArrayOfString{String: &value}}
}

// labelValues is a query variable: the values of label name on the series of series.
func labelValues(name, label, series string) *dashboard.QueryVariableBuilder {
	def := fmt.Sprintf("label_values(%s, %s)", series, name)
	return dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(datasource).
		Query(dashboard.StringOrMap{Map: map[string]any{"query": def, "refId": name}}).
		Definition(def).Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)
}

func generate() ([]byte, error) {
	b := dashboard.NewDashboardBuilder("nodeaddr").
		Uid("nodeaddr").
		Description("nodeaddr agents: Node addresses, reaction latency, kernel events, writes, conflicts, resubscriptions, overwrites, memory, API requests, metrics auth, external-address discovery (STUN) and the kubelet serving CSR approver. Generated by test/tools/monitoring (make generate).").
		Tags([]string{"nodeaddr", "kubernetes"}).
		Timezone("browser").
		Editable().
		Refresh("30s").
		Time("now-6h", "now").
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		// cluster and job from nodeaddr_build_info (every agent and approver exposes it once); node
		// from up, which stays while an agent is down, so that a down node can be selected.
		WithVariable(labelValues("cluster", "Cluster", "nodeaddr_build_info").IncludeAll(true).AllValue(".*").Multi(true).
			Current(option("All", "$__all"))).
		WithVariable(labelValues("job", "Job", `nodeaddr_build_info{cluster=~"$cluster"}`).Current(option("nodeaddr", "nodeaddr"))).
		WithVariable(labelValues("node", "Node", `up{cluster=~"$cluster", job=~"$job"}`).IncludeAll(true).AllValue(".*").Multi(true).
			Current(option("All", "$__all")))
	for _, p := range panels {
		b = b.WithPanel(build(p))
	}
	d, err := b.Build()
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// chartRules is the chart's files/prometheusrule-groups.yaml: the spec of the kustomize base's
// PrometheusRule, one level less indented, under a header.
func chartRules(prometheusRule []byte) ([]byte, error) {
	_, spec, ok := bytes.Cut(prometheusRule, []byte("\nspec:\n"))
	if !ok {
		return nil, fmt.Errorf("no top-level spec: in the PrometheusRule")
	}
	out := []byte("# Generated by test/tools/monitoring (make generate) from the groups in\n" +
		"# deploy/monitoring/prometheusrule.yaml; edit that file. The template sets the job and the\n" +
		"# runbook URLs' ref (from the chart's version).\n")
	for _, line := range strings.SplitAfter(string(spec), "\n") {
		if line == "" {
			continue
		}
		trimmed, ok := strings.CutPrefix(line, "  ")
		if !ok && strings.TrimSpace(line) != "" {
			return nil, fmt.Errorf("PrometheusRule spec line not indented: %q", line)
		}
		out = append(out, trimmed...)
	}
	return out, nil
}

// runbookURLRE matches the part of an alert's runbook_url that names the git ref.
var runbookURLRE = regexp.MustCompile(`(https://github\.com/nodeaddr/nodeaddr/blob/)[^/\s]+(/docs/runbooks\.md#)`)

// runbookRef is the git ref the runbook URLs of version name: the release's tag vX.Y.Z, or main for
// a development version (-dev), which has no tag. The chart's template computes the same from its
// version (templates/prometheusrule.yaml).
func runbookRef(version string) string {
	if strings.HasSuffix(version, "-dev") {
		return "main"
	}
	return "v" + version
}

// files returns every generated file by path relative to the repository, with its content.
// deploy/monitoring/prometheusrule.yaml is its own input: only the ref of its runbook URLs is
// rewritten, from VERSION.
func files(repo string) (map[string][]byte, error) {
	dash, err := generate()
	if err != nil {
		return nil, err
	}
	version, err := os.ReadFile(filepath.Join(repo, "VERSION"))
	if err != nil {
		return nil, err
	}
	pr, err := os.ReadFile(filepath.Join(repo, "deploy", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		return nil, err
	}
	if !runbookURLRE.Match(pr) {
		return nil, fmt.Errorf("deploy/monitoring/prometheusrule.yaml: no runbook_url matches %s", runbookURLRE)
	}
	pr = runbookURLRE.ReplaceAll(pr, []byte("${1}"+runbookRef(strings.TrimSpace(string(version)))+"${2}"))
	rules, err := chartRules(pr)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"deploy/monitoring/dashboard.json":                      dash,
		"deploy/monitoring/prometheusrule.yaml":                 pr,
		"deploy/helm/nodeaddr/files/dashboard.json":             dash,
		"deploy/helm/nodeaddr/files/prometheusrule-groups.yaml": rules,
	}, nil
}

func main() {
	repo := flag.String("repo", "..", "the repository's root directory")
	check := flag.Bool("check", false, "write nothing; exit 1 and name each file that differs")
	flag.Parse()
	out, err := files(*repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "monitoring:", err)
		os.Exit(1)
	}
	stale := false
	for _, name := range slices.Sorted(maps.Keys(out)) {
		path := filepath.Join(*repo, filepath.FromSlash(name))
		if *check {
			if cur, err := os.ReadFile(path); err != nil || !bytes.Equal(cur, out[name]) {
				fmt.Fprintf(os.Stderr, "%s is stale: run make generate\n", name)
				stale = true
			}
			continue
		}
		if err := os.WriteFile(path, out[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "monitoring:", err)
			os.Exit(1)
		}
	}
	if stale {
		os.Exit(1)
	}
}
