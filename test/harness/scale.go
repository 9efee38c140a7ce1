package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AgentTokens is AgentToken for many nodes at once: for each node a Pod scheduled on it and a token
// bound to that Pod, created by workers goroutines. It returns errors instead of failing a test, so
// it can run off the test goroutine. tokens[i] belongs to nodes[i].
func (cp *ControlPlane) AgentTokens(ctx context.Context, nodes []string, workers int) ([]string, error) {
	tokens := make([]string, len(nodes))
	work := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				tok, err := cp.agentToken(ctx, nodes[i])
				if err != nil {
					errs <- fmt.Errorf("token for node %s: %w", nodes[i], err)
					return
				}
				tokens[i] = tok
			}
		}()
	}
	var err error
feed:
	for i := range nodes {
		select {
		case work <- i:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return tokens, err
}

func (cp *ControlPlane) agentToken(ctx context.Context, node string) (string, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "nodeaddr-", Namespace: "kube-system"},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "nodeaddr",
			Containers:         []corev1.Container{{Name: "nodeaddr", Image: "nodeaddr:test"}},
		},
	}
	// The ServiceAccount admission plugin may not see a just-created ServiceAccount for a moment.
	if err := Poll(10*time.Second, 100*time.Millisecond, "create pod", func() (bool, string) {
		created, err := cp.Admin.CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = created
		return true, ""
	}); err != nil {
		return "", err
	}
	exp := int64(3600)
	tr, err := cp.Admin.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "nodeaddr", &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{
			ExpirationSeconds: &exp,
			BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token request: %w", err)
	}
	return tr.Status.Token, nil
}

// TimedAuditEvent is an audit record with its stage and when the request was received.
type TimedAuditEvent struct {
	AuditEvent
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time `json:"stageTimestamp"`
}

// AuditSince returns user's audit records (every stage) of requests received at or after since, in
// log order. Long-running requests (watches) appear at ResponseStarted when they begin and at
// ResponseComplete when they end.
func (cp *ControlPlane) AuditSince(user string, since time.Time) ([]TimedAuditEvent, error) {
	return cp.AuditSinceMatching(func(u string) bool { return u == user }, since)
}

// AuditSinceMatching is AuditSince for every user that match accepts.
func (cp *ControlPlane) AuditSinceMatching(match func(user string) bool, since time.Time) ([]TimedAuditEvent, error) {
	if err := cp.AuditNotRotated(); err != nil {
		return nil, err
	}
	f, err := os.Open(cp.AuditLog)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []TimedAuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e TimedAuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		if !match(e.User.Username) || e.RequestReceived.Before(since) {
			continue
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// AuditNotRotated fails if kube-apiserver rotated the audit log (lumberjack renames audit.log to
// audit-<time>.log): a reader of audit.log alone would then under-count without saying so.
func (cp *ControlPlane) AuditNotRotated() error {
	ext := filepath.Ext(cp.AuditLog)
	old, err := filepath.Glob(strings.TrimSuffix(cp.AuditLog, ext) + "-*" + ext)
	if err != nil {
		return err
	}
	if len(old) > 0 {
		return fmt.Errorf("the audit log was rotated (%s): its reader would miss every record before the rotation", strings.Join(old, ", "))
	}
	return nil
}
