package soak

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// usage is one sample of the agent's footprint in a quiet period (invariant 6).
type usage struct {
	at         time.Time
	pid        int
	rssAnon    int64 // bytes (RssAnon: what the agent itself allocated, not the binary's pages)
	goroutines int
}

// Runaway limits checked at every quiet period; growth across the run is checked at the end.
const (
	maxGoroutines = 400
	maxRSSAnon    = 160 << 20
)

func (s *soak) sampleUsage() (usage, error) {
	a := s.w.currentAgent()
	u := usage{at: time.Now(), pid: a.Pid()}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", u.pid))
	if err != nil {
		return u, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "RssAnon:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			u.rssAnon = kb << 10
		}
	}
	m, err := a.Metrics()
	if err != nil {
		return u, err
	}
	u.goroutines = int(m["go_goroutines"])
	return u, nil
}

// checkUsage samples the footprint; at the end of the run it compares the first and the last third
// of the samples of the longest-lived agent process.
func (s *soak) checkUsage(final bool) {
	if u, err := s.sampleUsage(); err == nil {
		s.usage = append(s.usage, u)
		if u.goroutines > maxGoroutines || u.rssAnon > maxRSSAnon {
			s.rec.violate(6, "agent pid %d: %d goroutines, RssAnon %.1f MiB (limits %d, %d MiB)", u.pid,
				u.goroutines, float64(u.rssAnon)/(1<<20), maxGoroutines, maxRSSAnon>>20)
		}
	}
	if !final {
		return
	}
	byPid := map[int][]usage{}
	longest := 0
	for _, u := range s.usage {
		byPid[u.pid] = append(byPid[u.pid], u)
		if len(byPid[u.pid]) > len(byPid[longest]) {
			longest = u.pid
		}
	}
	us := byPid[longest]
	if len(us) < 6 {
		s.rec.event("usage", "too few samples of one agent process (%d) to judge growth", len(us))
		return
	}
	third := len(us) / 3
	first, last := median(us[:third]), median(us[len(us)-third:])
	s.rec.event("usage", "agent pid %d over %d quiet periods: goroutines %d -> %d, RssAnon %.1f -> %.1f MiB",
		longest, len(us), first.goroutines, last.goroutines, float64(first.rssAnon)/(1<<20), float64(last.rssAnon)/(1<<20))
	s.rec.usageLine = fmt.Sprintf("the longest-lived agent process over %d quiet periods: goroutines %d -> %d (median of first and last third), RssAnon %.1f -> %.1f MiB",
		len(us), first.goroutines, last.goroutines, float64(first.rssAnon)/(1<<20), float64(last.rssAnon)/(1<<20))
	if last.goroutines > first.goroutines+10 || last.rssAnon > first.rssAnon*3/2+(8<<20) {
		s.rec.violate(6, "agent pid %d grows: goroutines %d -> %d, RssAnon %.1f -> %.1f MiB", longest,
			first.goroutines, last.goroutines, float64(first.rssAnon)/(1<<20), float64(last.rssAnon)/(1<<20))
	}
}

func median(us []usage) usage {
	g := make([]int, len(us))
	r := make([]int64, len(us))
	for i, u := range us {
		g[i], r[i] = u.goroutines, u.rssAnon
	}
	slices.Sort(g)
	slices.Sort(r)
	return usage{goroutines: g[len(g)/2], rssAnon: r[len(r)/2]}
}

func stringsReader(lines []string) io.Reader {
	return strings.NewReader(strings.Join(lines, "\n") + "\n")
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func (s sample) has(ip string) bool {
	return slices.ContainsFunc(s.Addrs, func(a kaddr) bool { return a.Local == ip })
}
