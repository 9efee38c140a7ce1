//go:build bench

// Package scale measures nodeaddr's publisher at fleet size: N in-process agents (default 500), each
// with its own Node, pod-bound ServiceAccount token, client and connection, on one real
// kube-apiserver. It is a benchmark, not a test: it reports convergence times and API cost and
// fails only when the agents do not converge at all.
//
//	cd test && go test -tags bench ./scale/ -run TestScale500 -v -count=1 -timeout 30m
//
// NODEADDR_SCALE_NODES sets N, NODEADDR_SCALE_IDLE the idle window (default 60s), and
// NODEADDR_BENCH_OUT names a file that receives the markdown table as well as stdout.
// NODEADDR_SCALE_APF=on turns priority and fairness on, NODEADDR_SCALE_FLOWSCHEMA=on also applies
// deploy/flowcontrol.yaml, and NODEADDR_SCALE_FLEET_NICE=N runs this process (the agents and the
// bystanders) at nice N while kube-apiserver and etcd keep 0. Every agent is built with the
// agent's own client, internal/kube.
//
// TestScaleOutage (same settings, NODEADDR_OUTAGE the outage, default 60s) stops kube-apiserver
// while every agent has a write pending and reports the agents' PATCH rate over the recovery.
package scale
