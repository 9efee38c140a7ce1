package main

import (
	"flag"
	"io"
	"log/slog"
	"strconv"

	"k8s.io/klog/v2"
)

// newLogger is the process's logger: --log-format's handler at --log-level (or what --v maps to),
// with klog (client-go) routed into it at verbosity --v.
func newLogger(o *options, w io.Writer) *slog.Logger {
	hopts := &slog.HandlerOptions{Level: o.logLevel}
	var h slog.Handler = slog.NewTextHandler(w, hopts)
	if o.logFormat == "json" {
		h = slog.NewJSONHandler(w, hopts)
	}
	log := slog.New(h)
	// client-go logs through klog: route it into the same handler so every line has one format.
	// klog's V(n) arrives as slog level -n; klog's own verbosity gates it first (and decides at
	// client construction whether requests are traced at all: V(6)).
	klog.SetSlogLogger(log)
	setKlogVerbosity(o.verbosity)
	return log
}

// setKlogVerbosity sets klog's global -v, through its own flag as Kubernetes components do.
func setKlogVerbosity(v int) {
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	if err := fs.Set("v", strconv.Itoa(v)); err != nil {
		panic(err) // v is 0-10, checked by parseFlags
	}
}
