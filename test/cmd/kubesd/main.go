//go:build kubesd

// Command kubesd runs Prometheus's own Kubernetes service discovery (the discovery/kubernetes
// package of github.com/prometheus/prometheus, at the version the Prometheus Operator's module
// requires) for every kubernetes_sd_configs of a Prometheus configuration, and serves what it
// discovers in Prometheus's HTTP service discovery format: GET /sd?job=JOB. test/monitoring runs
// it beside Debian's Prometheus, whose build leaves out Kubernetes discovery, and points each job's
// http_sd_configs at it; the job's relabelings see the same __meta_kubernetes_* labels.
//
// It is built in a build module of its own under the cache directory (harness.BuildKubeSD, with
// -tags kubesd), at the Prometheus release the operator's module requires: test/go.mod never
// requires Prometheus. It reads only the kubernetes_sd_configs of each scrape job, with
// discovery/kubernetes's own YAML decoding (its defaults and checks).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"gopkg.in/yaml.v2"
)

// scrapeConfigs is the part of a Prometheus configuration kubesd reads.
type scrapeConfigs struct {
	ScrapeConfigs []struct {
		JobName             string                 `yaml:"job_name"`
		KubernetesSDConfigs []*kubernetes.SDConfig `yaml:"kubernetes_sd_configs"`
	} `yaml:"scrape_configs"`
}

// group is one target group of the HTTP service discovery format.
type group struct {
	Targets []string       `json:"targets"`
	Labels  model.LabelSet `json:"labels"`
}

func main() {
	file := flag.String("config.file", "", "Prometheus configuration whose kubernetes_sd_configs to run")
	listen := flag.String("listen", "127.0.0.1:9091", "address to serve /sd on")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	b, err := os.ReadFile(*file)
	if err != nil {
		logger.Error("read", "err", err)
		os.Exit(1)
	}
	var cfg scrapeConfigs
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		logger.Error("parse", "err", err)
		os.Exit(1)
	}
	jobs := map[string]discovery.Configs{}
	for _, sc := range cfg.ScrapeConfigs {
		for _, c := range sc.KubernetesSDConfigs {
			jobs[sc.JobName] = append(jobs[sc.JobName], c)
		}
	}
	reg := prometheus.NewRegistry()
	sdMetrics, err := discovery.CreateAndRegisterSDMetrics(reg)
	if err != nil {
		logger.Error("metrics", "err", err)
		os.Exit(1)
	}
	ctx := context.Background()
	m := discovery.NewManager(ctx, logger, reg, sdMetrics)
	if err := m.ApplyConfig(jobs); err != nil {
		logger.Error("apply", "err", err)
		os.Exit(1)
	}
	go m.Run()

	var mu sync.Mutex
	current := map[string][]group{}
	go func() {
		for tgs := range m.SyncCh() {
			next := map[string][]group{}
			for job, gs := range tgs {
				next[job] = flatten(gs)
			}
			mu.Lock()
			for job, gs := range next {
				current[job] = gs
			}
			mu.Unlock()
			logger.Info("discovered", "jobs", len(next))
		}
	}()
	http.HandleFunc("/sd", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gs := current[r.URL.Query().Get("job")]
		mu.Unlock()
		if gs == nil {
			gs = []group{}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(gs)
	})
	logger.Info("serving", "listen", *listen, "jobs", len(jobs))
	if err := http.ListenAndServe(*listen, nil); err != nil {
		logger.Error("serve", "err", err)
		os.Exit(1)
	}
}

// flatten turns target groups into one group per target: the HTTP format has no per-target
// labels, Kubernetes discovery sets most of its labels per target.
func flatten(gs []*targetgroup.Group) []group {
	var out []group
	for _, g := range gs {
		if g == nil {
			continue
		}
		for _, t := range g.Targets {
			labels := model.LabelSet{}
			for k, v := range g.Labels {
				labels[k] = v
			}
			for k, v := range t {
				labels[k] = v
			}
			addr := string(labels[model.AddressLabel])
			delete(labels, model.AddressLabel)
			out = append(out, group{Targets: []string{addr}, Labels: labels})
		}
	}
	return out
}
