package harness

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// A rotated audit log is reported, never read in part: with a 1 MB limit kube-apiserver's
// lumberjack renames audit.log mid-load and AuditNotRotated (which AuditSince calls first) says so;
// with the harness's flags the same load stays in one file and AuditSince counts every request.
// Only the first half can catch a regression of the limit itself, and only loudly (the default of
// 100 MB takes minutes of 5 000 agents to reach; a rotation there under-counted their requests).
func TestAuditLogIsNotRotated(t *testing.T) {
	const gets = 3000 // about 2 MB of Metadata-level records
	for _, tc := range []struct {
		name    string
		args    []string
		rotated bool
	}{
		{"forced 1 MB limit", []string{"--audit-log-maxsize=1"}, true},
		{"harness default", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := StartControlPlaneWith(t, func(cp *ControlPlane) error {
				cp.ExtraArgs = append(cp.ExtraArgs, tc.args...)
				return nil
			})
			since := time.Now()
			user, err := getMany(cp, gets)
			if err != nil {
				t.Fatal(err)
			}
			err = cp.AuditNotRotated()
			if tc.rotated != (err != nil) {
				t.Fatalf("AuditNotRotated() = %v, want rotated=%v", err, tc.rotated)
			}
			if tc.rotated {
				return
			}
			evs, err := cp.AuditSince(user, since)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range evs {
				if e.Verb == "get" && e.ObjectRef != nil && e.ObjectRef.Resource == "namespaces" {
					n++
				}
			}
			if n != gets {
				t.Errorf("the audit log has %d of the %d GETs", n, gets)
			}
		})
	}
}

// getMany GETs the default namespace n times from 8 goroutines as the admin; it returns the user
// name the audit log records for them.
func getMany(cp *ControlPlane, n int) (string, error) {
	c := rest.CopyConfig(cp.Config)
	c.QPS, c.Burst = 5000, 5000
	cs, err := kubernetes.NewForConfig(c)
	if err != nil {
		return "", err
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
					errs <- fmt.Errorf("GET %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return "admin", <-errs
}
