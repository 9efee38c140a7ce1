package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Classification is where kube-apiserver's priority and fairness put one request: the UIDs of the
// FlowSchema and the priority level it answers in X-Kubernetes-PF-FlowSchema-UID and
// X-Kubernetes-PF-PriorityLevel-UID (empty with priority and fairness off), and the status code.
type Classification struct {
	FlowSchemaUID, PriorityLevelUID string
	Status                          int
}

// Classify sends GET path to the API server with the bearer token and returns how priority and
// fairness classified it. The headers are set whatever the answer (a 403 or 404 is classified too).
func (cp *ControlPlane) Classify(ctx context.Context, token, path string) (Classification, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cp.Config.Host+path, nil)
	if err != nil {
		return Classification{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Do(req)
	if err != nil {
		return Classification{}, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return Classification{
		FlowSchemaUID:    resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"),
		PriorityLevelUID: resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID"),
		Status:           resp.StatusCode,
	}, nil
}

// FlowNames names the FlowSchema and priority level of c (by listing both kinds), for messages;
// a UID it cannot find is shown as is.
func (cp *ControlPlane) FlowNames(ctx context.Context, c Classification) (schema, level string) {
	schema, level = "uid "+c.FlowSchemaUID, "uid "+c.PriorityLevelUID
	if fss, err := cp.Admin.FlowcontrolV1().FlowSchemas().List(ctx, metav1.ListOptions{}); err == nil {
		for _, fs := range fss.Items {
			if string(fs.UID) == c.FlowSchemaUID {
				schema = fs.Name
			}
		}
	}
	if pls, err := cp.Admin.FlowcontrolV1().PriorityLevelConfigurations().List(ctx, metav1.ListOptions{}); err == nil {
		for _, pl := range pls.Items {
			if string(pl.UID) == c.PriorityLevelUID {
				level = pl.Name
			}
		}
	}
	return schema, level
}

// WaitClassified polls until a GET of path with token is classified into the FlowSchema and
// priority level named, which kube-apiserver's configuration controller picks up a moment after
// they are created; it fails after timeout with where the request landed instead.
func (cp *ControlPlane) WaitClassified(ctx context.Context, token, path, schema, level string, timeout time.Duration) error {
	fs, err := cp.Admin.FlowcontrolV1().FlowSchemas().Get(ctx, schema, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pl, err := cp.Admin.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, level, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return Poll(timeout, 100*time.Millisecond, fmt.Sprintf("GET %s classified into FlowSchema %s (uid %s), priority level %s (uid %s)",
		path, schema, fs.UID, level, pl.UID), func() (bool, string) {
		last, err := cp.Classify(ctx, token, path)
		if err != nil {
			return false, fmt.Sprintf("GET %s: %v", path, err)
		}
		if last.FlowSchemaUID == string(fs.UID) && last.PriorityLevelUID == string(pl.UID) {
			return true, ""
		}
		gotFS, gotPL := cp.FlowNames(ctx, last)
		return false, fmt.Sprintf("status %d, FlowSchema %s, priority level %s", last.Status, gotFS, gotPL)
	})
}
